# SPDX-License-Identifier: GPL-2.0-or-later
"""TAP output, the one harness of every test program of this repository
that prints TAP itself: the integration tests (tests/integration/labtest.py)
and the tools' unit tests (tests/tools/tap.py) both count, print and judge
measured bounds through TAP here.

TAP.ok() prints one test line (and, on failure, its detail as comments);
bound() and margin() judge a measured figure against its bound and print
where it lies, in one comment of a fixed shape; plan() prints the plan,
done() prints it and exits.  skip_all() skips a whole program.
"""

import operator
import sys


class TAP:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, what, detail=""):
        self.n += 1
        if cond:
            print(f"ok {self.n} - {what}", flush=True)
        else:
            self.failed += 1
            print(f"not ok {self.n} - {what}", flush=True)
            self._detail(detail)
        return cond

    def _detail(self, detail):
        for line in str(detail).splitlines():
            print(f"# {line}", flush=True)

    def bound(self, value, limit, what, *, above=False, strict=False, unit="", figure="",
              detail=""):
        """ok() on a measured figure against its bound, value <= limit
        (see margin() for the arguments), with margin()'s comment right
        after the test line, pass or fail, and detail after it on failure.
        Returns the condition, as ok() does."""
        inside, line = _margin(value, limit, what, above, strict, unit, figure)
        self.ok(inside, what)
        print(line, flush=True)
        if not inside:
            self._detail(detail)
        return inside

    def margin(self, value, limit, what, *, above=False, strict=False, unit="", figure=""):
        """Prints where a measured figure lies against its bound, in one
        comment of a fixed shape that CI logs can be searched for:

          # margin: WHAT: got 0.4 s (FIGURE), bound < 2 s, margin 1.6 s (80.0 % of the bound)
          # margin: WHAT: got nothing, bound >= 0.8, margin none

        The bound is value <= limit, value >= limit with above=True, < or >
        with strict=True; value None means nothing was measured, which is
        outside.  unit follows each number; figure, where given, says what
        value is where WHAT does not.  The margin is how far inside the
        bound value lies, negative outside; its share of the bound is left
        out where the bound is 0.  No test line: bound() makes one; alone,
        for a check of several conditions, call it after that check's ok().
        Returns whether value is within the bound."""
        inside, line = _margin(value, limit, what, above, strict, unit, figure)
        print(line, flush=True)
        return inside

    def skip(self, what, reason):
        """A check that could not be made here; says why (TAP SKIP)."""
        self.n += 1
        print(f"ok {self.n} - {what} # SKIP {reason}", flush=True)

    def eq(self, got, want, what):
        return self.ok(got == want, what, f"got:  {got!r}\nwant: {want!r}")

    def plan(self):
        """Prints the plan; the exit status of the checks so far."""
        print(f"1..{self.n}", flush=True)
        return 1 if self.failed else 0

    def done(self):
        sys.exit(self.plan())


# (above, strict) -> the bound's sign and its test
_BOUNDS = {(False, False): ("<=", operator.le), (False, True): ("<", operator.lt),
           (True, False): (">=", operator.ge), (True, True): (">", operator.gt)}


def _figure(x):
    """A number for a margin line: an int as it is, others to 4 digits."""
    if isinstance(x, int):
        return str(x)
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"


def within(value, limit, *, above=False, strict=False, **_):
    """Whether a measured value is within its bound, as TAP.bound() judges
    it (its other options are accepted and ignored)."""
    return value is not None and bool(_BOUNDS[(above, strict)][1](value, limit))


def _margin(value, limit, what, above, strict, unit, figure):
    """(whether value is within its bound, TAP.margin()'s line)."""
    sign, test = _BOUNDS[(above, strict)]
    u = f" {unit}" if unit else ""
    got = "nothing" if value is None else _figure(value) + u
    if figure:
        got += f" ({figure})"
    line = f"# margin: {what}: got {got}, bound {sign} {_figure(limit)}{u}, margin "
    if value is None:
        return False, line + "none"
    room = value - limit if above else limit - value
    line += _figure(room) + u
    if limit:
        line += f" ({room / abs(limit) * 100:.1f} % of the bound)"
    return bool(test(value, limit)), line


def skip_all(reason):
    print(f"1..0 # SKIP {reason}", flush=True)
    sys.exit(0)
