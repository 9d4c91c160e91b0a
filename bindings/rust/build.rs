//! Finds libttft for the linker, in this order:
//!
//! 1. `TTFT_LIB_DIR`: a directory holding `libttft.so` (or `libttft.a`
//!    with `TTFT_STATIC=1`), e.g. a CMake build directory. The crate's own
//!    tests and examples get an rpath to it, so they run without
//!    `LD_LIBRARY_PATH`.
//! 2. the `pkg-config` command (`pkg-config --libs ttft`), which finds an
//!    installed libttft (`make install` installs `ttft.pc`); set
//!    `PKG_CONFIG_PATH` for a non-standard prefix.
//!
//! Neither working is an error that says what to set: a binding that
//! silently linked nothing would only fail later, at link time, with a
//! less helpful message.
use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TTFT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=TTFT_STATIC");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let statik = env::var("TTFT_STATIC").map(|v| v == "1").unwrap_or(false);

    if let Ok(dir) = env::var("TTFT_LIB_DIR") {
        let lib = if statik { "libttft.a" } else { "libttft.so" };
        if !Path::new(&dir).join(lib).exists() {
            panic!("TTFT_LIB_DIR={dir} has no {lib}: build libttft there (make) or unset TTFT_LIB_DIR");
        }
        println!("cargo:rustc-link-search=native={dir}");
        link(statik);
        if !statik {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
        return;
    }

    let out = Command::new("pkg-config").args(["--libs", "--cflags", "ttft"]).output();
    match out {
        Ok(o) if o.status.success() => {
            let flags = String::from_utf8_lossy(&o.stdout).to_string();
            for f in flags.split_whitespace() {
                if let Some(d) = f.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={d}");
                    if !statik {
                        println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
                    }
                }
            }
            link(statik);
        }
        Ok(o) => panic!(
            "libttft not found: `pkg-config --libs ttft` failed ({}). Install libttft \
             (make install; set PKG_CONFIG_PATH to PREFIX/lib/pkgconfig for a custom prefix) \
             or set TTFT_LIB_DIR to a directory holding libttft.so",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "libttft not found: the pkg-config command could not run ({e}). Install pkg-config \
             and libttft, or set TTFT_LIB_DIR to a directory holding libttft.so"
        ),
    }
}

fn link(statik: bool) {
    if statik {
        println!("cargo:rustc-link-lib=static=ttft");
        println!("cargo:rustc-link-lib=dylib=pthread");
        println!("cargo:rustc-link-lib=dylib=m");
    } else {
        println!("cargo:rustc-link-lib=dylib=ttft");
    }
}
