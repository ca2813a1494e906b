# SPDX-License-Identifier: GPL-2.0-or-later
"""No module of tools/lablib reads the configuration when it is imported.

Modules ask config.get() only when a function of theirs is called, and the
entry point (commands.main(), tests/integration/labtest.py, tap.setup())
loads the configuration before it runs a command: a configuration read at
import would be fixed by whichever import came first (issue #42).

In a fresh interpreter, config.get() and config.load() are replaced by
functions that raise, and every module under tools/lablib (walked with
pkgutil) is imported in turn; the test fails naming each module whose
import raised, and, for a read of the configuration, where it was read.
The same interpreter then loads a configuration after all the imports and
checks that common's directories are the ones it names.

Usage: test_config_import.py [DIR]   (DIR holds lablib; default: tools/ of this checkout)
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ok = tap.ok
TOOLS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tap.ROOT, "tools")

# Run in the fresh interpreter, with TOOLS on its path; prints one JSON object.
CHILD = r'''
import importlib, json, os, pkgutil, sys, traceback
sys.path.insert(0, sys.argv[1])
from lablib import config

class ReadAtImport(Exception):
    pass

def _refuse(name):
    def refused(*args, **kw):
        here = [f for f in traceback.extract_stack()[:-1]
                if os.path.basename(f.filename) != "config.py"]
        where = f"{here[-1].filename}:{here[-1].lineno}" if here else "?"
        raise ReadAtImport(f"config.{name}() called at {where}")
    return refused

real_get, real_load = config.get, config.load
config.get, config.load = _refuse("get"), _refuse("load")

def names(pkg):
    """Every module under the package pkg, packages before what they hold."""
    out = []
    for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        out.append(info.name)
        if info.ispkg:
            try:
                sub = importlib.import_module(info.name)
            except Exception:
                continue  # reported when its turn comes
            out.extend(names(sub))
    return out

import lablib
mods, failed = ["lablib"] + names(lablib), {}
for name in mods:
    try:
        importlib.import_module(name)
    except BaseException as e:
        failed[name] = f"{type(e).__name__}: {e}"

# The configuration loaded after every import is the one the modules see.
config.get, config.load = real_get, real_load
late = {}
if not failed:
    from lablib import common
    cfg = config.load({"UNSTEAL_BUILD": "/late/build", "UNSTEAL_CACHE": "/late/cache"})
    late = {"build": common.build_dir(), "cache": common.cache_dir(),
            "sources": common.sources_dir(), "want": [cfg.build, cfg.cache, cfg.sources]}
print(json.dumps({"modules": mods, "failed": failed, "late": late}))
'''

p = subprocess.run([sys.executable, "-c", CHILD, TOOLS], capture_output=True, text=True,
                   timeout=120, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
if p.returncode != 0:
    print(f"Bail out! the importing interpreter failed ({p.returncode}): {p.stderr.strip()}")
    sys.exit(1)
out = json.loads(p.stdout.splitlines()[-1])

ok(len(out["modules"]) > 10 and "lablib.common" in out["modules"]
   and "lablib.testing.testhost" in out["modules"],
   f"pkgutil walks tools/lablib and its subpackages ({len(out['modules'])} modules)",
   "\n".join(out["modules"]))
ok(not out["failed"], "no module of tools/lablib reads the configuration (or fails) "
   "when it is imported",
   "\n".join(f"{m}: {why}" for m, why in sorted(out["failed"].items())))
late = out["late"]
ok(late and [late["build"], late["cache"], late["sources"]] == late["want"]
   == ["/late/build", "/late/cache", "/late/cache/sources"],
   "the configuration loaded after the imports is the one common's directories name",
   late or "not checked: an import failed")

sys.exit(tap.end())
