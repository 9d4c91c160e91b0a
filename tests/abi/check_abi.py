#!/usr/bin/env python3
"""check_abi.py — the exported ABI of libttft is exactly what ttft.h documents.

Checks, each printing what differs:
  1. the TTFT_API functions declared in include/ttft.h
       == tests/abi/symbols.txt (the documented list, reviewed by hand)
       == the dynamic symbols libttft.so defines (nm -D --defined-only),
     and every one of them is a function (no exported data);
  2. the SONAME is libttft.so.<TTFT_VERSION_MAJOR> (SOVERSION = major);
  3. every global symbol libttft.a defines starts with ttft_ (public) or
     ttft__ (internal), so static linking pollutes no one's namespace;
  4. every struct in ttft.h begins with `size_t struct_size;`, except the
     frozen layouts listed below (their layout never changes within a major);
  5. every enum constant in tests/abi/enums.txt still exists with the same
     value (enums only grow; nothing is renamed or renumbered).

Usage: check_abi.py --header H --symbols S --enums E --shared SO --static A
                    [--nm nm] [--readelf readelf] [--update]
--update rewrites symbols.txt and enums.txt from the header (then review the
diff: removals and renumberings break the ABI). --selftest runs the checks on
tampered copies of the inputs and fails unless each tampering is caught.
"""
import argparse
import re
import subprocess
import sys

# Structs that cross the ABI without a size field, and why that is safe.
FROZEN_STRUCTS = {
    "ttft_label": "two pointers, used as an array element (a size field per "
                  "element would be noise); frozen for the major version",
    "ttft_allocator": "two function pointers and a context; frozen for the "
                      "major version (an allocator with more hooks would be "
                      "a new struct and a new setter)",
}
# Structs that must carry struct_size (the brief's list; all others in the
# header are checked too).
REQUIRED_SIZED = ["ttft_config", "ttft_slo", "ttft_request", "ttft_seq_info"]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def code_lines(text):
    """The header without comments and without preprocessor directives
    (continuation lines included)."""
    out, in_pp = [], False
    for line in strip_comments(text).splitlines():
        if in_pp or line.lstrip().startswith("#"):
            in_pp = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return "\n".join(out)


def header_functions(text):
    code = code_lines(text)
    names = []
    for m in re.finditer(r"\bTTFT_API\b([^;{]*?)\b([A-Za-z_]\w*)\s*\(", code):
        names.append(m.group(2))
    return names


def header_structs(text):
    code = code_lines(text)
    structs = {}
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", code, flags=re.S):
        tag, body, name = m.group(1), m.group(2), m.group(3)
        first = body.strip().split(";", 1)[0]
        structs[name] = " ".join(first.split())
        if tag != name:
            structs[name] += " (tag %s differs)" % tag
    # a struct declared early ("typedef struct ttft_config ttft_config;", so a
    # first tier can name it) and defined later as "struct ttft_config {...};"
    for m in re.finditer(r"(?<!typedef )\bstruct\s+(\w+)\s*\{(.*?)\}\s*;", code, flags=re.S):
        tag, body = m.group(1), m.group(2)
        if tag in structs:
            continue
        if not re.search(r"typedef\s+struct\s+%s\s+%s\s*;" % (tag, tag), code):
            continue
        first = body.strip().split(";", 1)[0]
        structs[tag] = " ".join(first.split())
    return structs


def header_enums(text):
    consts = {}
    for m in re.finditer(r"XX\(\s*(\w+)\s*,\s*(-?\d+)\s*,", strip_comments(text)):
        consts["TTFT_" + m.group(1)] = int(m.group(2))
    code = code_lines(text)
    for m in re.finditer(r"typedef\s+enum\s+\w+\s*\{(.*?)\}\s*\w+\s*;", code, flags=re.S):
        for e in re.finditer(r"\b(TTFT_\w+)\s*=\s*\(?\s*(-?\d+)\s*\)?", m.group(1)):
            consts[e.group(1)] = int(e.group(2))
    return consts


def version_major(text):
    m = re.search(r"#define\s+TTFT_VERSION_MAJOR\s+(\d+)", text)
    return int(m.group(1)) if m else None


def read_list(path):
    items = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                items.append(line)
    return items


