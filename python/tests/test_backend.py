"""`pip install ./python` with nothing but the standard library (issues 13.3, 21.1).

python/_backend/ttft_build.py is the package's PEP 517 build backend: it
compiles libttft's C sources into the package as ttft/_libttft.so and
writes the wheel itself, so no setuptools, no wheel and no package index
are needed. These tests check that its source list is the CMake build's,
that its wheel is a valid wheel (RECORD hashes, WHEEL, METADATA) whose
library exports exactly the ABI and is the library the package loads
first, the editable install, its pyproject reader against tomllib, that a
copy of python/ without the C tree and a broken compiler fail with clear
messages, and that a source archive carries the C tree with it.
(.ci/steps.d/60-python.sh runs the real `pip install ./python` in fresh
venvs with no index, no setuptools and no wheel.)
"""

import base64
import email.parser
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
import zipfile

from support import PYDIR

ROOT = os.path.dirname(PYDIR)
BACKEND = os.path.join(PYDIR, "_backend", "ttft_build.py")
IN_CI = bool(os.environ.get("CI"))


def load_backend(path=BACKEND):
    spec = importlib.util.spec_from_file_location("ttft_build_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cmake_text():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return f.read()


def abi_symbols():
    with open(os.path.join(ROOT, "tests", "abi", "symbols.txt"), encoding="utf-8") as f:
        return sorted(l.strip() for l in f if l.strip() and not l.startswith("#"))


def run(cmd, cwd, env=None, timeout=600):
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TTFT_LIBRARY", "PYTHONPATH", "CC", "CFLAGS", "LDFLAGS", "CPPFLAGS")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def copy_tree(dest, with_c=True):
    """A copy of python/ (and, with_c, the C tree beside it, as in a checkout)."""
    py = os.path.join(dest, "python")
    shutil.copytree(PYDIR, py, ignore=shutil.ignore_patterns("__pycache__", "*.so*", "tests"))
    if with_c:
        for sub in ("include", "src"):
            shutil.copytree(os.path.join(ROOT, sub), os.path.join(dest, sub))
        for f in ("CMakeLists.txt", "LICENSE"):
            shutil.copy2(os.path.join(ROOT, f), dest)
    return py


class SourceList(unittest.TestCase):
    def setUp(self):
        self.b = load_backend()

    def test_platform_probes_are_cmakes(self):
        # the backend tests what cmake/platform.cmake tests, every name of
        # it, and finds this machine's libc as CMake does: a wheel built
        # without them took glibc's GNU strerror_r for the XSI one and said
        # "errno 98" where the CMake build says "Address already in use"
        with open(os.path.join(ROOT, "cmake", "platform.cmake")) as f:
            text = f.read()
        m = re.search(r"foreach\(_v ([^)]*)\)", text)
        self.assertIsNotNone(m)
        self.assertEqual(sorted(m.group(1).split()), sorted(n for n, _, _ in self.b.PLATFORM_PROBES))
        got = dict(d[2:].split("=") for d in self.b.platform_defines(["cc"]))
        self.assertEqual(set(got.values()) <= {"0", "1"}, True)
        import platform
        if platform.libc_ver()[0] == "glibc":
            self.assertEqual(got["TTFT_STRERROR_R_CHAR_P"], "1")
            self.assertEqual(got["TTFT_HAVE_GETRANDOM"], "1")
            self.assertEqual(got["TTFT_HAVE_PTHREAD_SETNAME_NP"], "1")

    def test_sources_are_the_cmake_lists_plus_the_http_endpoint(self):
        files = self.b.cmake_sources(cmake_text())
        self.assertIn("src/record/hooks.c", files)
        self.assertIn("src/report/http.c", files)
        self.assertNotIn("src/report/http_none.c", files)
        self.assertIn("src/report/otlp.c", files)
        self.assertNotIn("src/report/otlp_none.c", files)
        # every C file of the library is accounted for: compiled, or the
        # stand-ins for builds without HTTP (the endpoint and the OTLP pusher)
        on_disk = sorted(os.path.relpath(p, ROOT).replace(os.sep, "/")
                         for p in glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True))
        self.assertEqual(sorted(files + ["src/report/http_none.c", "src/report/otlp_none.c"]), on_disk)
        paths = self.b.library_sources(ROOT)
        self.assertEqual(len(paths), len(files))
        self.assertTrue(all(os.path.isfile(p) for p in paths))

    def test_sources_are_what_cmake_compiled(self):
        # The CMake build next to the library under test (ctest sets
        # TTFT_LIBRARY to it) has one object per source of ttft_shared.
        lib = os.environ.get("TTFT_LIBRARY", "")
        objdir = os.path.join(os.path.dirname(lib), "CMakeFiles", "ttft_shared.dir")
        if not lib or not os.path.isdir(objdir):
            if IN_CI:
                self.fail("no CMake object directory next to TTFT_LIBRARY=%r" % lib)
            self.skipTest("run by ctest (TTFT_LIBRARY in a CMake build tree) to compare")
        built = sorted(os.path.relpath(p, objdir)[:-len(".o")].replace(os.sep, "/")
                       for p in glob.glob(os.path.join(objdir, "src", "**", "*.c.o"),
                                          recursive=True))
        self.assertTrue(built)
        self.assertEqual(sorted(self.b.cmake_sources(cmake_text())), built)

    def test_a_changed_cmakelists_is_refused_not_guessed(self):
        text = cmake_text()
        broken = {
            "no common list": text.replace("set(TTFT_COMMON_SOURCES", "set(TTFT_COMMON_SRCS"),
            "no http branch": text.replace("if(TTFT_HAVE_HTTP)\n  list(APPEND", "if(TTFT_HAVE_HTTP)\n  #"),
            "a C++ source": text.replace("src/common/util.c", "src/common/util.cpp"),
            "a duplicate": text.replace("src/common/hist.c", "src/common/util.c"),
        }
        for what, t in broken.items():
            self.assertNotEqual(t, text, what)
            with self.assertRaises(ValueError, msg=what):
                self.b.cmake_sources(t)
        # comments with parentheses inside a list do not end it early
        ok = textwrap.dedent("""
            set(TTFT_COMMON_SOURCES
              src/common/a.c  # (not the end)
              src/common/b.c)
            set(TTFT_RECORD_SOURCES src/record/c.c)
            set(TTFT_REPORT_SOURCES src/report/d.c)
            if(TTFT_HAVE_HTTP)
              list(APPEND TTFT_REPORT_SOURCES src/report/http.c)
            else()
              list(APPEND TTFT_REPORT_SOURCES src/report/http_none.c)
            endif()
        """)
        self.assertEqual(self.b.cmake_sources(ok),
                         ["src/common/a.c", "src/common/b.c", "src/record/c.c",
                          "src/report/d.c", "src/report/http.c"])


