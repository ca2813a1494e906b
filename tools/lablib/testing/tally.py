# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab test's tally: each stage's units passed, failed and skipped,
every skip by name with its reason, and the closing lines
'N passed, N failed, N skipped'."""

import collections
import traceback

from ..common import LabError, step
from ..results import Counts

# Of each failed stage, at most this many lines of why in the summary
WHY_LINES = 8
# Skipped checks of one stage with one reason: named in the summary up to
# this many; past it the count and the first names (kernel selftests skip
# hundreds of upstream subtests for one reason, such as no hugetlb pages)
NAMES_PER_REASON = 6


def as_counts(res):
    """A stage function's return value as Counts: Counts as it is; a tuple
    (passed, failed) or (passed, failed, why); anything else is one passed
    check."""
    if isinstance(res, Counts):
        return res
    if isinstance(res, tuple):
        return Counts(res[0], res[1], why=list(res[2]) if len(res) > 2 else [])
    return Counts(passed=1)


class Tally:
    """Counts the stages' units.  A stage that raises fails as one unit,
    with its message (LabError) or its exception (any other, traceback
    printed) as the why: a stage that should run and cannot is a failure,
    never a skip."""

    def __init__(self):
        self.total = Counts()
        self.failures = []      # failed stages, each with its count
        self.why = []           # 'STAGE: line'
        self.skips = []         # (stage, Skip, whole unit?)

    def _fail(self, name, why, count=None):
        self.failures.append(name if count is None else f"{name} ({count} failed)")
        self.why += [f"{name}: {w}" for w in why[:WHY_LINES]]
        if len(why) > WHY_LINES:
            self.why.append(f"{name}: ... {len(why) - WHY_LINES} more above")

    def stage(self, name, fn):
        """Run one stage; returns its function's value (None when it raised)."""
        step(f"test: {name}")
        try:
            res = fn()
        except LabError as e:
            print(f"lab: FAIL: {name}: {e}", flush=True)
            self.total.failed += 1
            self._fail(name, [str(e)])
            return None
        except Exception as e:
            traceback.print_exc()
            self.total.failed += 1
            self._fail(name, [f"{type(e).__name__}: {e} (traceback above)"])
            return None
        c = as_counts(res)
        self.total = self.total + Counts(c.passed, c.failed, c.skipped, c.skipped_checks)
        self.skips += [(name, s, True) for s in c.skipped]
        self.skips += [(name, s, False) for s in c.skipped_checks]
        if c.failed:
            self._fail(name, c.why, c.failed)
        return res

    def skip_lines(self):
        """Every skip: a skipped unit on a line of its own; skipped checks
        grouped by stage and reason, named up to NAMES_PER_REASON."""
        lines = [f"skipped: {stage}: {s.name}: {s.reason}"
                 for stage, s, whole in self.skips if whole]
        groups = collections.OrderedDict()
        for stage, s, whole in self.skips:
            if not whole:
                groups.setdefault((stage, s.reason), []).append(s.name)
        for (stage, reason), names in groups.items():
            if len(names) == 1:
                lines.append(f"skipped check: {stage}: {names[0]}: {reason}")
                continue
            # a program that skipped many unnamed subtests: its name and count
            counted = collections.Counter(names)
            names = [n if counted[n] == 1 else f"{n} (x{counted[n]})"
                     for n in dict.fromkeys(names)]
            shown = "; ".join(names[:NAMES_PER_REASON])
            more = f"; and {len(names) - NAMES_PER_REASON} more" \
                if len(names) > NAMES_PER_REASON else ""
            lines.append(f"skipped checks ({sum(counted.values())}): {stage}: {reason}: "
                         f"{shown}{more}")
        return lines

    def summary(self):
        """The closing lines: every skip, the failed stages and why, then
        the counts; returns the exit status."""
        for line in self.skip_lines():
            print(f"lab: {line}")
        if self.failures:
            print("lab: failed stages: " + "; ".join(self.failures))
        for line in self.why:
            print(f"lab:   {line}")
        print(f"{self.total.passed} passed, {self.total.failed} failed, "
              f"{len(self.total.skipped)} skipped", flush=True)
        return 1 if self.total.failed else 0
