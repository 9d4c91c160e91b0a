"""The package's module structure (issue 32.9): the modules of ttft/ import
each other in one direction only, no circle, counting imports inside
functions too (a deferred `from ._snapshot import Snapshot` is still a
circle: each module needs the other to work)."""

import ast
import os
import unittest

from support import PYDIR

PKG = os.path.join(PYDIR, "ttft")


def package_imports(path):
    """The ttft modules a source file imports, anywhere in it."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "ttft" or node.module.startswith("ttft."):
                out.add(node.module.split(".")[1] if "." in node.module else "__init__")
    return out


def graph():
    g = {}
    for name in sorted(os.listdir(PKG)):
        if name.endswith(".py"):
            g[name[:-3]] = package_imports(os.path.join(PKG, name))
    return g


def cycles(g):
    """Every circle in g as a list of modules, found by depth-first search."""
    found, state = [], {}

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if d not in g:
                continue
            if state.get(d) == 1:
                found.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [])
    return found


class ImportGraph(unittest.TestCase):
    def test_the_checker_finds_a_circle(self):
        self.assertEqual(cycles({"a": {"b"}, "b": {"a"}}), [["a", "b", "a"]])
        self.assertEqual(cycles({"a": {"b"}, "b": {"c"}, "c": set()}), [])

    def test_no_import_circles(self):
        g = graph()
        self.assertIn("_core", g)
        self.assertIn("_snapshot", g)
        self.assertEqual(cycles(g), [], "import circles in python/ttft: %r" % cycles(g))

    def test_errors_is_a_leaf(self):
        # the exceptions import nothing of the package: any module may raise them
        self.assertEqual(graph()["_errors"], set())


if __name__ == "__main__":
    unittest.main()