class Pyproject(unittest.TestCase):
    """Python < 3.11 has no tomllib: the backend's own reader must read
    pyproject.toml exactly as tomllib does, and refuse what it cannot read."""

    def setUp(self):
        self.b = load_backend()
        with open(os.path.join(PYDIR, "pyproject.toml"), encoding="utf-8") as f:
            self.text = f.read()

    def test_the_subset_reader_agrees_with_tomllib(self):
        try:
            import tomllib
        except ImportError:
            if sys.version_info >= (3, 11):
                raise
            self.skipTest("tomllib is Python 3.11+")
        self.assertEqual(self.b.parse_toml(self.text, use_tomllib=False), tomllib.loads(self.text))
        sample = textwrap.dedent(r'''
            # comment
            top = "a\tb \u00e9 \"q\" \\"   # trailing comment
            [a.b]
            "quoted key" = 'lit\eral'
            n = -1_000
            t = true
            arr = [ 1, 2,   # inside
              "x", ]
            empty = []
            inline = {x = 1, y = { z = "w" }}
            dotted.key = false
            [c]
            k = 0
        ''')
        self.assertEqual(self.b.parse_toml(sample, use_tomllib=False), tomllib.loads(sample))

    def test_the_subset_reader_refuses_what_it_does_not_know(self):
        for bad in ('a = """x"""', "a = 1.5", "a = 1979-05-27", "[[t]]\nx = 1",
                    'a = "x', "a = 1\na = 2", "a = [1, 2", "a = {x = 1", "a = 1 b",
                    'a = "\\q"'):
            with self.assertRaises(self.b.TomlError, msg=bad):
                self.b.parse_toml(bad, use_tomllib=False)

    def test_metadata_and_versions(self):
        import ttft
        proj = self.b.project()
        self.assertEqual(proj["name"], "ttft")
        self.assertEqual(proj["version"], ttft.__version__)
        meta = email.parser.Parser().parsestr(self.b.metadata(proj))
        self.assertEqual(meta["Metadata-Version"], "2.1")
        self.assertEqual(meta["Name"], "ttft")
        self.assertEqual(meta["Version"], ttft.__version__)
        self.assertEqual(meta["Requires-Python"], ">=3.8")
        self.assertIn("Operating System :: POSIX :: Linux", meta.get_all("Classifier"))
        # the backend has nothing to install first: no index is ever asked
        self.assertEqual(self.b.get_requires_for_build_wheel(), [])
        self.assertEqual(self.b.get_requires_for_build_editable(), [])
        self.assertEqual(self.b.get_requires_for_build_sdist(), [])
        build_system = self.b.parse_toml(self.text)["build-system"]
        self.assertEqual(build_system, {"requires": [], "build-backend": "ttft_build",
                                        "backend-path": ["_backend"]})


