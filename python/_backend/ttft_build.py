"""ttft_build: the build backend of the ttft Python package (PEP 517, PEP 660).

Standard library only, so that

    pip install ./python

works in a fresh venv of any CPython >= 3.8 with no package index and no
setuptools or wheel: pyproject.toml names this module (build-backend =
"ttft_build", backend-path = ["_backend"]) and requires nothing, so pip's
isolated build environment has nothing to fetch.

What it builds:
  - a wheel: the pure-Python package ttft/ plus ttft/_libttft.so, libttft
    compiled from the C sources of the checkout (the lists
    TTFT_COMMON_SOURCES, TTFT_RECORD_SOURCES and TTFT_REPORT_SOURCES of the
    top-level CMakeLists.txt, read from there, with the HTTP endpoint) with
    the defines and flags the CMake build gives the library. No cmake is
    needed, only a C11 compiler ($CC, default cc; $CPPFLAGS, $CFLAGS and
    $LDFLAGS are added after ours); the library does not use Python's C
    API, so Python's headers are not needed either. The library is a plain
    C shared library loaded with ctypes, so the wheel is tagged
    py3-none-<platform>: one build serves every Python 3 on the machine.
  - an editable wheel (pip install -e ./python): a finder that imports
    ttft from this checkout's python/ttft, and the library compiled in place
    into python/ttft/_libttft.so (git-ignored);
  - a source archive (python -m build --sdist, or build_sdist): the package
    plus the C tree as _csrc/, so it builds far from any checkout.

The C sources are looked for relative to this package directory (python/):
  1. _csrc/ inside it (what the source archive carries);
  2. its parent directory (python/ inside a libttft checkout).
Without them the build stops with a message saying so.

Metadata comes from pyproject.toml's [project] table (read with tomllib
where Python has it, 3.11+, otherwise with the small reader below, which
the tests check against tomllib).

config_settings (pip install --config-settings KEY=VALUE): jobs=N, the
number of compiler processes (default: the CPUs this process may use).
$TTFT_BUILD_JOBS does the same.
"""

import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.realpath(__file__))
PKG_ROOT = os.path.dirname(HERE)                 # python/: pyproject.toml, ttft/
PACKAGE = "ttft"
SOURCE_LISTS = ("TTFT_COMMON_SOURCES", "TTFT_RECORD_SOURCES", "TTFT_REPORT_SOURCES")
LIB_FILE = "_libttft.so"  # ttft/_lib.py looks for this name (BUNDLED_NAME)
GENERATOR = "ttft_build (libttft's in-tree PEP 517 backend)"

# What CMakeLists.txt's ttft_configure_lib gives the library (with
# pthreads and the HTTP endpoint, as on any Linux).
DEFINES = ["-DTTFT_BUILDING", "-D_GNU_SOURCE", "-DTTFT_HAVE_PTHREADS=1", "-DTTFT_HAVE_HTTP=1"]
CFLAGS = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-semantic-interposition"]
LDFLAGS = ["-shared", "-pthread"]
LIBS = ["-lm"]

# files of ttft/ that never go into a wheel: what `make install` writes
# into an installed copy, and the library an editable install compiled in
# place (a wheel compiles its own)
NOT_SHIPPED = ("_install_paths.py", LIB_FILE)


class BuildError(Exception):
    """A build that cannot go on; the message says why and what to do."""


