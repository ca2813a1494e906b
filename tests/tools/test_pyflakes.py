# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab and tools/lablib pass pyflakes with no finding.

pyflakes finds names that are used but never defined, imports nothing
uses, and a name that an import brings in being defined again: the
last is how testhostroot.py once shadowed the chroot module with a
function of the same name, so that the test host's base root could not
be made from an empty cache.  The findings are listed under the failed
check.  pyflakes
is first run on a file written here with such a redefinition, and must
find it.  pyflakes comes with 'tools/lab setup' (group "lint").

Usage: test_pyflakes.py [PATH...]   (default: tools/lab tools/lablib)
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ok = tap.ok
PATHS = sys.argv[1:] or [os.path.join(tap.ROOT, "tools", "lab"),
                         os.path.join(tap.ROOT, "tools", "lablib")]


def pyflakes():
    for name in ("pyflakes3", "pyflakes"):
        if shutil.which(name):
            return [name]
    return [sys.executable, "-m", "pyflakes"]


def findings(paths):
    p = subprocess.run(pyflakes() + paths, capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        raise SystemExit(f"Bail out! pyflakes failed: {p.stderr.strip()}")
    return [ln for ln in p.stdout.splitlines() if ln.strip()]


with tempfile.TemporaryDirectory(prefix="unsteal-pyflakes-") as tmp:
    bad = os.path.join(tmp, "shadow.py")
    with open(bad, "w") as fh:
        fh.write("import os\n\n\ndef os():\n    return 1\n")
    found = findings([bad])
    ok(any("redefinition of unused 'os'" in ln for ln in found),
       "pyflakes finds a function that shadows an imported module", "\n".join(found))

found = findings(PATHS)
ok(not found, f"pyflakes finds nothing in {', '.join(os.path.relpath(p, tap.ROOT) for p in PATHS)}",
   "\n".join(found))
sys.exit(tap.end())