def check_wheel(test, path):
    """A valid wheel: RECORD lists every file with its sha256 and size;
    WHEEL and METADATA are there. Returns {name: bytes}."""
    with zipfile.ZipFile(path) as z:
        files = {i.filename: z.read(i) for i in z.infolist()}
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
    name = os.path.basename(path)
    dist, version, py, abi, plat = name[:-len(".whl")].split("-")
    test.assertEqual((dist, py, abi), ("ttft", "py3", "none"))
    di = "%s-%s.dist-info/" % (dist, version)
    rows = [r.rsplit(",", 2) for r in files[di + "RECORD"].decode().splitlines()]
    listed = {r[0]: r for r in rows}
    test.assertEqual(sorted(listed), sorted(files))
    for f, data in files.items():
        if f == di + "RECORD":
            test.assertEqual(listed[f][1:], ["", ""])
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        test.assertEqual(listed[f][1:], ["sha256=" + digest, str(len(data))], f)
    wheel = email.parser.Parser().parsestr(files[di + "WHEEL"].decode())
    test.assertEqual(wheel["Wheel-Version"], "1.0")
    test.assertEqual(wheel["Root-Is-Purelib"], "false")
    test.assertEqual(wheel["Tag"], "%s-%s-%s" % (py, abi, plat))
    meta = email.parser.Parser().parsestr(files[di + "METADATA"].decode())
    test.assertEqual((meta["Name"], meta["Version"]), ("ttft", version))
    return files, modes