# ------------------------------------------------------------ C sources
def source_root(pkg_root=PKG_ROOT):
    """The libttft source tree this package is built from."""
    tried = []
    for root in (os.path.join(pkg_root, "_csrc"), os.path.dirname(pkg_root)):
        need = [os.path.join(root, "CMakeLists.txt"), os.path.join(root, "include", "ttft.h"),
                os.path.join(root, "src")]
        if all(os.path.exists(p) for p in need):
            return root
        tried.append(root)
    raise BuildError(
        "ttft: the C sources of libttft are not here, so the library cannot be built "
        "into the package.\n"
        "  package directory: %s\n"
        "  looked for CMakeLists.txt, include/ttft.h and src/ in:\n    %s\n"
        "pip install ./python must run on the python/ directory of a full libttft "
        "checkout (or on a source archive built from it, which carries them in _csrc/); "
        "a copy of python/ alone is not enough."
        % (pkg_root, "\n    ".join(tried)))


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
        try:
            rel = cmake_sources(f.read())
        except ValueError as e:
            raise BuildError("ttft: %s (in %s)" % (e, root))
    paths = [os.path.join(root, *r.split("/")) for r in rel]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise BuildError("ttft: CMakeLists.txt lists sources that are missing: %s"
                         % ", ".join(missing))
    return paths


def _jobs(config_settings):
    v = (config_settings or {}).get("jobs") or os.environ.get("TTFT_BUILD_JOBS")
    if v:
        try:
            n = int(v)
        except ValueError:
            raise BuildError("ttft: jobs=%r is not a number" % (v,))
        return max(1, n)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _log(msg):
    # pip shows a backend's output with -v, and all of it when the build fails
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


# What cmake/platform.cmake tests at configure time (glibc and musl
# differ), tested here the same way with the same compiler: each probe is
# a small program, compiled (and linked, where a symbol must exist); its
# success is the definition's 1. Name -> (program, link?).
PLATFORM_PROBES = (
    ("TTFT_HAVE_LINUX_MEMBARRIER_H", "#include <linux/membarrier.h>\nint main(void) { return 0; }\n", False),
    ("TTFT_HAVE_SYS_MEMBARRIER_H", "#include <sys/membarrier.h>\nint main(void) { return 0; }\n", False),
    ("TTFT_HAVE_PTHREAD_SETNAME_NP",
     "#include <pthread.h>\nint main(void) { return pthread_setname_np(pthread_self(), \"x\"); }\n", True),
    ("TTFT_STRERROR_R_CHAR_P",
     "#include <string.h>\nint main(void) {\n  char b[64];\n"
     "  _Static_assert(__builtin_types_compatible_p(__typeof__(strerror_r(1, b, sizeof b)), char *), \"GNU\");\n"
     "  return strerror_r(1, b, sizeof b) == 0;\n}\n", True),
    ("TTFT_HAVE_GETRANDOM",
     "#include <sys/random.h>\nint main(void) { char b[8]; return (int)getrandom(b, sizeof b, 0); }\n", True),
)


def platform_defines(cc, flags=()):
    """-DNAME=1 or -DNAME=0 for each of PLATFORM_PROBES, as
    cmake/platform.cmake defines them, from what cc compiles here."""
    out = []
    with tempfile.TemporaryDirectory(prefix="ttft-probe-") as d:
        for name, prog, link in PLATFORM_PROBES:
            src = os.path.join(d, name + ".c")
            with open(src, "w") as f:
                f.write(prog)
            cmd = cc + ["-D_GNU_SOURCE"] + list(flags) + [src, "-o", os.path.join(d, name)]
            cmd += ["-pthread"] if link else ["-c"]
            try:
                ok = subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
            except OSError:
                ok = False  # no compiler: the library's compile says so, clearly
            out.append("-D%s=%d" % (name, 1 if ok else 0))
    return out


