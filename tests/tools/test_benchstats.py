# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lablib/bench/benchstats.py: the balanced order of the layouts and
the paired comparisons with their bootstrap intervals and verdicts, on
constructed runs whose answer is known; and bench scale's comparisons
rendered from a constructed result."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-benchstats-")
ok = tap.ok
raises = tap.raises

from lablib.bench import benchstats  # noqa: E402
from lablib.testing import scalehost  # noqa: E402

LAY = ("per-domain", "per-domain-scaled", "per-host")


# ---------------------------------------------------------------- order

six = benchstats.balanced_orders(LAY, 6)
ok(benchstats.is_balanced(six) and len(six) == 6,
   "6 runs of 3 layouts: each layout in each position twice", six)
ok(all(sorted(o) == sorted(LAY) for o in six), "every run measures every layout once", six)
msg = raises(benchstats.balanced_orders, LAY, 5)
ok(msg is not None and "multiple of 3" in msg, "5 runs are refused: they cannot balance", msg)
ok(benchstats.follows_balanced(six),
   "6 runs: each layout right after each other equally often (a Williams design)", six)
ok(not benchstats.follows_balanced([LAY[r % 3:] + LAY[:r % 3] for r in range(6)]),
   "a cyclic rotation over 6 runs is not: per-domain always before per-domain-scaled")
four = benchstats.williams("ABCD")
ok(benchstats.is_balanced(four) and benchstats.follows_balanced(four) and len(four) == 4,
   "4 items: a Williams design of 4 rows", four)
ok(benchstats.orders(LAY, 1) == [six[0]], "a single run (a smoke run) takes the first row")
rotated5 = [LAY[r % 3:] + LAY[:r % 3] for r in range(5)]
ok(not benchstats.is_balanced(rotated5),
   "the old rotation over 5 repetitions is found unbalanced", rotated5)

# ---------------------------------------------------------------- statistics


def runs_of(pairs, field="x"):
    return [{"A": {field: a}, "B": {field: b}} for a, b in pairs]


c = benchstats.compare(runs_of([(1.0, 0.80), (1.0, 0.82), (1.0, 0.79), (1.0, 0.85),
                                (1.0, 0.81), (1.0, 0.83)]), "A", "B", "x")
ok(c["verdict"] == benchstats.SIZE and c["interval"][0] < c["estimate"] < c["interval"][1] < 1,
   "B consistently 0.8x of A: a size, its interval below 1", c)
ok(abs(c["estimate"] - 0.8162) < 0.001, "the estimate is the geometric mean of the ratios",
   c["estimate"])
again = benchstats.compare(runs_of([(1.0, 0.80), (1.0, 0.82), (1.0, 0.79), (1.0, 0.85),
                                    (1.0, 0.81), (1.0, 0.83)]), "A", "B", "x")
ok(again["interval"] == c["interval"], "the same runs give the same interval (fixed seed)")
text = benchstats.describe(c)
ok(text.startswith("B/A x 0.82 (95 % CI 0.8") and text.endswith("6 runs)"),
   "described with its interval and no verdict when a size is established", text)

c = benchstats.compare(runs_of([(1.0, 0.7), (1.0, 0.9), (1.0, 0.95), (1.0, 0.8),
                                (1.0, 1.5)]), "A", "B", "x")
ok(c["verdict"] == benchstats.DIRECTION and c["interval"][0] < 1 < c["interval"][1],
   "4 of 5 runs below 1, the interval holding 1: direction consistent, size not established",
   c)
ok(benchstats.describe(c).endswith(": " + benchstats.DIRECTION),
   "the description says so", benchstats.describe(c))
c = benchstats.compare(runs_of([(1.0, 0.9), (1.0, 1.1), (1.0, 0.95), (1.0, 1.05),
                                (1.0, 1.0), (1.0, 0.98)]), "A", "B", "x")
ok(c["verdict"] == benchstats.NONE, "ratios on both sides of 1: no difference shown", c)
c = benchstats.compare(runs_of([(1.0, 0.5)] * 4), "A", "B", "x")
ok(c["verdict"] == benchstats.FEW and c["interval"] is None and c["estimate"] == 0.5,
   "4 runs: an estimate, no interval", c)
