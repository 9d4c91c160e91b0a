"""Issue 13.3: `pip install ./python` alone gives a working package.

python/setup.py compiles libttft's C sources into the package as
ttft/_libttft.so. These tests check that its source list is the CMake
build's, that what it builds exports exactly the ABI and is the library the
package loads first, that a copy of python/ without the C tree fails with a
clear message, and that a source archive carries the C tree with it.
(.ci/steps.d/60-python.sh runs the real `pip install` from a fresh clone.)
"""

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest

from support import PYDIR

ROOT = os.path.dirname(PYDIR)
SETUP = os.path.join(PYDIR, "setup.py")
IN_CI = bool(os.environ.get("CI"))


def load_setup():
    spec = importlib.util.spec_from_file_location("ttft_setup_under_test", SETUP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # main() runs only as __main__
    return mod


def cmake_text():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return f.read()


def abi_symbols():
    with open(os.path.join(ROOT, "tests", "abi", "symbols.txt"), encoding="utf-8") as f:
        return sorted(l.strip() for l in f if l.strip() and not l.startswith("#"))


def run(cmd, cwd, env=None, timeout=600):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TTFT_LIBRARY", "PYTHONPATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


class SourceList(unittest.TestCase):
    def setUp(self):
        self.setup = load_setup()

    def test_sources_are_the_cmake_lists_plus_the_http_endpoint(self):
        files = self.setup.cmake_sources(cmake_text())
        self.assertIn("src/record/hooks.c", files)
        self.assertIn("src/report/http.c", files)
        self.assertNotIn("src/report/http_none.c", files)
        # every C file of the library is accounted for: compiled, or the
        # stand-in for builds without HTTP
        on_disk = sorted(os.path.relpath(p, ROOT).replace(os.sep, "/")
                         for p in glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True))
        self.assertEqual(sorted(files + ["src/report/http_none.c"]), on_disk)
        paths = self.setup.library_sources(ROOT)
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
        self.assertEqual(sorted(self.setup.cmake_sources(cmake_text())), built)

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
                self.setup.cmake_sources(t)
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
        self.assertEqual(self.setup.cmake_sources(ok),
                         ["src/common/a.c", "src/common/b.c", "src/record/c.c",
                          "src/report/d.c", "src/report/http.c"])


class Build(unittest.TestCase):
    """Compile the package the way pip's backend does (setup.py build),
    into a scratch directory, and use it from a fresh interpreter."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ttft-setup-")
        # (egg_info goes to the scratch directory too: nothing is written
        # into the source tree)
        out = run([sys.executable, SETUP, "egg_info", "--egg-base", cls.tmp,
                   "build", "--build-base", os.path.join(cls.tmp, "b"),
                   "build_ext", "--parallel", "2"], cwd=PYDIR, env=clean_env())
        cls.build_log = out.stdout + out.stderr
        cls.rc = out.returncode
        libs = glob.glob(os.path.join(cls.tmp, "b", "lib*", "ttft", "_libttft.so"))
        cls.lib = libs[0] if len(libs) == 1 else None

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_build_succeeds_into_the_package(self):
        self.assertEqual(self.rc, 0, self.build_log[-4000:])
        self.assertIsNotNone(self.lib, self.build_log[-4000:])
        pkg = os.path.dirname(self.lib)
        for f in ("__init__.py", "_core.py", "_lib.py", "_snapshot.py", "_errors.py"):
            self.assertTrue(os.path.isfile(os.path.join(pkg, f)), f)
        # the flags CMake gives the library reached the compiler
        for flag in ("-DTTFT_BUILDING", "-D_GNU_SOURCE", "-DTTFT_HAVE_PTHREADS=1",
                     "-DTTFT_HAVE_HTTP=1", "-fvisibility=hidden", "-std=c11"):
            self.assertIn(flag, self.build_log)

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


class WithoutTheCTree(unittest.TestCase):
    def test_a_copy_of_python_alone_fails_clearly(self):
        with tempfile.TemporaryDirectory(prefix="ttft-pyonly-") as tmp:
            copy = os.path.join(tmp, "python")
            os.mkdir(copy)
            for f in ("setup.py", "pyproject.toml"):
                shutil.copy2(os.path.join(PYDIR, f), copy)
            shutil.copytree(os.path.join(PYDIR, "ttft"), os.path.join(copy, "ttft"),
                            ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
            out = run([sys.executable, "setup.py", "egg_info", "--egg-base", tmp, "build",
                       "--build-base", os.path.join(tmp, "b")], cwd=copy, env=clean_env())
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            self.assertIn("the C sources of libttft are not here", out.stderr)
            self.assertIn(os.path.join(copy, "_csrc"), out.stderr)
            self.assertIn("a copy of python/ alone is not enough", out.stderr)
            self.assertFalse(glob.glob(os.path.join(tmp, "b", "**", "*.so"), recursive=True))

    def test_a_source_archive_carries_the_c_tree(self):
        with tempfile.TemporaryDirectory(prefix="ttft-sdist-") as tmp:
            out = run([sys.executable, SETUP, "egg_info", "--egg-base", tmp,
                       "sdist", "--dist-dir", tmp], cwd=PYDIR, env=clean_env())
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            archives = glob.glob(os.path.join(tmp, "ttft-*.tar.gz"))
            self.assertEqual(len(archives), 1)
            with tarfile.open(archives[0]) as tar:
                tar.extractall(os.path.join(tmp, "x"))
            top = glob.glob(os.path.join(tmp, "x", "ttft-*"))[0]
            # unpacked far from any checkout, setup.py finds the C tree in _csrc/
            setup = load_setup()
            root = setup.source_root(top)
            self.assertEqual(root, os.path.join(top, "_csrc"))
            got = [os.path.relpath(p, root) for p in setup.library_sources(root)]
            self.assertEqual(got, setup.cmake_sources(cmake_text()))
            self.assertTrue(os.path.isfile(os.path.join(root, "include", "ttft.h")))
            self.assertTrue(os.path.isfile(os.path.join(top, "ttft", "_core.py")))


if __name__ == "__main__":
    unittest.main()
