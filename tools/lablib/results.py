# SPDX-License-Identifier: GPL-2.0-or-later
"""What a test stage found: how many of its units passed, failed and were
skipped, every skip by name with its reason, and the lines that say why it
failed.

A unit is what the stage counts: a meson test, a test program booted in a
guest.  A unit that skipped as a whole is counted as skipped (not passed);
a check skipped inside a unit that ran is listed (skipped_checks) but not
counted, so that passed + failed + skipped is the number of units.
"""

import collections
import dataclasses
import re

# One skip: what was not checked, and the reason its program gave.
Skip = collections.namedtuple("Skip", "name reason")

# A TAP line of a skipped check: 'ok 3 - what # SKIP reason', or a plan that
# skips a whole program: '1..0 # SKIP reason'.
TAP_SKIP_RE = re.compile(r"^\s*ok\s+\d+\s*(?:-\s*)?(.*?)\s*#\s*SKIP\b:?\s*(.*)$", re.I)
TAP_SKIP_ALL_RE = re.compile(r"^\s*1\.\.0\s*#\s*SKIP\b:?\s*(.*)$", re.I)


@dataclasses.dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: list = dataclasses.field(default_factory=list)         # [Skip] of units
    skipped_checks: list = dataclasses.field(default_factory=list)  # [Skip] inside units
    why: list = dataclasses.field(default_factory=list)             # lines: why it failed

    def __add__(self, other):
        return Counts(self.passed + other.passed, self.failed + other.failed,
                      self.skipped + other.skipped,
                      self.skipped_checks + other.skipped_checks, self.why + other.why)


# What a test prints about a measured figure (tests/integration/labtest.py):
# '# margin: WHAT: got X ..., bound SIGN Y ..., margin Z ...' after a check
# of a bound, '# measured: WHAT: ...' for a figure that is reported only;
# nested once more ('# # ...') inside a test host row's TAP.
MEASURE_RE = re.compile(r"^\s*#\s+(?:#\s+)?(margin|measured): (.*)$")


def measurements(text, source):
    """[{'source', 'kind', 'line'}] of the margin and measured lines in a
    test's output, for the JSON tools/lab test keeps under _build/."""
    return [{"source": source, "kind": m.group(1), "line": m.group(2).strip()}
            for m in map(MEASURE_RE.match, text.splitlines()) if m]


def tap_skips(text):
    """(the reason a TAP program skipped as a whole or None, [Skip] of its
    skipped checks) from its output."""
    whole, checks = None, []
    for line in text.splitlines():
        m = TAP_SKIP_ALL_RE.match(line)
        if m:
            whole = m.group(1).strip() or "no reason given"
            continue
        m = TAP_SKIP_RE.match(line)
        if m:
            checks.append(Skip(m.group(1).strip(), m.group(2).strip() or "no reason given"))
    return whole, checks