def compile_library(out_path, config_settings=None, pkg_root=PKG_ROOT):
    """Compile libttft into out_path (a shared library). Returns the
    compiler commands run. BuildError when a source does not compile or
    there is no compiler."""
    root = source_root(pkg_root)
    sources = library_sources(root)
    cc = os.environ.get("CC", "").split() or ["cc"]
    env_cpp = os.environ.get("CPPFLAGS", "").split()
    env_c = os.environ.get("CFLAGS", "").split()
    env_ld = os.environ.get("LDFLAGS", "").split()
    incs = ["-I" + os.path.join(root, "include"), "-I" + os.path.join(root, "src")]
    jobs = _jobs(config_settings)
    defines = DEFINES + platform_defines(cc, env_cpp + env_c)
    _log("ttft: platform: " + " ".join(d[2:] for d in defines[len(DEFINES):]))
    cmds = []
    with tempfile.TemporaryDirectory(prefix="ttft-build-") as obj_dir:
        objs = []
        pending = []
        for i, src in enumerate(sources):
            obj = os.path.join(obj_dir, "%02d_%s.o" % (i, os.path.basename(src)[:-2]))
            objs.append(obj)
            pending.append(cc + defines + incs + CFLAGS + env_cpp + env_c + ["-c", src, "-o", obj])
        _log("ttft: compiling libttft (%d sources, %d at a time) from %s" % (len(sources), jobs, root))
        running = []
        failed = []

        def reap(block):
            for entry in list(running):
                proc, cmd = entry
                if block or proc.poll() is not None:
                    out = proc.communicate()[0]
                    running.remove(entry)
                    if out:
                        _log(out.rstrip())
                    if proc.returncode != 0:
                        failed.append((cmd, proc.returncode))
                    if block:
                        return

        for cmd in pending:
            while len(running) >= jobs:
                reap(block=False)
                if len(running) >= jobs:
                    time.sleep(0.02)
            _log(" ".join(cmd))
            cmds.append(cmd)
            try:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        universal_newlines=True)
            except OSError as e:
                for p, _ in running:
                    p.wait()
                raise BuildError(
                    "ttft: cannot run the C compiler %r (%s): building the package compiles "
                    "libttft, which needs a C11 compiler (Debian: apt-get install gcc; or set CC)"
                    % (cc[0], e))
            running.append((proc, cmd))
            if failed:
                break
        while running:
            reap(block=True)
        if failed:
            cmd, rc = failed[0]
            raise BuildError("ttft: the C compiler failed (exit %d) on %s; its messages are above"
                             % (rc, cmd[cmd.index("-c") + 1]))
        link = cc + LDFLAGS + objs + env_ld + ["-o", out_path] + LIBS
        _log(" ".join(link))
        cmds.append(link)
        try:
            out = subprocess.run(link, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 universal_newlines=True)
        except OSError as e:
            raise BuildError("ttft: cannot run the linker %r (%s)" % (cc[0], e))
        if out.stdout:
            _log(out.stdout.rstrip())
        if out.returncode != 0:
            raise BuildError("ttft: linking %s failed (exit %d)" % (out_path, out.returncode))
    return cmds


# ------------------------------------------------------- pyproject.toml
class TomlError(ValueError):
    pass


