//! Finds libttft for the linker, in this order:
//!
//! 1. `TTFT_LIB_DIR`: a directory holding `libttft.a` / `libttft.so`, e.g.
//!    a CMake build directory;
//! 2. the `pkg-config` command (`pkg-config ttft`), which finds an installed
//!    libttft (`make install` installs `ttft.pc`); set `PKG_CONFIG_PATH` for
//!    a custom prefix.
//!
//! Static by default: libttft.a is linked into every binary that depends on
//! this crate, so a program built against a build tree or a custom prefix
//! runs without `LD_LIBRARY_PATH` and wherever it is copied. (A shared
//! library would need an rpath in the *dependent's* binary, and a build
//! script's `rustc-link-arg` reaches only this crate's own tests and
//! examples, never a downstream crate's binary.) `TTFT_STATIC`:
//!
//! - unset: `libttft.a` if the directory has it, else `libttft.so` (with a
//!   warning: dependents then need an rpath or `LD_LIBRARY_PATH`);
//! - `1`: `libttft.a`, an error if it is missing;
//! - `0`: `libttft.so`. This crate's tests and examples get an rpath to its
//!   directory; a dependent's binary does not (add
//!   `-C link-arg=-Wl,-rpath,DIR` to its RUSTFLAGS, or install into a
//!   directory the dynamic loader searches).
//!
//! Neither route working is an error that says what to set: a binding that
//! silently linked nothing would only fail later, at link time, with a
//! less helpful message.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Copy, PartialEq)]
enum Want {
    Default,
    Static,
    Shared,
}

fn main() {
    println!("cargo:rerun-if-env-changed=TTFT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=TTFT_STATIC");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let want = match env::var("TTFT_STATIC").as_deref() {
        Err(_) | Ok("") => Want::Default,
        Ok("1") => Want::Static,
        Ok("0") => Want::Shared,
        Ok(v) => panic!("TTFT_STATIC={v}: use 1 (link libttft.a), 0 (link libttft.so) or leave it unset (libttft.a if present)"),
    };

    if let Ok(dir) = env::var("TTFT_LIB_DIR") {
        let dir = PathBuf::from(dir);
        println!("cargo:rerun-if-changed={}", dir.join("libttft.a").display());
        println!("cargo:rerun-if-changed={}", dir.join("libttft.so").display());
        let statik = choose(&dir, want, "TTFT_LIB_DIR");
        link(&dir, statik);
        return;
    }

    let libdir = pkg_config(&["--variable=libdir", "ttft"]);
    let libdir = PathBuf::from(libdir.trim());
    let statik = choose(&libdir, want, "pkg-config's libdir");
    link(&libdir, statik);
    if statik {
        // the static library's own dependencies (Libs.private: pthread, m)
        for f in pkg_config(&["--static", "--libs-only-l", "ttft"]).split_whitespace() {
            if let Some(l) = f.strip_prefix("-l") {
                if l != "ttft" {
                    println!("cargo:rustc-link-lib=dylib={l}");
                }
            }
        }
    }
}

/// Static or shared, from what TTFT_STATIC asks and what `dir` holds.
fn choose(dir: &Path, want: Want, from: &str) -> bool {
    let a = dir.join("libttft.a").exists();
    let so = dir.join("libttft.so").exists();
    match want {
        Want::Static if a => true,
        Want::Static => panic!("TTFT_STATIC=1 but {from} {} has no libttft.a", dir.display()),
        Want::Shared if so => false,
        Want::Shared => panic!("TTFT_STATIC=0 but {from} {} has no libttft.so", dir.display()),
        Want::Default if a => true,
        Want::Default if so => {
            println!(
                "cargo:warning=linking the shared libttft.so of {} (no libttft.a there): a binary of a crate \
                 that depends on ttft needs -C link-arg=-Wl,-rpath,{} or LD_LIBRARY_PATH to run",
                dir.display(),
                dir.display()
            );
            false
        }
        Want::Default => panic!(
            "{from} {} has neither libttft.a nor libttft.so: build libttft there (make) or point \
             TTFT_LIB_DIR / PKG_CONFIG_PATH at one that has",
            dir.display()
        ),
    }
}

fn link(dir: &Path, statik: bool) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    if statik {
        println!("cargo:rustc-link-lib=static=ttft");
        println!("cargo:rustc-link-lib=dylib=pthread");
        println!("cargo:rustc-link-lib=dylib=m");
    } else {
        println!("cargo:rustc-link-lib=dylib=ttft");
        // reaches this crate's own tests and examples only (see above)
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
}

fn pkg_config(args: &[&str]) -> String {
    match Command::new("pkg-config").args(args).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!(
            "libttft not found: `pkg-config {}` failed ({}). Install libttft (make install; set \
             PKG_CONFIG_PATH to PREFIX/lib/pkgconfig for a custom prefix) or set TTFT_LIB_DIR to a \
             directory holding libttft.a or libttft.so (a build directory)",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "libttft not found: the pkg-config command could not run ({e}). Install pkg-config and \
             libttft, or set TTFT_LIB_DIR to a directory holding libttft.a or libttft.so (a build directory)"
        ),
    }
}
