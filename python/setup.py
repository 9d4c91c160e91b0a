"""Build the ttft package with libttft compiled into it.

    pip install ./python                          # from a checkout of libttft
    pip install --no-build-isolation --no-index ./python    # offline

The package's metadata is in pyproject.toml; this file only adds the C
library: a setuptools extension that compiles libttft's C sources (the
lists TTFT_COMMON_SOURCES, TTFT_RECORD_SOURCES and TTFT_REPORT_SOURCES of
the top-level CMakeLists.txt, read from there, with the HTTP endpoint) with
the defines and flags the CMake build uses, into ttft/_libttft.so, which
the package loads before any other libttft (after an explicit
$TTFT_LIBRARY). No cmake is needed, only a C11 compiler; the library does
not use Python's C API, so Python's headers are not needed either.

The C sources are looked for relative to this file's real location:
  1. _csrc/ beside it (what `setup.py sdist` packs into a source archive);
  2. its parent directory (python/ inside a libttft checkout).
Without them the build stops with a message saying so.
"""

import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
SOURCE_LISTS = ("TTFT_COMMON_SOURCES", "TTFT_RECORD_SOURCES", "TTFT_REPORT_SOURCES")
LIB_NAME = "ttft._libttft"
LIB_FILE = "_libttft.so"  # ttft/_lib.py looks for this name (BUNDLED_NAME)

# What CMakeLists.txt's ttft_configure_lib gives the library (with
# pthreads and the HTTP endpoint, as on any Linux).
DEFINES = [("TTFT_BUILDING", None), ("_GNU_SOURCE", None),
           ("TTFT_HAVE_PTHREADS", "1"), ("TTFT_HAVE_HTTP", "1")]
CFLAGS = ["-std=c11", "-O2", "-fvisibility=hidden", "-fno-semantic-interposition"]
LDFLAGS = ["-pthread"]
LIBRARIES = ["m"]


class SourcesMissing(Exception):
    pass


def source_root(here=HERE):
    """The libttft source tree this package is built from."""
    tried = []
    for root in (os.path.join(here, "_csrc"), os.path.dirname(here)):
        need = [os.path.join(root, "CMakeLists.txt"), os.path.join(root, "include", "ttft.h"),
                os.path.join(root, "src")]
        if all(os.path.exists(p) for p in need):
            return root
        tried.append(root)
    raise SourcesMissing(
        "ttft: the C sources of libttft are not here, so the library cannot be built "
        "into the package.\n"
        "  setup.py: %s\n"
        "  looked for CMakeLists.txt, include/ttft.h and src/ in:\n    %s\n"
        "pip install ./python must run on the python/ directory of a full libttft "
        "checkout (or on a source archive made by `python3 setup.py sdist` there); a copy "
        "of python/ alone is not enough."
        % (os.path.join(here, "setup.py"), "\n    ".join(tried)))


def _strip_cmake_comments(text):
    return re.sub(r"#[^\n]*", "", text)


def cmake_sources(cmakelists_text):
    """The library's C sources as CMakeLists.txt lists them (paths relative
    to the source root, in order): the three TTFT_*_SOURCES lists plus what
    the TTFT_HAVE_HTTP branch appends (the HTTP endpoint). ValueError when
    the file does not have that shape any more."""
    text = _strip_cmake_comments(cmakelists_text)
    out = []
    for name in SOURCE_LISTS:
        m = re.search(r"\bset\(\s*%s\s+([^)]*)\)" % name, text)
        if not m:
            raise ValueError("CMakeLists.txt: no set(%s ...)" % name)
        files = m.group(1).split()
        if not files:
            raise ValueError("CMakeLists.txt: %s is empty" % name)
        out += files
    m = re.search(r"\bif\(\s*TTFT_HAVE_HTTP\s*\)\s*list\(\s*APPEND\s+TTFT_REPORT_SOURCES\s+([^)]*)\)",
                  text)
    if not m:
        raise ValueError("CMakeLists.txt: no if(TTFT_HAVE_HTTP) list(APPEND TTFT_REPORT_SOURCES ...)")
    out += m.group(1).split()
    for f in out:
        if not re.match(r"src/[A-Za-z0-9_/]+\.c\Z", f):
            raise ValueError("CMakeLists.txt: unexpected source entry %r" % f)
    if len(set(out)) != len(out):
        raise ValueError("CMakeLists.txt: a source is listed twice")
    return out


