# SPDX-License-Identifier: GPL-2.0-or-later
"""What 'meson test' found: its machine-readable log (testlog.json), and the
summary lines of a build log where only the text is at hand."""

import json
import os
import re

from ..common import LabError
from ..results import Counts, Skip, measurements, tap_skips

# meson's results, as testlog.json spells them
PASSED = ("OK", "EXPECTEDFAIL")
SKIPPED = ("SKIP",)
FAILED = ("FAIL", "UNEXPECTEDPASS", "TIMEOUT", "ERROR", "INTERRUPT")


def summary(log_text):
    """meson test's Ok/Fail/Skipped/... counts from a build log (the last
    summary); for a log of a build whose testlog.json is out of reach
    (a package build in a root)."""
    out = {}
    for key in ("Ok", "Expected Fail", "Fail", "Unexpected Pass", "Skipped", "Timeout"):
        m = re.findall(rf"^{key}:\s+(\d+)\s*$", log_text, re.M)
        if m:
            out[key] = int(m[-1])
    return out


# meson test's --logbase: the name of its logs under meson-logs/
LOGBASE = "testlog"


def testlog(builddir, logbase=LOGBASE):
    return os.path.join(builddir, "meson-logs", logbase + ".json")


def tests(builddir, logbase=LOGBASE):
    """Every test of the last 'meson test' in builddir that wrote its logs
    under logbase: the JSON log's objects (name, result, stdout, ...)."""
    path = testlog(builddir, logbase)
    try:
        with open(path) as fh:
            return [json.loads(x) for x in fh if x.strip()]
    except (OSError, ValueError) as e:
        raise LabError(f"meson test left no readable {path}: {e}")


def measured(builddir, logbase=LOGBASE):
    """The margin and measured lines every test of the last 'meson test'
    printed (results.measurements()), each with its test's name."""
    out = []
    for t in tests(builddir, logbase):
        out += measurements(t.get("stdout") or "", t["name"])
    return out


def results(builddir, logbase=LOGBASE):
    """Counts of the last 'meson test' in builddir, one unit per meson test,
    read from meson-logs/testlog.json (one JSON object per test).  A test
    that skipped is listed with the reason its TAP plan or its output gave;
    a TAP test's skipped checks are listed too.  A result this module does
    not know fails the test: nothing is dropped."""
    out = Counts()
    for t in tests(builddir, logbase):
        name, res, text = t["name"], t["result"], t.get("stdout") or ""
        whole, checks = tap_skips(text)
        if res in PASSED:
            out.passed += 1
            out.skipped_checks += [Skip(f"{name}: {c.name}", c.reason) for c in checks]
        elif res in SKIPPED:
            out.skipped.append(Skip(name, whole or _last_line(text) or "no reason given"))
        else:
            out.failed += 1
            known = "" if res in FAILED else " (a result meson did not have before)"
            out.why.append(f"{name}: {res}{known}")
    return out


def _last_line(text):
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[-1][:200] if lines else ""


def describe(counts):
    """'120 ok, 0 failed, 3 skipped': for progress lines."""
    return f"{counts.passed} ok, {counts.failed} failed, {len(counts.skipped)} skipped"