_BASIC_ESC = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _TomlReader:
    """The part of TOML that pyproject.toml files use: tables, dotted and
    quoted keys, basic and literal strings, integers, booleans, arrays
    (also over several lines) and inline tables, comments. Anything else
    is a TomlError, never a guess."""

    def __init__(self, text):
        self.s = text
        self.i = 0

    def err(self, what):
        line = self.s.count("\n", 0, self.i) + 1
        raise TomlError("pyproject.toml line %d: %s" % (line, what))

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_ws(self, newlines=False):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#" and newlines:
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                break

    def end_of_line(self):
        self.skip_ws()
        if self.peek() == "#":
            while self.i < len(self.s) and self.s[self.i] != "\n":
                self.i += 1
        if self.peek() not in ("", "\n", "\r"):
            self.err("unexpected %r" % self.peek())

    def key(self):
        parts = []
        while True:
            self.skip_ws()
            c = self.peek()
            if c == '"':
                parts.append(self.basic_string())
            elif c == "'":
                parts.append(self.literal_string())
            else:
                m = re.compile(r"[A-Za-z0-9_-]+").match(self.s, self.i)
                if not m:
                    self.err("expected a key")
                parts.append(m.group(0))
                self.i = m.end()
            self.skip_ws()
            if self.peek() == ".":
                self.i += 1
                continue
            return parts

    def basic_string(self):
        if self.s.startswith('"""', self.i):
            self.err("multi-line strings are not supported here")
        self.i += 1
        out = []
        while True:
            c = self.peek()
            if c == "" or c == "\n":
                self.err("unterminated string")
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                e = self.peek()
                self.i += 1
                if e in _BASIC_ESC:
                    out.append(_BASIC_ESC[e])
                elif e in "uU":
                    n = 4 if e == "u" else 8
                    h = self.s[self.i:self.i + n]
                    if not re.match(r"[0-9A-Fa-f]{%d}\Z" % n, h):
                        self.err("bad \\%s escape" % e)
                    out.append(chr(int(h, 16)))
                    self.i += n
                else:
                    self.err("bad escape \\%s" % e)
            else:
                out.append(c)

    def literal_string(self):
        if self.s.startswith("'''", self.i):
            self.err("multi-line strings are not supported here")
        j = self.s.find("'", self.i + 1)
        nl = self.s.find("\n", self.i + 1)
        if j < 0 or (0 <= nl < j):
            self.err("unterminated string")
        v = self.s[self.i + 1:j]
        self.i = j + 1
        return v

    def value(self):
        self.skip_ws()
        c = self.peek()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        if c == "[":
            self.i += 1
            arr = []
            while True:
                self.skip_ws(newlines=True)
                if self.peek() == "]":
                    self.i += 1
                    return arr
                arr.append(self.value())
                self.skip_ws(newlines=True)
                if self.peek() == ",":
                    self.i += 1
                elif self.peek() != "]":
                    self.err("expected , or ] in an array")
        if c == "{":
            self.i += 1
            tbl = {}
            self.skip_ws()
            if self.peek() == "}":
                self.i += 1
                return tbl
            while True:
                k = self.key()
                if self.peek() != "=":
                    self.err("expected = in an inline table")
                self.i += 1
                self.put(tbl, k, self.value())
                self.skip_ws()
                if self.peek() == ",":
                    self.i += 1
                elif self.peek() == "}":
                    self.i += 1
                    return tbl
                else:
                    self.err("expected , or } in an inline table")
        m = re.compile(r"(true|false)\b|[+-]?(0|[1-9](_?[0-9])*)\b(?![.eE:-])").match(self.s, self.i)
        if not m:
            self.err("unsupported value")
        self.i = m.end()
        t = m.group(0)
        if t in ("true", "false"):
            return t == "true"
        return int(t.replace("_", ""))

    def put(self, tbl, keys, v):
        for k in keys[:-1]:
            tbl = tbl.setdefault(k, {})
            if not isinstance(tbl, dict):
                self.err("key %s is not a table" % ".".join(keys))
        if keys[-1] in tbl:
            self.err("duplicate key %s" % ".".join(keys))
        tbl[keys[-1]] = v

    def parse(self):
        doc = {}
        cur = doc
        while True:
            self.skip_ws(newlines=True)
            if self.i >= len(self.s):
                return doc
            if self.peek() == "[":
                if self.s.startswith("[[", self.i):
                    self.err("arrays of tables are not supported here")
                self.i += 1
                keys = self.key()
                if self.peek() != "]":
                    self.err("expected ]")
                self.i += 1
                cur = doc
                for k in keys:
                    cur = cur.setdefault(k, {})
                    if not isinstance(cur, dict):
                        self.err("%s is not a table" % ".".join(keys))
                self.end_of_line()
                continue
            keys = self.key()
            if self.peek() != "=":
                self.err("expected =")
            self.i += 1
            self.put(cur, keys, self.value())
            self.end_of_line()


def parse_toml(text, use_tomllib=True):
    """pyproject.toml as a dict: tomllib when this Python has it (and
    use_tomllib), the subset reader otherwise."""
    if use_tomllib:
        try:
            import tomllib
        except ImportError:
            pass
        else:
            return tomllib.loads(text)
    return _TomlReader(text).parse()


