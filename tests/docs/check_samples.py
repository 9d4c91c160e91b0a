#!/usr/bin/env python3
"""check_samples.py — every C, C++ and Python sample of README.md and docs/*.md
builds (and, unless marked otherwise, runs) as written.

  check_samples.py --root REPO --lib LIBTTFT_SO --out DIR [--cc CC] [--cxx CXX]
                   [--python PY] [--tool TTFT_REPORT]

What is checked, by fence language:
  ```c        cc -std=c11 -Wall -Wextra -Werror; a sample with a main() is
              linked against libttft and run (exit 0), one without is a
              translation unit compiled with -c (it may declare what it uses)
  ```cpp      g++ -std=c++17 with the same flags as tests/cpp/samples.py,
              with the same rule (main: link and run; else -c): a C++ sample
              is a whole translation unit, as that test compiles it too
  ```python   run with the bindings (PYTHONPATH=python/, TTFT_LIBRARY and
              LD_LIBRARY_PATH naming the built library), in a scratch
              directory that holds report.json (a JSON report) for samples
              that read one; exit 0
Other languages (sh, yaml, promql, json, cmake, go, rust, js, unlabelled text)
are listed, not built (a go or rust sample marked same-as PATH must be that
file byte for byte: .ci/steps.d/70-bindings.sh builds and runs those files); a language this script does not know fails the test,
so that a new kind of sample is not skipped silently.

Markers. An HTML comment on the last non-blank line before a fence says how
to treat a sample that is not a whole program:

  <!-- sample: same-as PATH -->   the sample is the file PATH, byte for byte
                                  (then built and run like any other)
  <!-- sample: wrap NAME -->      a fragment: compiled inside the wrapper
                                  tests/docs/wrap/NAME.{c,py}, where the
                                  line @SAMPLE@ stands (Python: indented
                                  like that line); the wrapper defines what
                                  the fragment uses and runs it
  <!-- sample: compile-only -->   built, not run: it needs a server, a
                                  network or a fixed port (C: compiled and
                                  linked; Python: byte-compiled)
Words may be combined ("wrap c-main, compile-only"); text in parentheses
is a comment. For a file whose owner adds markers later, tests/docs/
markers.txt gives them by file and a line the sample contains (a marker
in the file wins); an entry that matches no sample fails the test.
Prints one line per sample and "N passed, M failed".
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-Wno-unused-variable",
           "-Wno-unused-but-set-variable", "-pthread"]
CXX_FLAGS = ["-std=c++17", "-pedantic", "-Wall", "-Wextra", "-Werror", "-Wshadow",
             "-Wno-unused-parameter", "-Wno-unused-variable", "-Wno-unused-function",
             "-Wno-unused-but-set-variable", "-pthread"]
BUILT = {"c": "c", "cpp": "cpp", "c++": "cpp", "python": "python", "py": "python"}
LISTED = {"sh", "bash", "console", "yaml", "yml", "promql", "json", "go", "rust", "js",
          "javascript", "text", "", "ini", "toml", "proto", "diff", "cmake", "make"}
TIMEOUT = 120


def fences(path):
    """(line of the first code line, language, code, marker) of each fence."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```([A-Za-z0-9+_-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2).lower(), i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i >= len(lines):
            raise SystemExit("%s:%d: unterminated ``` block" % (path, start + 1))
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mk = re.match(r"^\s*<!--\s*sample:(.*?)-->\s*$", lines[j]) if j >= 0 else None
        out.append((start + 2, lang, "\n".join(body) + "\n", mk.group(1) if mk else None))
        i += 1
    return out


def parse_marker(text):
    """{'same-as': path, 'wrap': name, 'compile-only': True} from marker text."""
    text = re.sub(r"\([^)]*\)", "", text or "")
    words = [w for w in re.split(r"[\s,]+", text) if w]
    d, k = {}, 0
    while k < len(words):
        w = words[k]
        if w in ("same-as", "wrap") and k + 1 < len(words):
            d[w] = words[k + 1]
            k += 2
        elif w == "compile-only":
            d[w] = True
            k += 1
        else:
            raise ValueError("unknown marker word %r" % w)
    return d