def library_sources(root):
    """Absolute paths of the sources to compile, checked to exist."""
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        rel = cmake_sources(f.read())
    paths = [os.path.join(root, *r.split("/")) for r in rel]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise SourcesMissing("ttft: CMakeLists.txt lists sources that are missing: %s"
                             % ", ".join(missing))
    return paths


WHEEL_MISSING = (
    "ttft: building a wheel needs the 'wheel' package, and this interpreter has none.\n"
    "With --no-build-isolation pip builds with the interpreter's own setuptools and\n"
    "wheel: on Debian/Ubuntu `apt-get install python3-wheel python3-setuptools` and\n"
    "make the venv with --system-site-packages; online, drop --no-build-isolation\n"
    "(pip then fetches them), or `pip install wheel` first.")


def main():
    if any(cmd in ("bdist_wheel", "dist_info", "editable_wheel") for cmd in sys.argv[1:]):
        try:
            import wheel  # noqa: F401  (setuptools < 70.1 takes bdist_wheel from it)
        except ImportError:
            sys.stderr.write("\n%s\n\n" % WHEEL_MISSING)
            sys.exit(1)
    from setuptools import Extension, setup
    from setuptools.command.build_ext import build_ext
    from setuptools.command.sdist import sdist

    try:
        root = source_root()
        sources = library_sources(root)
    except (SourcesMissing, ValueError) as e:
        sys.stderr.write("\n%s\n\n" % e)
        sys.exit(1)

    class build_lib(build_ext):
        """Names the library ttft/_libttft.so: it is a plain C shared
        library loaded with ctypes, not a Python extension module, so it
        carries no Python ABI tag."""

        def get_ext_filename(self, fullname):
            # called with "ttft._libttft" and with "_libttft" (distutils'
            # get_ext_fullpath passes the last component only)
            name = super().get_ext_filename(fullname)
            if fullname.split(".")[-1] == LIB_NAME.split(".")[-1]:
                name = os.path.join(os.path.dirname(name), LIB_FILE)
            return name

        def get_export_symbols(self, ext):
            return []  # no PyInit_: visibility comes from TTFT_API

        def build_extension(self, ext):
            # The sources live outside this directory, where setup() must
            # not name them (egg_info refuses absolute and ../ paths in its
            # manifest); they are handed to the compiler only here.
            if ext.name == LIB_NAME:
                ext.sources = list(sources)
            super().build_extension(ext)

    class sdist_with_c(sdist):
        """A source archive that builds anywhere: the C tree goes in as _csrc/."""

        def make_release_tree(self, base_dir, files):
            super().make_release_tree(base_dir, files)
            dest = os.path.join(base_dir, "_csrc")
            for sub in ("include", "src"):
                shutil.copytree(os.path.join(root, sub), os.path.join(dest, sub),
                                ignore=shutil.ignore_patterns("__pycache__", "*.o"))
            for name in ("CMakeLists.txt", "LICENSE"):
                if os.path.isfile(os.path.join(root, name)):
                    shutil.copy2(os.path.join(root, name), os.path.join(dest, name))

    lib = Extension(
        LIB_NAME,
        sources=[],  # set in build_lib.build_extension
        include_dirs=[os.path.join(root, "include"), os.path.join(root, "src")],
        define_macros=DEFINES,
        extra_compile_args=CFLAGS,
        extra_link_args=LDFLAGS,
        libraries=LIBRARIES,
        language="c",
    )
    setup(ext_modules=[lib], cmdclass={"build_ext": build_lib, "sdist": sdist_with_c})


if __name__ == "__main__":
    main()