def project(pkg_root=PKG_ROOT):
    """pyproject.toml's [project] table, checked for what this backend needs."""
    with open(os.path.join(pkg_root, "pyproject.toml"), encoding="utf-8") as f:
        proj = parse_toml(f.read()).get("project")
    if not isinstance(proj, dict):
        raise BuildError("ttft: pyproject.toml has no [project] table")
    for k in ("name", "version", "description"):
        if not isinstance(proj.get(k), str) or not proj[k]:
            raise BuildError("ttft: pyproject.toml [project] needs %s" % k)
    if proj.get("dynamic"):
        raise BuildError("ttft: this backend has no dynamic metadata (%s)" % proj["dynamic"])
    if not re.match(r"[A-Za-z0-9]+([._-][A-Za-z0-9]+)*\Z", proj["name"]):
        raise BuildError("ttft: bad project name %r" % proj["name"])
    if not re.match(r"[0-9]+(\.[0-9]+)*\Z", proj["version"]):
        raise BuildError("ttft: version %r: this backend takes plain release numbers"
                         % proj["version"])
    return proj


def _dist_name(proj):
    return re.sub(r"[-_.]+", "_", proj["name"]).lower()


def metadata(proj):
    """The METADATA (Core metadata 2.1) of the distribution."""
    lines = ["Metadata-Version: 2.1", "Name: " + proj["name"], "Version: " + proj["version"],
             "Summary: " + proj["description"]]
    if proj.get("requires-python"):
        lines.append("Requires-Python: " + proj["requires-python"])
    lic = proj.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: " + lic["text"])
    for c in proj.get("classifiers", []):
        lines.append("Classifier: " + c)
    for d in proj.get("dependencies", []):
        lines.append("Requires-Dist: " + d)
    for label, url in sorted((proj.get("urls") or {}).items()):
        lines.append("Project-URL: %s, %s" % (label, url))
    body = ""
    readme = proj.get("readme")
    if isinstance(readme, dict) and "text" in readme:
        lines.append("Description-Content-Type: " + readme.get("content-type", "text/plain"))
        body = readme["text"]
    return "\n".join(lines) + "\n\n" + (body + "\n" if body else "")


def wheel_tag():
    """py3-none-<platform>: the library is loaded with ctypes and uses no
    Python ABI, so any Python 3 on this platform can use the wheel."""
    plat = re.sub(r"[^A-Za-z0-9_]", "_", sysconfig.get_platform())
    return "py3-none-" + plat


# --------------------------------------------------------------- wheels
def _epoch():
    # reproducible archives: SOURCE_DATE_EPOCH when set (zip starts at 1980)
    try:
        t = int(os.environ["SOURCE_DATE_EPOCH"])
    except (KeyError, ValueError):
        t = 315532800
    return max(t, 315532800)


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class _Wheel:
    """A wheel (PEP 427) written entry by entry; RECORD goes last."""

    def __init__(self, path, dist_info):
        self.path = path
        self.dist_info = dist_info
        self.records = []
        self.zf = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.date = time.gmtime(_epoch())[:6]

    def add(self, arcname, data, mode=0o644):
        if isinstance(data, str):
            data = data.encode("utf-8")
        zi = zipfile.ZipInfo(arcname, self.date)
        zi.external_attr = (0o100000 | mode) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(zi, data)
        self.records.append("%s,%s,%d" % (arcname, _record_hash(data), len(data)))

    def close(self):
        rec = self.dist_info + "/RECORD"
        self.records.append(rec + ",,")
        data = ("\n".join(self.records) + "\n").encode("utf-8")
        zi = zipfile.ZipInfo(rec, self.date)
        zi.external_attr = (0o100000 | 0o644) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(zi, data)
        self.zf.close()


def _dist_info_files(proj, tag, pkg_root):
    out = [("METADATA", metadata(proj)),
           ("WHEEL", "Wheel-Version: 1.0\nGenerator: %s\nRoot-Is-Purelib: false\nTag: %s\n"
            % (GENERATOR, tag))]
    for cand in (os.path.join(pkg_root, "_csrc", "LICENSE"),
                 os.path.join(os.path.dirname(pkg_root), "LICENSE")):
        if os.path.isfile(cand):
            with open(cand, "rb") as f:
                out.append(("LICENSE", f.read()))
            break
    return out