def external_markers(root):
    """tests/docs/markers.txt: FILE <tab> a line of the sample <tab> marker."""
    path = os.path.join(HERE, "markers.txt")
    out = []
    if os.path.isfile(path):
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                raise SystemExit("%s:%d: want FILE<tab>A LINE OF THE SAMPLE<tab>MARKER" % (path, n))
            out.append((parts[0], parts[1].strip(), parts[2], n))
    return out


def find_external(ext, rel, code):
    """The marker of markers.txt whose line the sample contains, or None."""
    lines = {l.strip() for l in code.split("\n")}
    hits = [m for f, l, m, _ in ext if f == rel and l in lines]
    return hits[0] if hits else None


def wrap(name, ext, code):
    path = os.path.join(HERE, "wrap", name + "." + ext)
    if not os.path.isfile(path):
        raise ValueError("no wrapper %s" % os.path.relpath(path, HERE))
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    for line in lines:
        if line.strip() == "@SAMPLE@":
            pad = line[: len(line) - len(line.lstrip())]
            out += [pad + l if l.strip() else l for l in code.rstrip("\n").split("\n")]
        else:
            out.append(line)
    if len(out) == len(lines):
        raise ValueError("wrapper %s has no @SAMPLE@ line" % name)
    return "\n".join(out) + "\n"


