# SPDX-License-Identifier: GPL-2.0-or-later
"""The imports of tools/lablib point one way.

Every module of tools/lablib and of its subpackages is read as text
(nothing is imported or run) and each import of another module of the
package is an edge, including imports made inside a function.  Relative
imports of any level are followed: 'from . import x', 'from .x import y',
'from .. import pkg', 'from ..pkg import mod', 'from ..pkg.mod import z'.
A module is named by its dotted path below the package: 'common',
'bench.benchsched'; a subpackage's __init__.py by the subpackage's name.

The test fails on a cycle of edges; on a private name (one leading
underscore) that a module takes from another, by 'from .x import _y' or
by 'x._y'; and, when the package's __init__.py declares LAYERS (its
top-level modules and subpackages, lowest first), on an import of a layer
above the importing module's own, or on a module in no declared layer.
The checker is first run on two small packages it writes itself, a flat
one and one with subpackages and layers, with a cycle, private names and
an upward import, which it must find.

Usage: test_imports.py [DIR]   (default: tools/lablib of this checkout)
"""

import ast
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ok = tap.ok
INIT = "__init__"  # the name of the top package's own __init__.py


def modules(pkgdir):
    """{dotted name: file} of every module under pkgdir; packages are the
    directories with Python files, whether or not they have __init__.py."""
    mods, pkgs = {}, {()}
    for d, dirs, files in os.walk(pkgdir):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "__")))
        rel = os.path.relpath(d, pkgdir)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        if any(f.endswith(".py") for f in files):
            pkgs.add(parts)
        for f in files:
            if f.endswith(".py"):
                name = parts if f == "__init__.py" else parts + (f[:-3],)
                mods[name] = os.path.join(d, f)
    return mods, pkgs


def dotted(parts):
    return ".".join(parts) or INIT