class Wheel(unittest.TestCase):
    """build_wheel, as pip calls it, from a fresh interpreter and a clean
    environment; the wheel unpacked and used from another one."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ttft-backend-")
        out = run([sys.executable, BACKEND, "wheel", os.path.join(cls.tmp, "dist")],
                  cwd=cls.tmp, env=clean_env(TTFT_BUILD_JOBS="2"))
        cls.build_log = out.stdout + out.stderr
        cls.rc = out.returncode
        wheels = glob.glob(os.path.join(cls.tmp, "dist", "*.whl"))
        cls.wheel = wheels[0] if len(wheels) == 1 else None
        cls.lib = None
        if cls.wheel:
            site = os.path.join(cls.tmp, "site")
            with zipfile.ZipFile(cls.wheel) as z:
                z.extractall(site)
            cls.lib = os.path.join(site, "ttft", "_libttft.so")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_a_valid_wheel_with_the_library_in_the_package(self):
        self.assertEqual(self.rc, 0, self.build_log[-4000:])
        self.assertIsNotNone(self.wheel, self.build_log[-4000:])
        self.assertEqual(self.build_log.strip().splitlines()[-1], os.path.basename(self.wheel))
        files, modes = check_wheel(self, self.wheel)
        pkg = sorted(f for f in files if f.startswith("ttft/"))
        self.assertEqual(pkg, ["ttft/__init__.py", "ttft/_common.py", "ttft/_core.py",
                               "ttft/_errors.py", "ttft/_lib.py", "ttft/_libttft.so",
                               "ttft/_snapshot.py"])
        self.assertEqual(modes["ttft/_libttft.so"], 0o755)
        self.assertIn("ttft-%s.dist-info/LICENSE" % load_backend().project()["version"], files)
        # the flags CMake gives the library reached the compiler
        for flag in ("-DTTFT_BUILDING", "-D_GNU_SOURCE", "-DTTFT_HAVE_PTHREADS=1",
                     "-DTTFT_HAVE_HTTP=1", "-fvisibility=hidden", "-std=c11", "-fPIC"):
            self.assertIn(flag, self.build_log)
        # nothing was written into the source tree
        self.assertFalse(os.path.exists(os.path.join(PYDIR, "ttft", "_libttft.so.tmp")))

    def test_exports_exactly_the_abi(self):
        self.assertIsNotNone(self.lib, self.build_log[-4000:])
        nm = shutil.which("nm")
        if nm is None:
            if IN_CI:
                self.fail("nm (binutils) is needed and missing")
            self.skipTest("nm not installed")
        out = run([nm, "-D", "--defined-only", self.lib], cwd=self.tmp)
        self.assertEqual(out.returncode, 0, out.stderr)
        exported = sorted(line.split()[-1] for line in out.stdout.splitlines() if line.strip())
        self.assertEqual(exported, abi_symbols())

    def test_the_package_loads_its_own_library_first(self):
        self.assertIsNotNone(self.lib, self.build_log[-4000:])
        code = textwrap.dedent("""
            import ttft
            from ttft import _lib
            first = _lib.candidates()[0]
            assert first == ("built into the package", %r), first
            reg = ttft.Registry(max_inflight=8)
            a, b = reg.begin(t_ns=10**9), reg.begin(t_ns=10**9)
            assert a.annotate(prompt_tokens=700, prefix_hit=True)
            assert reg.step_emitted([a, b], [2, 1], t_ns=10**9 + 5 * 10**6) == 2
            a.end(t_ns=10**9 + 9 * 10**6); b.end("cancelled", t_ns=10**9 + 9 * 10**6)
            snap = reg.snapshot()
            assert snap.quantile("ttft", 1.0) == 0.005
            assert snap.count("e2e", status="completed") == 1
            assert snap.split_count("prefix_cache", 1) == 1
            assert isinstance(snap.to_prometheus_protobuf(), bytes)
            print("LOADED", ttft.library_path(), ttft.library_version())
        """) % self.lib
        out = run([sys.executable, "-c", code], cwd=self.tmp,
                  env=clean_env(PYTHONPATH=os.path.dirname(os.path.dirname(self.lib))))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("LOADED %s 1." % self.lib, out.stdout)


class Editable(unittest.TestCase):
    def test_editable_wheel_imports_the_checkout_and_its_in_place_library(self):
        with tempfile.TemporaryDirectory(prefix="ttft-editable-") as tmp:
            py = copy_tree(os.path.join(tmp, "checkout"))
            code = ("import sys; sys.path.insert(0, %r); import ttft_build; "
                    "print(ttft_build.build_editable(%r))"
                    % (os.path.join(py, "_backend"), os.path.join(tmp, "dist")))
            # -O0: only that it builds and loads matters here, not speed
            out = run([sys.executable, "-c", code], cwd=tmp,
                      env=clean_env(CFLAGS="-O0", TTFT_BUILD_JOBS="2"))
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            wheel = os.path.join(tmp, "dist", out.stdout.strip().splitlines()[-1])
            files, _ = check_wheel(self, wheel)
            self.assertFalse([f for f in files if f.startswith("ttft/")])  # the checkout's
            pth = [f for f in files if f.endswith(".pth")]
            self.assertEqual(len(pth), 1)
            lib = os.path.join(py, "ttft", "_libttft.so")
            self.assertTrue(os.path.isfile(lib))
            self.assertEqual(os.stat(lib).st_mode & stat.S_IXUSR, stat.S_IXUSR)
            site = os.path.join(tmp, "site")
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
            # as an installed editable wheel: the .pth runs at startup
            code = textwrap.dedent("""
                import site; site.addsitedir(%r)
                import ttft
                r = ttft.Registry(max_inflight=4)
                s = r.begin(t_ns=10**9); s.token(t_ns=10**9 + 3 * 10**6); s.end(t_ns=10**9 + 4 * 10**6)
                assert r.snapshot().quantile("ttft", 1.0) == 0.003
                print(ttft.__file__); print(ttft.library_path())
                import importlib.util
                print(importlib.util.find_spec("support"))  # python/tests is not on the path
            """) % site
            out = run([sys.executable, "-c", code], cwd=tmp, env=clean_env())
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertEqual(out.stdout.splitlines(),
                             [os.path.join(py, "ttft", "__init__.py"), lib, "None"])


class Failures(unittest.TestCase):
    def test_a_copy_of_python_alone_fails_clearly(self):
        with tempfile.TemporaryDirectory(prefix="ttft-pyonly-") as tmp:
            py = copy_tree(tmp, with_c=False)
            out = run([sys.executable, os.path.join(py, "_backend", "ttft_build.py"), "wheel",
                       os.path.join(tmp, "dist")], cwd=tmp, env=clean_env())
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            self.assertIn("the C sources of libttft are not here", out.stderr)
            self.assertIn(os.path.join(py, "_csrc"), out.stderr)
            self.assertIn("a copy of python/ alone is not enough", out.stderr)
            self.assertFalse(glob.glob(os.path.join(tmp, "dist", "*")))

    def test_no_compiler_and_a_failing_compiler_say_so(self):
        with tempfile.TemporaryDirectory(prefix="ttft-nocc-") as tmp:
            for cc, msg in (("/nonexistent/cc", "cannot run the C compiler '/nonexistent/cc'"),
                            ("false", "the C compiler failed (exit 1) on ")):
                out = run([sys.executable, BACKEND, "wheel", os.path.join(tmp, "dist")],
                          cwd=tmp, env=clean_env(CC=cc))
                self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
                self.assertIn(msg, out.stderr)
                self.assertFalse(glob.glob(os.path.join(tmp, "dist", "*")), cc)

    def test_bad_jobs_setting(self):
        b = load_backend()
        with self.assertRaises(b.BuildError):
            b._jobs({"jobs": "many"})
        self.assertEqual(b._jobs({"jobs": "3"}), 3)
        self.assertEqual(b._jobs({"jobs": "0"}), 1)


class SourceArchive(unittest.TestCase):
    def test_a_source_archive_carries_the_c_tree_and_its_backend(self):
        with tempfile.TemporaryDirectory(prefix="ttft-sdist-") as tmp:
            out = run([sys.executable, BACKEND, "sdist", tmp], cwd=tmp, env=clean_env())
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            archives = glob.glob(os.path.join(tmp, "ttft-*.tar.gz"))
            self.assertEqual(len(archives), 1)
            with tarfile.open(archives[0]) as tar:
                names = tar.getnames()
                self.assertTrue(all(n.startswith("ttft-") and ".." not in n for n in names))
                tar.extractall(os.path.join(tmp, "x"))
            top = glob.glob(os.path.join(tmp, "x", "ttft-*"))[0]
            for f in ("PKG-INFO", "pyproject.toml", "_backend/ttft_build.py", "ttft/_core.py",
                      "_csrc/include/ttft.h", "_csrc/CMakeLists.txt", "_csrc/LICENSE"):
                self.assertTrue(os.path.isfile(os.path.join(top, f)), f)
            # unpacked far from any checkout, its own backend finds the C tree in _csrc/
            b = load_backend(os.path.join(top, "_backend", "ttft_build.py"))
            root = b.source_root(top)
            self.assertEqual(root, os.path.join(top, "_csrc"))
            got = [os.path.relpath(p, root) for p in b.library_sources(root)]
            self.assertEqual(got, b.cmake_sources(cmake_text()))
            self.assertEqual(b.project(top)["version"], load_backend().project()["version"])


if __name__ == "__main__":
    unittest.main()
