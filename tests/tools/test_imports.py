# SPDX-License-Identifier: GPL-2.0-or-later
"""The imports of tools/lablib point one way.

Every module of tools/lablib is read as text (nothing is imported or run)
and each import of a sibling module is an edge, including imports made
inside a function.  The test fails on a cycle of edges, and on a private
name (one leading underscore) that a module takes from a sibling, by
'from .x import _y' or by 'x._y'.  The checker is first run on a small
package it writes itself, with one cycle and one private name, which it
must find.

Usage: test_imports.py [DIR]   (default: tools/lablib of this checkout)
"""

import ast
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ok = tap.ok


def imports(pkgdir):
    """{module: {sibling it imports}} and [(module, sibling, private name)]."""
    mods = {f[:-3] for f in os.listdir(pkgdir) if f.endswith(".py")}
    edges, private = {m: set() for m in mods}, []
    for m in mods:
        with open(os.path.join(pkgdir, m + ".py")) as fh:
            tree = ast.parse(fh.read(), m + ".py")
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module in mods:
                    edges[m].add(node.module)
                    private += [(m, node.module, a.name) for a in node.names
                                if a.name.startswith("_") and not a.name.startswith("__")]
                elif node.module is None:
                    for a in node.names:
                        if a.name in mods:
                            edges[m].add(a.name)
                            aliases[a.asname or a.name] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                private.append((m, aliases[node.value.id], node.attr))
        edges[m].discard(m)
    return edges, sorted(set(private))


def cycles(edges):
    """The strongly connected sets of more than one module (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


# 1. The checker finds what it must find.
with tempfile.TemporaryDirectory(prefix="unsteal-imports-test-") as d:
    files = {
        "a.py": "from .b import thing\n",
        "b.py": "def f():\n    from . import c\n    return c._hidden\n\nthing = 1\n",
        "c.py": "from . import a\n_hidden = 2\n",
        "d.py": "from .a import thing\nfrom .c import _hidden\n",
    }
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as fh:
            fh.write(text)
    e, p = imports(d)
    ok(cycles(e) == [["a", "b", "c"]], "a constructed cycle a -> b -> c -> a is found",
       cycles(e))
    ok(p == [("b", "c", "_hidden"), ("d", "c", "_hidden")],
       "private names taken from a sibling are found", p)

# 2. tools/lablib.
pkg = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tap.ROOT, "tools", "lablib")
edges, private = imports(pkg)
found = cycles(edges)
ok(not found, f"no import cycle in {os.path.relpath(pkg, tap.ROOT)}",
   "\n".join(" <-> ".join(c) for c in found))
ok(not private, f"no module of {os.path.relpath(pkg, tap.ROOT)} takes a private name "
   "from another", "\n".join(f"{m} takes {s}.{n}" for m, s, n in private))

print(f"1..{tap.n}")
sys.exit(1 if tap.failed else 0)