def nm_symbols(nm, args, path):
    res = subprocess.run([nm] + args + [path], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("FAIL: %s %s %s: %s" % (nm, " ".join(args), path, res.stderr.strip()))
    syms = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and len(parts[-2]) == 1:
            syms.append((parts[-1], parts[-2]))
    return syms


def diff(label_a, a, label_b, b):
    problems = []
    for s in sorted(set(a) - set(b)):
        problems.append("%s but not %s: %s" % (label_a, label_b, s))
    for s in sorted(set(b) - set(a)):
        problems.append("%s but not %s: %s" % (label_b, label_a, s))
    return problems


def run_checks(a, text, funcs, enums, documented, enum_lines, enums_path):
    problems = []
    checks = 0

    # 1. header == symbols.txt == libttft.so
    dups = sorted({f for f in funcs if funcs.count(f) > 1})
    for d in dups:
        problems.append("declared TTFT_API more than once in the header: %s" % d)
    if len(funcs) < 10:
        problems.append("found only %d TTFT_API functions in %s: is the parser broken?" % (len(funcs), a.header))
    problems += diff("in the header", funcs, "in symbols.txt", documented)
    checks += 1
    if a.shared:
        exported = nm_symbols(a.nm, ["-D", "--defined-only"], a.shared)
        # _init and _fini are the C runtime's (crti.o): glibc's are hidden,
        # musl's crti.o leaves them global; neither is ours to declare
        exported = [(n, t) for n, t in exported if n not in ("_init", "_fini")]
        names = [n for n, _ in exported]
        problems += diff("in the header", funcs, "exported by %s" % a.shared, names)
        for n, t in exported:
            if t not in "TtWi":
                problems.append("exported symbol is not a function (nm type %s): %s" % (t, n))
        checks += 2
        # 2. SONAME
        major = version_major(text)
        res = subprocess.run([a.readelf, "-d", a.shared], capture_output=True, text=True)
        m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", res.stdout)
        want = "libttft.so.%s" % major
        if not m:
            problems.append("no SONAME in %s (%s)" % (a.shared, res.stderr.strip()))
        elif m.group(1) != want:
            problems.append("SONAME is %s, expected %s (SOVERSION = major)" % (m.group(1), want))
        checks += 1
        print("exported: %d functions, SONAME %s" % (len(names), m.group(1) if m else "?"))

    # 3. static archive namespace
    if a.static:
        glob = nm_symbols(a.nm, ["-g", "--defined-only"], a.static)
        for n, t in glob:
            if not n.startswith("ttft_"):
                problems.append("libttft.a defines a global symbol outside the ttft_ prefix: %s (%s)" % (n, t))
        internal = [n for n, _ in glob if n.startswith("ttft__")]
        public = set(n for n, _ in glob if not n.startswith("ttft__"))
        problems += diff("in the header", funcs, "defined public in libttft.a", public)
        checks += 2
        print("static archive: %d public, %d internal (ttft__) globals" % (len(public), len(internal)))

    # 4. structs carry their size
    structs = header_structs(text)
    for name in REQUIRED_SIZED:
        if name not in structs:
            problems.append("struct %s not found in the header" % name)
    for name, first in sorted(structs.items()):
        if name in FROZEN_STRUCTS:
            continue
        if first != "size_t struct_size":
            problems.append("struct %s does not begin with size_t struct_size (first member: %s)" % (name, first))
    for name in FROZEN_STRUCTS:
        if name not in structs:
            problems.append("frozen struct %s no longer in the header: update FROZEN_STRUCTS" % name)
    checks += 1
    print("structs: %s sized; frozen: %s" % (
        ", ".join(sorted(n for n in structs if n not in FROZEN_STRUCTS)), ", ".join(sorted(FROZEN_STRUCTS))))

    # 5. enums only grow
    for line in enum_lines:
        k, v = line.split()
        if k not in enums:
            problems.append("enum constant removed or renamed: %s (was %s)" % (k, v))
        elif k.endswith("COUNT_"):
            if enums[k] < int(v):  # "number of values": grows with its enum
                problems.append("enum shrank: %s was %s, is %d" % (k, v, enums[k]))
        elif k.endswith("__LAST"):
            if enums[k] > int(v):  # one past the most negative error code
                problems.append("error list shrank: %s was %s, is %d" % (k, v, enums[k]))
        elif enums[k] != int(v):
            problems.append("enum constant renumbered: %s was %s, is %d" % (k, v, enums[k]))
    new = sorted(set(enums) - set(k.split()[0] for k in enum_lines))
    for k in new:
        problems.append("new enum constant %s = %d: add it to %s (run with --update and review)" % (k, enums[k], enums_path))
    checks += 1

    return problems, checks


def selftest(a, text, funcs, enums):
    """The checker catches what it claims to: run it on tampered inputs."""
    failures = 0

    def expect(what, problems, needle):
        nonlocal failures
        if not any(needle in p for p in problems):
            failures += 1
            print("SELFTEST FAIL: %s: no problem mentioning %r in %r" % (what, needle, problems))

    documented = sorted(set(funcs))
    enum_lines = ["%s %d" % (k, v) for k, v in sorted(enums.items())]
    base, _ = run_checks(a, text, funcs, enums, documented, enum_lines, "enums.txt")
    if base:
        failures += 1
        print("SELFTEST FAIL: untampered inputs report problems: %r" % base)
    p, _ = run_checks(a, text, funcs, enums, documented[1:] + ["ttft_bogus"], enum_lines, "enums.txt")
    expect("a documented symbol missing", p, documented[0])
    expect("an undocumented symbol listed", p, "ttft_bogus")
    p, _ = run_checks(a, text, funcs + ["ttft_not_built"], enums, documented + ["ttft_not_built"], enum_lines, "e")
    if a.shared:
        expect("a declared function the library lacks", p, "ttft_not_built")
    renum = [l if not l.startswith("TTFT_COMPLETED ") else "TTFT_COMPLETED 5" for l in enum_lines]
    p, _ = run_checks(a, text, funcs, enums, documented, renum, "e")
    expect("a renumbered constant", p, "renumbered: TTFT_COMPLETED")
    p, _ = run_checks(a, text, funcs, enums, documented, enum_lines + ["TTFT_GONE 3"], "e")
    expect("a removed constant", p, "removed or renamed: TTFT_GONE")
    p, _ = run_checks(a, text, funcs, enums, documented, enum_lines[1:], "e")
    expect("an unrecorded constant", p, "new enum constant " + enum_lines[0].split()[0])
    unsized = text.replace("size_t struct_size;     /* sizeof(ttft_request)", "int class_id_first;     /* sizeof(ttft_request)")
    if unsized == text:
        failures += 1
        print("SELFTEST FAIL: could not tamper with ttft_request in the header")
    p, _ = run_checks(a, unsized, funcs, enums, documented, enum_lines, "e")
    expect("a struct without struct_size", p, "struct ttft_request does not begin")
    print("check_abi selftest: %s" % ("ok" if failures == 0 else "%d failure(s)" % failures))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", required=True)
    ap.add_argument("--symbols", required=True)
    ap.add_argument("--enums", required=True)
    ap.add_argument("--shared")
    ap.add_argument("--static")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--readelf", default="readelf")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()

    text = open(a.header).read()
    funcs = header_functions(text)
    enums = header_enums(text)

    if a.selftest:
        return selftest(a, text, funcs, enums)

    if a.update:
        with open(a.symbols, "w") as f:
            f.write("# Every function libttft.so exports: the TTFT_API declarations of\n"
                    "# include/ttft.h. tests/abi/check_abi.py keeps this list, the header\n"
                    "# and the built library identical. Within a major version entries\n"
                    "# are only ever added.\n")
            for s in sorted(set(funcs)):
                f.write(s + "\n")
        with open(a.enums, "w") as f:
            f.write("# Every enum constant of include/ttft.h with its value. Within a major\n"
                    "# version constants are only ever added, never renamed or renumbered.\n")
            for k in sorted(enums, key=lambda k: (k, enums[k])):
                f.write("%s %d\n" % (k, enums[k]))
        print("updated %s (%d functions) and %s (%d constants)" % (a.symbols, len(set(funcs)), a.enums, len(enums)))
        return 0

    problems, checks = run_checks(a, text, funcs, enums, read_list(a.symbols), read_list(a.enums), a.enums)
    if problems:
        for p in problems:
            print("FAIL: " + p)
        print("check_abi: %d problem(s)" % len(problems))
        return 1
    print("check_abi: ok (%d functions, %d enum constants, %d checks)" % (len(set(funcs)), len(enums), checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
