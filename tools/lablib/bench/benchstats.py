# SPDX-License-Identifier: GPL-2.0-or-later
"""The statistics behind the benchmarks' comparisons.

A comparison is paired: in every run (a boot of the test host, or a
repetition on the host) each layout is measured once, beside the others,
so the figure of a comparison is the per-run ratio B/A of one layout's
figure to another's (or the difference B - A, for figures that may be 0).
Its size is the geometric mean of those ratios (the mean difference),
with a 95 % bootstrap interval: resampling the runs with a fixed seed, so
that the same JSON gives the same interval, and read at the expanded
percentiles that make a percentile bootstrap cover as a t interval does
with few runs (a plain percentile bootstrap of a mean covers about 85 %
at 5 runs; Hesterberg's expansion: the percentile of the normal quantile
sqrt(n / (n - 1)) t(n - 1)).  A size is stated only when the interval
excludes no difference and there are at least MIN_RUNS runs.  Otherwise
the verdict is "direction consistent, size not established" when most
runs (MOSTLY) lie on one side, and "no difference shown" when they do not.

balanced_orders() gives the order of the layouts in each run so that
every layout is measured equally often in every position, and (with a
multiple of 6 runs of 3 layouts) follows every other layout equally
often: a Williams design, which a rotation does not give.
"""

import math
import random

from ..common import LabError

MIN_RUNS = 5
# "direction consistent": the interval holds 1, but at least this share of
# the runs are on one side of it
MOSTLY = 0.8
LEVEL = 0.95
RESAMPLES = 10000
SEED = 20261128

SIZE = "size established"
DIRECTION = "direction consistent, size not established"
NONE = "no difference shown"
FEW = "too few runs for an interval"


# T975[df]: the 0.975 quantile of Student's t (df > 30: the normal's)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131,
        16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042}


def williams(items):
    """The rows of a Williams design for items: each item in each position
    equally often and, over all rows, right after every other item equally
    often (2 n rows for an odd number n of items, n rows for an even)."""
    items = tuple(items)
    n = len(items)
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:       # 0, 1, n-1, 2, n-2, ...
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(c + r) % n for c in first] for r in range(n)]
    if n % 2:
        rows += [list(reversed(row)) for row in rows]
    return [tuple(items[i] for i in row) for row in rows]


def balanced_orders(items, runs):
    """The order of items in each of runs runs: the rows of the Williams
    design in turn.  With runs a multiple of len(items) each item is in
    each position equally often; with a multiple of the design's rows
    each also follows each other equally often.  Refuses a number of runs
    that cannot balance positions."""
    n = len(tuple(items))
    if runs < 1 or runs % n:
        raise LabError(f"{runs} runs do not balance {n} layouts: give a multiple of {n} "
                       "(each layout then runs equally often first, second, ...)")
    # Each n rows of the design are a Latin square, so any multiple of n
    # runs balances positions
    return orders(items, runs)


def orders(items, runs):
    """The rows of the Williams design in turn, for any number of runs
    (balanced_orders() refuses those that cannot balance; a smoke run's
    single one takes the first row)."""
    rows = williams(items)
    return [rows[r % len(rows)] for r in range(runs)]


def t975(df):
    keys = [k for k in T975 if k <= df]
    return T975[max(keys)] if df <= 30 else 1.960


def expanded_level(n, level=LEVEL):
    """The level at which to read a percentile bootstrap of a mean of n
    values so that it covers about as a t interval at level does."""
    if level != 0.95:
        raise ValueError("the expansion is tabled for 95 % only")
    z = math.sqrt(n / (n - 1)) * t975(n - 1)
    return math.erf(z / math.sqrt(2))     # 2 Phi(z) - 1

def is_balanced(orders):
    """Whether every item is in every position equally often."""
    if not orders:
        return False
    n = len(orders[0])
    counts = {}
    for order in orders:
        for pos, item in enumerate(order):
            counts[(item, pos)] = counts.get((item, pos), 0) + 1
    items = set(orders[0])
    want = len(orders) / n
    return all(counts.get((i, p), 0) == want for i in items for p in range(n))


def follows_balanced(orders):
    """Whether every item comes right after every other equally often."""
    pairs = {}
    for order in orders:
        for x, y in zip(order, order[1:]):
            pairs[(x, y)] = pairs.get((x, y), 0) + 1
    items = set(orders[0]) if orders else set()
    want = [pairs.get((x, y), 0) for x in items for y in items if x != y]
    return bool(want) and min(want) == max(want)