def run(cmd, **kw):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    except subprocess.TimeoutExpired:
        return None, "did not finish within %d s" % TIMEOUT
    return r.returncode, r.stdout + r.stderr


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--lib", required=True, help="the built libttft shared library")
    p.add_argument("--out", required=True)
    p.add_argument("--cc", default="cc")
    p.add_argument("--cxx", default="g++")
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    root, lib = os.path.abspath(a.root), os.path.abspath(a.lib)
    libdir, inc = os.path.dirname(lib), os.path.join(root, "include")
    os.makedirs(a.out, exist_ok=True)
    ci = bool(os.environ.get("CI"))

    missing = [t for t in (a.cc, a.cxx, a.python) if shutil.which(t) is None]
    if missing:
        print("%s: %s not found" % ("FAIL" if ci else "SKIP", ", ".join(missing)))
        return 1 if ci else 77

    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(root, "python")
    env["TTFT_LIBRARY"] = lib
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    # report.json for samples that read one: a real report, made with the bindings
    scratch = os.path.join(a.out, "cwd")
    os.makedirs(scratch, exist_ok=True)
    mk = ("import ttft\n"
          "r = ttft.Registry(max_inflight=16)\n"
          "for k in range(20):\n"
          "    s = r.begin(t_ns=10**9 + k * 10**8)\n"
          "    s.token(t_ns=10**9 + k * 10**8 + 3 * 10**7)\n"
          "    s.token(t_ns=10**9 + k * 10**8 + 5 * 10**7)\n"
          "    s.end(t_ns=10**9 + k * 10**8 + 6 * 10**7)\n"
          "open('report.json', 'w').write(r.snapshot().to_json())\n")
    rc, out = run([a.python, "-c", mk], cwd=scratch, env=env)
    if rc != 0:
        print("FAIL: could not write report.json with the bindings:\n" + out)
        return 1
    json.load(open(os.path.join(scratch, "report.json")))

    ext_markers = external_markers(root)
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    passed = failed = 0
    listed = {}
    for path in files:
        rel = os.path.relpath(path, root)
        for line, lang, code, marker in fences(path):
            where = "%s:%d" % (rel, line)
            if lang not in BUILT:
                if lang in LISTED:
                    listed[lang or "(plain)"] = listed.get(lang or "(plain)", 0) + 1
                    # A listed sample that says it is a file of the tree
                    # (the Rust and Go bindings' examples, which their own
                    # CI step builds and runs) must be that file.
                    try:
                        mk_ = parse_marker(marker) if marker else {}
                    except ValueError:
                        mk_ = {}  # markers of listed samples are otherwise not read
                    if "same-as" in mk_:
                        ref = os.path.join(root, mk_["same-as"])
                        if os.path.isfile(ref) and open(ref, encoding="utf-8").read() == code:
                            passed += 1
                            print("ok     %s %s: same as %s" % (where, lang, mk_["same-as"]))
                        else:
                            failed += 1
                            print("FAILED %s %s: not the same as %s, byte for byte" % (where, lang, mk_["same-as"]))
                    continue
                print("FAILED %s: a ```%s sample; this test does not know the language "
                      "(tests/docs/check_samples.py: BUILT or LISTED)" % (where, lang))
                failed += 1
                continue
            kind = BUILT[lang]
            if marker is None:
                marker = find_external(ext_markers, rel, code)
            try:
                mk_ = parse_marker(marker)
            except ValueError as e:
                print("FAILED %s: marker: %s" % (where, e))
                failed += 1
                continue
            ok, what = check(kind, where, code, mk_, a, root, inc, lib, libdir, env, scratch)
            if ok:
                passed += 1
                print("ok     %s %s: %s" % (where, kind, what))
            else:
                failed += 1
                print("FAILED %s %s: %s" % (where, kind, what))
    for f, l, m, n in ext_markers:
        hit = False
        path = os.path.join(root, f)
        if os.path.isfile(path):
            hit = any(l in {x.strip() for x in code.split("\n")} for _, _, code, _ in fences(path))
        if not hit:
            print("FAILED tests/docs/markers.txt:%d: no sample of %s contains %r (update or drop it)" % (n, f, l))
            failed += 1
    if listed:
        print("not built (no compiler for them here, by design): " +
              ", ".join("%d %s" % (n, l) for l, n in sorted(listed.items())))
    if passed == 0:
        print("FAIL: no sample found at all")
        failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def check(kind, where, code, mk, a, root, inc, lib, libdir, env, scratch):
    name = re.sub(r"[^A-Za-z0-9]+", "_", where)
    desc = []
    if "same-as" in mk:
        ref = os.path.join(root, mk["same-as"])
        if not os.path.isfile(ref):
            return False, "same-as %s: no such file" % mk["same-as"]
        if open(ref, encoding="utf-8").read() != code:
            return False, "differs from %s (it must be the same, byte for byte)" % mk["same-as"]
        desc.append("same as " + mk["same-as"])
    src = code
    if "wrap" in mk:
        try:
            src = wrap(mk["wrap"], {"c": "c", "cpp": "cpp", "python": "py"}[kind], code)
        except ValueError as e:
            return False, str(e)
        desc.append("in wrapper " + mk["wrap"])
    compile_only = mk.get("compile-only", False)

    if kind == "python":
        f = os.path.join(a.out, name + ".py")
        open(f, "w", encoding="utf-8").write(src)
        if compile_only:
            rc, out = run([a.python, "-c", "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')", f])
            desc.append("byte-compiled")
        else:
            rc, out = run([a.python, f], cwd=scratch, env=env)
            desc.append("ran")
        return rc == 0, ", ".join(desc) if rc == 0 else "%s\n%s" % (", ".join(desc), indent(out))

    ext, cc, flags = ("c", a.cc, C_FLAGS) if kind == "c" else ("cpp", a.cxx, CXX_FLAGS)
    f = os.path.join(a.out, name + "." + ext)
    open(f, "w", encoding="utf-8").write(src)
    has_main = re.search(r"^\s*int\s+main\s*\(", src, re.M) is not None
    cmd = [cc] + flags + ["-I" + inc]
    if has_main:
        exe = os.path.join(a.out, name)
        cmd += [f, lib, "-Wl,-rpath," + libdir, "-lm", "-o", exe]
    else:
        cmd += ["-c", f, "-o", os.path.join(a.out, name + ".o")]
    rc, out = run(cmd)
    if rc != 0:
        return False, "does not compile:\n  %s\n%s" % (" ".join(cmd), indent(out))
    if not has_main:
        desc.append("compiled (a translation unit without main)")
        return True, ", ".join(desc)
    if compile_only:
        desc.append("compiled and linked (compile-only)")
        return True, ", ".join(desc)
    rc, out = run([exe], cwd=scratch, env=env)
    if rc != 0:
        return False, "%s: exit %s\n%s" % (exe, rc, indent(out))
    desc.append("built and ran")
    return True, ", ".join(desc)


def indent(text):
    return "\n".join("    | " + l for l in text.rstrip("\n").split("\n")[-40:])


if __name__ == "__main__":
    sys.exit(main())
