# SPDX-License-Identifier: GPL-2.0-or-later
"""The harness of the tools' unit tests, on tests/taplib.py's TAP.

setup() gives a test a private build directory and cache (UNSTEAL_BUILD,
UNSTEAL_CACHE under a fresh temporary WORK directory), puts tools/lablib on
the path and loads the configuration; it must run before the test imports
lablib.  ok() prints one TAP line; end() prints the plan, removes WORK (if
setup() made one) and returns the exit status.
"""

import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from taplib import TAP  # noqa: E402

WORK = None
_tap = TAP()
ok = _tap.ok


def setup(prefix):
    global WORK
    WORK = tempfile.mkdtemp(prefix=prefix)
    os.environ["UNSTEAL_BUILD"] = os.path.join(WORK, "build")
    os.environ["UNSTEAL_CACHE"] = os.path.join(WORK, "cache")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from lablib import config
    config.load()
    from lablib import common
    common.PROGRESS = sys.stderr  # stdout is TAP
    return WORK


def raises(fn, *args, **kw):
    """The message of the LabError fn raised, or None if it raised none."""
    from lablib.common import LabError     # on the path once setup() ran
    try:
        fn(*args, **kw)
    except LabError as e:
        return str(e)
    return None


def end():
    status = _tap.plan()
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)
    return status
