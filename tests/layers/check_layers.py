#!/usr/bin/env python3
"""check_layers.py — the include rules of src/README.md, enforced.

    common/  may include  ttft.h, common/
    record/  may include  ttft.h, common/, record/
    report/  may include  ttft.h, common/, report/

Every quoted #include of a library source must name its layer
("common/hist.h", not "hist.h"), so the layer of each dependency is visible
where it is used. System headers (<...>) are not checked. Exit 0 when the
tree obeys the rules, 1 with one line per violation otherwise.

    check_layers.py SRC_DIR            check the tree
    check_layers.py SRC_DIR --selftest also prove the checker catches a
                                       report file that includes a record
                                       header, and an unqualified include
"""
import os
import re
import shutil
import sys
import tempfile

ALLOWED = {
    "common": ("common/",),
    "record": ("common/", "record/"),
    "report": ("common/", "report/"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def violations(src):
    found = []
    layers_seen = set()
    for layer in sorted(os.listdir(src)):
        d = os.path.join(src, layer)
        if not os.path.isdir(d):
            continue
        if layer not in ALLOWED:
            found.append("%s/: a directory that is not a layer (common, record, report)" % layer)
            continue
        layers_seen.add(layer)
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(d, name)
            text = open(path, encoding="utf-8").read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                line = text.count("\n", 0, m.start()) + 1
                where = "%s/%s:%d" % (layer, name, line)
                if inc == "ttft.h":
                    continue
                if "/" not in inc:
                    found.append('%s: #include "%s" does not name its layer' % (where, inc))
                    continue
                if not inc.startswith(ALLOWED[layer]):
                    found.append('%s: #include "%s": %s/ may include only %s' %
                                 (where, inc, layer, ", ".join(ALLOWED[layer])))
                elif not os.path.exists(os.path.join(src, inc)):
                    found.append('%s: #include "%s": no such file' % (where, inc))
    for layer in ALLOWED:
        if layer not in layers_seen:
            found.append("%s/: missing" % layer)
    loose = [n for n in os.listdir(src) if n.endswith((".c", ".h"))]
    for n in sorted(loose):
        found.append("%s: a source outside every layer" % n)
    return found


def selftest(src):
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for case, text in (
            ("report includes record", '#include "record/registry.h"\n'),
            ("unqualified include", '#include "registry.h"\n'),
            ("common includes report", None),
        ):
            tree = os.path.join(tmp, "src")
            shutil.rmtree(tree, ignore_errors=True)
            shutil.copytree(src, tree)
            if text is None:
                target = os.path.join(tree, "common", "zz_selftest.c")
                text = '#include "report/format.h"\n'
            else:
                target = os.path.join(tree, "report", "zz_selftest.c")
            open(target, "w").write(text)
            v = violations(tree)
            if not any("zz_selftest.c" in x for x in v):
                print("selftest FAILED: '%s' was not caught" % case)
                ok = False
            else:
                print("selftest ok: '%s' caught: %s" % (case, [x for x in v if "zz_selftest" in x][0]))
    return ok


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    src = sys.argv[1]
    v = violations(src)
    for x in v:
        print("layer violation: " + x)
    ok = not v
    if "--selftest" in sys.argv[2:]:
        ok = selftest(src) and ok
    files = sum(len([n for n in os.listdir(os.path.join(src, l)) if n.endswith((".c", ".h"))])
                for l in ALLOWED if os.path.isdir(os.path.join(src, l)))
    print("layers: %d files checked, %d violation(s)" % (files, len(v)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