c = benchstats.compare(runs_of([(0.0, 0.1)] * 5 + [(0.2, 0.1)]), "A", "B", "x")
ok(c["undefined"] == 5 and c["n"] == 1 and c["verdict"] == benchstats.FEW,
   "runs where A measured 0 have no ratio and are counted, not dropped silently", c)
c = benchstats.compare(runs_of([(0.0, 0.01 * i) for i in range(1, 7)]), "A", "B", "x",
                       "difference")
ok(c["verdict"] == benchstats.SIZE and abs(c["estimate"] - 0.035) < 1e-9,
   "a difference: the mean of B - A, sized when its interval excludes 0", c)
text = benchstats.describe(c, scale=100, unit=" points", digits=1)
ok(text.startswith("B - A x 3.5 points (95 % CI "), "a difference described in points", text)
c = benchstats.compare([{"A": {"x": 1.0}}] * 6, "A", "B", "x")
ok(c["estimate"] is None and "nothing to compare" in benchstats.describe(c),
   "a layout without the figure: nothing to compare", c)

# The interval is expanded for few runs: wider than the plain percentile
# bootstrap, about as wide as a t interval of the mean log ratio
logs = [0.1, -0.05, 0.2, 0.05, 0.15]
lo, hi = benchstats.bootstrap_interval(logs)
mean = sum(logs) / 5
sd = (sum((x - mean) ** 2 for x in logs) / 4) ** 0.5
t_half = 2.776 * sd / 5 ** 0.5
ok(abs((hi - lo) / 2 - t_half) < 0.35 * t_half,
   "5 values: the expanded bootstrap's half-width is near the t interval's",
   ((hi - lo) / 2, t_half))
rng = __import__("random").Random(1)
plain = sorted(sum(rng.choice(logs) for _ in range(5)) / 5 for _ in range(10000))
ok(hi - lo > plain[9749] - plain[250],
   "... and wider than the plain percentile interval", (hi - lo, plain[9749] - plain[250]))

c = benchstats.compare(runs_of([(0.9, 0.0), (0.8, 0.0), (1.0, 0.1), (0.9, 0.0), (0.7, 0.0),
                                (0.8, 0.0)]), "A", "B", "x", "difference")
ok(c["n"] == 6 and c["undefined"] == 0 and c["verdict"] == benchstats.SIZE and c["estimate"] < 0,
   "a layout that removes the figure entirely (0) counts as a difference, not dropped", c)
c = benchstats.compare(runs_of([(1.0, 0.9995 + 0.0001 * i) for i in range(6)]), "A", "B", "x")
text = benchstats.describe(c)
ok(c["verdict"] == benchstats.SIZE and "1.00 " not in text and "to 1.00," not in text,
   "an interval that excludes 1 is printed with the digits that show it", text)

# ---------------------------------------------------------------- bench scale

reps = [{"per-domain": {"idle_steal": 1.0, "trace_idle": 0.05, "ratio": 0.5},
         "per-domain-scaled": {"idle_steal": 0.9, "trace_idle": 0.04, "ratio": 1.0},
         "per-host": {"idle_steal": 0.7 + 0.01 * i, "trace_idle": 0.03, "ratio": 1.0}}
        for i in range(6)]
result = {"mixes": [{"cpus": 8, "mix": "seed-like", "numa_balancing": False,
                     "balanced": True, "reps": reps}]}
lines = scalehost.comparisons(result)
ok("- 8 CPUs, seed-like, NUMA balancing off: order balanced" in lines
   and any(x.startswith("  - per-host - per-domain idle_steal -0.275 vCPUs (95 % CI ")
           for x in lines)
   and any(x.startswith("  - per-host - per-domain trace_idle -2.0 points (95 % CI ")
           for x in lines)
   and any(x.startswith("  - per-host/per-domain ratio 2.00 (95 % CI ") for x in lines),
   "bench scale: each mix's comparisons with intervals, and whether its order balanced",
   lines)
del result["mixes"][0]["balanced"]
ok(any(x.endswith(": order not recorded") for x in scalehost.comparisons(result)),
   "results written before the order was recorded say so")

sys.exit(tap.end())