def paired(runs, a, b, field):
    """[(run[a][field], run[b][field])] over the runs where both are
    measured; runs: [{layout: {field: value}}]."""
    out = []
    for run in runs:
        x, y = run.get(a, {}).get(field), run.get(b, {}).get(field)
        if x is not None and y is not None:
            out.append((x, y))
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def bootstrap_interval(values, level=LEVEL, resamples=RESAMPLES, seed=SEED):
    """The expanded percentile-bootstrap interval of the mean of values (2
    or more): (low, high)."""
    rng = random.Random(seed)
    n = len(values)
    level = expanded_level(n, level)
    means = sorted(sum(rng.choice(values) for _ in range(n)) / n for _ in range(resamples))
    lo = means[int(math.floor((1 - level) / 2 * resamples))]
    hi = means[min(resamples - 1, int(math.ceil((1 + level) / 2 * resamples)) - 1)]
    return lo, hi


def compare(runs, a, b, field, kind="ratio", min_runs=MIN_RUNS):
    """Layout b against layout a on field over paired runs.

    kind "ratio": per-run b/a, summed up as their geometric mean with the
    interval of it (bootstrap over the mean log ratio); a run with a 0
    (no ratio) is counted under "undefined".  kind "difference": per-run
    b - a, their mean and its interval; for shares that may be 0 (host
    idle).  Returns {"a", "b", "field", "kind", "n", "values" (per run),
    "undefined", "estimate", "interval" ([low, high] at LEVEL, None below
    min_runs), "verdict"}."""
    pairs = paired(runs, a, b, field)
    if kind == "ratio":
        values = [y / x for x, y in pairs if x > 0 and y > 0]
        null = 1.0
    elif kind == "difference":
        values = [y - x for x, y in pairs]
        null = 0.0
    else:
        raise ValueError(f"unknown kind {kind}")
    out = {"a": a, "b": b, "field": field, "kind": kind, "n": len(values), "values": values,
           "undefined": len(pairs) - len(values), "estimate": None, "interval": None,
           "verdict": FEW}
    if not values:
        return out
    if kind == "ratio":
        out["estimate"] = geomean(values)
    else:
        out["estimate"] = sum(values) / len(values)
    if len(values) < min_runs:
        return out
    if kind == "ratio":
        lo, hi = (math.exp(x) for x in bootstrap_interval([math.log(v) for v in values]))
    else:
        lo, hi = bootstrap_interval(values)
    out["interval"] = [lo, hi]
    below, above = sum(v < null for v in values), sum(v > null for v in values)
    if lo > null or hi < null:
        out["verdict"] = SIZE
    elif max(below, above) >= MOSTLY * len(values):
        out["verdict"] = DIRECTION
    else:
        out["verdict"] = NONE
    return out


def describe(c, digits=2, scale=1.0, unit=""):
    """One phrase for a comparison, e.g. 'per-host/per-domain maxmin 0.87
    (95 % CI 0.80-0.94, 6 runs)'; with the verdict when no size is
    established.  scale and unit apply to a difference (100, ' points')."""
    f = f"{{:.{digits}f}}"
    if c["kind"] == "ratio":
        head, k = f"{c['b']}/{c['a']} {c['field']}", 1.0
    else:
        head, k = f"{c['b']} - {c['a']} {c['field']}", scale

    u = "" if c["kind"] == "ratio" else unit

    def v(x):
        return f.format(x * k)
    if c["estimate"] is None:
        return f"{head}: nothing to compare ({c['undefined']} runs without a ratio)"
    extra = f", {c['undefined']} runs without a ratio" if c["undefined"] else ""
    if c["interval"] is None:
        return f"{head} {v(c['estimate'])}{u} ({c['n']} runs{extra}: {FEW})"
    lo, hi = c["interval"]
    null = 1.0 if c["kind"] == "ratio" else 0.0
    if c["verdict"] == SIZE and digits < 4 and null * k in (float(v(lo)), float(v(hi))):
        # an interval that excludes no difference must not print as if it held it
        return describe(c, digits + 1, scale, unit)
    text = (f"{head} {v(c['estimate'])}{u} (95 % CI {v(lo)} to {v(hi)}{u}, "
            f"{c['n']} runs{extra})")
    return text if c["verdict"] == SIZE else f"{text}: {c['verdict']}"
