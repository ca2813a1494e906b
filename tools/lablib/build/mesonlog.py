# SPDX-License-Identifier: GPL-2.0-or-later
"""What 'meson test' says at the end of a log: its summary lines."""

import re


def summary(log_text):
    """meson test's Ok/Fail/Skipped/... counts from a build log (the last summary)."""
    out = {}
    for key in ("Ok", "Expected Fail", "Fail", "Unexpected Pass", "Skipped", "Timeout"):
        m = re.findall(rf"^{key}:\s+(\d+)\s*$", log_text, re.M)
        if m:
            out[key] = int(m[-1])
    return out


def counts(log):
    """(passed, failed) of the meson test run logged in the file log: the
    last Ok count, and every Fail, Unexpected Pass and Timeout count."""
    ok = fail = 0
    with open(log) as fh:
        for line in fh:
            line = line.strip()
            if line.startswith("Ok:"):
                ok = int(line.split()[-1])
            if line.startswith("Fail:") or line.startswith("Unexpected Pass:") or \
                    line.startswith("Timeout:"):
                fail += int(line.split()[-1])
    return ok, fail