def package_files(pkg_root=PKG_ROOT):
    """(arcname, path) of the package's Python files, sorted."""
    pkg = os.path.join(pkg_root, PACKAGE)
    out = []
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith(".py") and f not in NOT_SHIPPED:
                p = os.path.join(dirpath, f)
                out.append((os.path.relpath(p, pkg_root).replace(os.sep, "/"), p))
    if not any(a == PACKAGE + "/__init__.py" for a, _ in out):
        raise BuildError("ttft: %s/__init__.py is missing" % pkg)
    return out


def _write_metadata_dir(metadata_directory, proj, tag, pkg_root):
    name = "%s-%s.dist-info" % (_dist_name(proj), proj["version"])
    d = os.path.join(metadata_directory, name)
    os.makedirs(d, exist_ok=True)
    for fname, data in _dist_info_files(proj, tag, pkg_root):
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return name


def _run(fn):
    try:
        return fn()
    except BuildError as e:
        sys.stderr.write("\n%s\n\n" % e)
        raise SystemExit(1)


# ---------------------------------------------------------- PEP 517 hooks
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _run(lambda: _write_metadata_dir(metadata_directory, project(), wheel_tag(), PKG_ROOT))


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None, pkg_root=None):
    return _run(lambda: _build_wheel(wheel_directory, config_settings, pkg_root or PKG_ROOT))


