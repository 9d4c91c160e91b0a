#!/usr/bin/env python3
"""samples.py — every C++ sample of the header and the docs compiles as written.

  samples.py --cxx g++ --root <repo> --lib <libttft.so> --out <dir> [-- extra flags]

Samples are
  * the @code{.cpp} ... @endcode blocks of include/ttft.hpp's comments;
  * every ```cpp fenced block of docs/*.md and README.md.
Each sample is one translation unit, compiled as written (nothing is added
around it) with -std=c++17 and warnings as errors. A sample with a main()
is also linked against the library and run, and must exit 0; one without
is compiled only (-c), so it may declare the server types it uses without
defining them. A missing compiler fails under CI (CI set) and is a skip
(exit 77) otherwise, like tests/cpp/run_compiler.sh.
"""

import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

FLAGS = ["-std=c++17", "-pedantic", "-Wall", "-Wextra", "-Werror", "-Wshadow",
         "-Wno-unused-parameter", "-Wno-unused-variable", "-Wno-unused-function",
         "-Wno-unused-but-set-variable", "-pthread"]
# Files that must contain C++ samples: an extractor that silently finds
# nothing there would make this test pass for nothing.
MUST_HAVE = ("include/ttft.hpp", "docs/ffi.md", "docs/integration.md")


def header_samples(path):
    """(line, code) of each @code{.cpp} block in the comments of path."""
    out, cur, start = [], None, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            body = re.sub(r"^\s*\*( |$)", "", line.rstrip("\n"), count=1)
            if cur is None:
                if body.strip() == "@code{.cpp}":
                    cur, start = [], n + 1
            elif body.strip() == "@endcode":
                out.append((start, dedent(cur)))
                cur = None
            else:
                cur.append(body)
    if cur is not None:
        raise SystemExit("%s:%d: @code{.cpp} without @endcode" % (path, start))
    return out


def markdown_samples(path):
    """(line, code) of each ```cpp block of path."""
    out, cur, start = [], None, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.rstrip("\n")
            if cur is None:
                if re.match(r"^\s*```(cpp|c\+\+)\s*$", s):
                    cur, start = [], n + 1
            elif re.match(r"^\s*```\s*$", s):
                out.append((start, dedent(cur)))
                cur = None
            else:
                cur.append(s)
    if cur is not None:
        raise SystemExit("%s:%d: unterminated ```cpp block" % (path, start))
    return out


def dedent(lines):
    pad = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[pad:] for l in lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cxx", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--lib", required=True, help="libttft shared library to link and run with")
    p.add_argument("--out", required=True)
    p.add_argument("extra", nargs="*", help="more compiler flags (after --)")
    a = p.parse_args()

    if shutil.which(a.cxx) is None:
        if os.environ.get("CI"):
            print("FAIL: compiler %r not found and CI is set" % a.cxx, file=sys.stderr)
            return 1
        print("SKIP: compiler %r not found" % a.cxx, file=sys.stderr)
        return 77

    sources = [os.path.join(a.root, "include", "ttft.hpp")]
    sources += sorted(glob.glob(os.path.join(a.root, "docs", "*.md")))
    sources += [os.path.join(a.root, "README.md")]
    samples = []
    for src in sources:
        if not os.path.isfile(src):
            continue
        rel = os.path.relpath(src, a.root)
        found = header_samples(src) if src.endswith(".hpp") else markdown_samples(src)
        if rel in MUST_HAVE and not found:
            print("FAIL: no C++ sample found in %s" % rel, file=sys.stderr)
            return 1
        samples += [(rel, line, code) for line, code in found]

    os.makedirs(a.out, exist_ok=True)
    libdir = os.path.dirname(os.path.abspath(a.lib))
    # a cross build runs the samples under its emulator (tests/cpp.cmake)
    emulator = shlex.split(os.environ.get("TTFT_EMULATOR", ""))
    failures = ran = 0
    for rel, line, code in samples:
        name = re.sub(r"[^A-Za-z0-9]+", "_", rel) + "_%d" % line
        cpp = os.path.join(a.out, name + ".cpp")
        with open(cpp, "w", encoding="utf-8") as f:
            f.write(code)
        has_main = re.search(r"^\s*int\s+main\s*\(", code, re.M) is not None
        cmd = [a.cxx] + FLAGS + ["-I" + os.path.join(a.root, "include")] + a.extra
        if has_main:
            exe = os.path.join(a.out, name)
            cmd += [cpp, os.path.abspath(a.lib), "-Wl,-rpath," + libdir, "-o", exe]
        else:
            cmd += ["-c", cpp, "-o", os.path.join(a.out, name + ".o")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        what = "%s:%d (%s)" % (rel, line, "compile, link, run" if has_main else "compile")
        if r.returncode != 0:
            failures += 1
            print("FAILED %s\n  %s\n%s%s" % (what, " ".join(cmd), r.stdout, r.stderr))
            continue
        if has_main:
            try:
                run = subprocess.run(emulator + [exe], capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                failures += 1
                print("FAILED %s: did not finish within 120 s" % what)
                continue
            if run.returncode != 0:
                failures += 1
                print("FAILED %s: exit %d\n%s%s" % (what, run.returncode, run.stdout, run.stderr))
                continue
            ran += 1
        print("ok %s" % what)
    print("%d C++ samples with %s: %d compiled, %d ran, %d failed"
          % (len(samples), a.cxx, len(samples) - failures, ran, failures))
    return 1 if failures or not samples else 0


if __name__ == "__main__":
    sys.exit(main())