def imports(pkgdir):
    """{module: {modules it imports}} and [(module, source, private name)]."""
    mods, pkgs = modules(pkgdir)
    top = os.path.basename(os.path.normpath(pkgdir))
    edges, private = {dotted(m): set() for m in mods}, []

    def target(parts):
        """The module that parts names, if any (a package: its __init__)."""
        return dotted(parts) if parts in mods or parts in pkgs else None

    for m, path in mods.items():
        me = dotted(m)
        here = m if os.path.basename(path) == "__init__.py" else m[:-1]
        with open(path) as fh:
            tree = ast.parse(fh.read(), path)
        aliases = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                if node.level - 1 > len(here):
                    continue  # above the top package
                base = here[:len(here) - node.level + 1]
            elif node.module and node.module.split(".")[0] == top:
                base = ()
                node = ast.ImportFrom(".".join(node.module.split(".")[1:]) or None,
                                      node.names, 1)
            else:
                continue  # the standard library or another package
            src = base + tuple(node.module.split(".")) if node.module else base
            src_name = target(src)
            for a in node.names:
                sub = src + (a.name,)
                if sub in mods or sub in pkgs:  # a module taken from a package
                    edges[me].add(dotted(sub))
                    aliases[a.asname or a.name] = dotted(sub)
                elif src_name is not None:  # a name taken from a module
                    edges[me].add(src_name)
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        private.append((me, src_name, a.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                private.append((me, aliases[node.value.id], node.attr))
        edges[me].discard(me)
    return edges, sorted(set(private))


def declared_layers(pkgdir):
    """LAYERS of the package's __init__.py, lowest first; () if none."""
    path = os.path.join(pkgdir, "__init__.py")
    if not os.path.exists(path):
        return ()
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "LAYERS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def layer_errors(edges, layers):
    """[(module, module it imports)] where the import goes up the layers, and
    [module] in no layer.  The top package's __init__ belongs to none."""
    rank = {name: i for i, name in enumerate(layers)}

    def layer(m):
        return rank.get(m.split(".")[0])

    up = sorted((m, s) for m in edges for s in edges[m]
                if m != INIT and s != INIT and None not in (layer(m), layer(s))
                and layer(s) > layer(m))
    stray = sorted(m for m in edges if m != INIT and layer(m) is None)
    return up, stray


def layer_edges(edges):
    """{layer: {layers it imports}}, for the report."""
    out = {}
    for m, srcs in edges.items():
        for s in srcs:
            a, b = m.split(".")[0], s.split(".")[0]
            if a != b:
                out.setdefault(a, set()).add(b)
    return out


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


def write(d, files):
    for name, text in files.items():
        path = os.path.join(d, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)


# 1. The checker finds what it must find: in a flat package ...
with tempfile.TemporaryDirectory(prefix="unsteal-imports-test-") as d:
    write(d, {
        "a.py": "from .b import thing\n",
        "b.py": "def f():\n    from . import c\n    return c._hidden\n\nthing = 1\n",
        "c.py": "from . import a\n_hidden = 2\n",
        "d.py": "from .a import thing\nfrom .c import _hidden\n",
    })
    e, p = imports(d)
    ok(cycles(e) == [["a", "b", "c"]], "a constructed cycle a -> b -> c -> a is found",
       cycles(e))
    ok(p == [("b", "c", "_hidden"), ("d", "c", "_hidden")],
       "private names taken from a sibling are found", p)

# ... and in one with subpackages and layers.
with tempfile.TemporaryDirectory(prefix="unsteal-imports-test-") as d:
    write(d, {
        "__init__.py": 'LAYERS = ("base", "low", "high")\n',
        "base.py": "_x = 1\n",
        "low/__init__.py": "",
        "low/a.py": "from .b import thing\n",
        "low/b.py": "def f():\n    from . import c\n    return c._hidden\n\nthing = 1\n",
        "low/c.py": "from . import a\nfrom ..base import _x\n_hidden = 2\n",
        "low/e.py": "def f():\n    from ..high import d\n    return d\n",
        "high/__init__.py": "",
        "high/d.py": "from ..low.a import thing\nfrom ..low import c\nfrom .. import base\n"
                     "y = c._hidden\n",
        "stray.py": "from .base import _x\n",
    })
    e, p = imports(d)
    ok(cycles(e) == [["low.a", "low.b", "low.c"]],
       "a constructed cycle across a subpackage's modules is found", cycles(e))
    ok(p == [("high.d", "low.c", "_hidden"), ("low.b", "low.c", "_hidden"),
             ("low.c", "base", "_x"), ("stray", "base", "_x")],
       "private names taken across subpackages are found", p)
    ok(e["high.d"] == {"low.a", "low.c", "base"},
       "'from ..pkg.mod import', 'from ..pkg import mod', 'from .. import mod' are edges",
       e["high.d"])
    up, stray = layer_errors(e, declared_layers(d))
    ok(up == [("low.e", "high.d")], "an import of a layer above is found", up)
    ok(stray == ["stray"], "a module in no declared layer is found", stray)

# 2. tools/lablib.
pkg = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tap.ROOT, "tools", "lablib")
name = os.path.relpath(pkg, tap.ROOT)
edges, private = imports(pkg)
found = cycles(edges)
ok(not found, f"no import cycle in {name}",
   "\n".join(" <-> ".join(c) for c in found))
ok(not private, f"no module of {name} takes a private name from another",
   "\n".join(f"{m} takes {s}.{n}" for m, s, n in private))
layers = declared_layers(pkg)
if layers:
    up, stray = layer_errors(edges, layers)
    ok(not up, f"no module of {name} imports a layer above its own "
       f"({' < '.join(layers)})", "\n".join(f"{m} imports {s}" for m, s in up))
    ok(not stray, f"every module of {name} is in a declared layer", "\n".join(stray))
    rank = {x: i for i, x in enumerate(layers)}
    for a, bs in sorted(layer_edges(edges).items(), key=lambda x: rank.get(x[0], -1)):
        print(f"# {a} imports {', '.join(sorted(bs, key=lambda b: rank.get(b, -1)))}")

sys.exit(tap.end())