def _build_wheel(wheel_directory, config_settings, pkg_root):
    proj = project(pkg_root)
    tag = wheel_tag()
    files = package_files(pkg_root)
    dist = _dist_name(proj)
    dist_info = "%s-%s.dist-info" % (dist, proj["version"])
    name = "%s-%s-%s.whl" % (dist, proj["version"], tag)
    os.makedirs(wheel_directory, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ttft-wheel-") as tmp:
        lib = os.path.join(tmp, LIB_FILE)
        compile_library(lib, config_settings, pkg_root)
        part = os.path.join(wheel_directory, name + ".part")
        w = _Wheel(part, dist_info)
        try:
            for arc, path in files:
                with open(path, "rb") as f:
                    w.add(arc, f.read())
            with open(lib, "rb") as f:
                w.add(PACKAGE + "/" + LIB_FILE, f.read(), 0o755)
            for fname, data in _dist_info_files(proj, tag, pkg_root):
                w.add(dist_info + "/" + fname, data)
        finally:
            w.close()
        os.replace(part, os.path.join(wheel_directory, name))
    _log("ttft: wrote %s" % os.path.join(wheel_directory, name))
    return name


EDITABLE_FINDER = '''\
"""Editable install of ttft (pip install -e): imports ttft from %(src)r."""
import importlib.machinery
import sys

SOURCE = %(src)r


class _TtftEditableFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "ttft":
            return None
        return importlib.machinery.PathFinder.find_spec(name, [SOURCE])


def install():
    if _TtftEditableFinder not in sys.meta_path and not any(
            getattr(f, "__name__", "") == "_TtftEditableFinder" for f in sys.meta_path):
        sys.meta_path.append(_TtftEditableFinder)
'''


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel whose .pth installs a finder for ttft in this
    checkout; the library is compiled in place (python/ttft/_libttft.so),
    where the package looks first."""
    return _run(lambda: _build_editable(wheel_directory, config_settings, PKG_ROOT))


def _build_editable(wheel_directory, config_settings, pkg_root):
    proj = project(pkg_root)
    tag = wheel_tag()
    package_files(pkg_root)  # the package is there
    dist = _dist_name(proj)
    dist_info = "%s-%s.dist-info" % (dist, proj["version"])
    name = "%s-%s-%s.whl" % (dist, proj["version"], tag)
    lib = os.path.join(pkg_root, PACKAGE, LIB_FILE)
    tmp_lib = lib + ".tmp%d" % os.getpid()
    try:
        compile_library(tmp_lib, config_settings, pkg_root)
        os.replace(tmp_lib, lib)  # a running process keeps its old mapping
    finally:
        if os.path.exists(tmp_lib):
            os.unlink(tmp_lib)
    mod = "__editable___%s_finder" % dist
    os.makedirs(wheel_directory, exist_ok=True)
    part = os.path.join(wheel_directory, name + ".part")
    w = _Wheel(part, dist_info)
    try:
        w.add(mod + ".py", EDITABLE_FINDER % {"src": os.path.abspath(pkg_root)})
        w.add("__editable__.%s-%s.pth" % (dist, proj["version"]),
              "import %s; %s.install()\n" % (mod, mod))
        for fname, data in _dist_info_files(proj, tag, pkg_root):
            w.add(dist_info + "/" + fname, data)
    finally:
        w.close()
    os.replace(part, os.path.join(wheel_directory, name))
    return name


def build_sdist(sdist_directory, config_settings=None, pkg_root=None):
    return _run(lambda: _build_sdist(sdist_directory, pkg_root or PKG_ROOT))


def _build_sdist(sdist_directory, pkg_root):
    proj = project(pkg_root)
    root = source_root(pkg_root)
    sources = library_sources(root)
    dist = _dist_name(proj)
    top = "%s-%s" % (dist, proj["version"])
    name = top + ".tar.gz"
    entries = [("pyproject.toml", os.path.join(pkg_root, "pyproject.toml")),
               ("_backend/ttft_build.py", os.path.join(pkg_root, "_backend", "ttft_build.py"))]
    entries += package_files(pkg_root)
    csrc = [("CMakeLists.txt", os.path.join(root, "CMakeLists.txt"))]
    if os.path.isfile(os.path.join(root, "LICENSE")):
        csrc.append(("LICENSE", os.path.join(root, "LICENSE")))
    for sub in ("include", "src"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith((".c", ".h", ".hpp", ".md")):
                    p = os.path.join(dirpath, f)
                    csrc.append((os.path.relpath(p, root).replace(os.sep, "/"), p))
    have = set(p for _, p in csrc)
    if not all(s in have for s in sources):
        raise BuildError("ttft: a listed source would be left out of the archive")
    entries += [("_csrc/" + a, p) for a, p in csrc]
    os.makedirs(sdist_directory, exist_ok=True)
    part = os.path.join(sdist_directory, name + ".part")
    mtime = _epoch()

    def info(arc, size, mode=0o644):
        ti = tarfile.TarInfo(top + "/" + arc)
        ti.size, ti.mtime, ti.mode = size, mtime, mode
        ti.uname = ti.gname = "root"
        return ti

    with tarfile.open(part, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = metadata(proj).encode("utf-8")
        tar.addfile(info("PKG-INFO", len(pkg_info)), io.BytesIO(pkg_info))
        for arc, path in entries:
            with open(path, "rb") as f:
                data = f.read()
            tar.addfile(info(arc, len(data)), io.BytesIO(data))
    os.replace(part, os.path.join(sdist_directory, name))
    return name


def _main(argv):
    """python3 _backend/ttft_build.py wheel|sdist|lib OUTDIR — the hooks by
    hand (the tests and the curious; pip calls the hooks itself)."""
    if len(argv) != 3 or argv[1] not in ("wheel", "sdist", "lib"):
        sys.stderr.write("usage: ttft_build.py wheel|sdist|lib OUTDIR\n")
        return 2
    out = argv[2]
    if argv[1] == "wheel":
        print(build_wheel(out))
    elif argv[1] == "sdist":
        print(build_sdist(out))
    else:
        os.makedirs(out, exist_ok=True)
        _run(lambda: compile_library(os.path.join(out, LIB_FILE)))
        print(os.path.join(out, LIB_FILE))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
