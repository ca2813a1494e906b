# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench mixed: the actions, the rule and the tables, on a
constructed result whose figures are known."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

tap.setup("unsteal-benchmixed-")
from lablib.bench import benchmixed  # noqa: E402
from lablib.common import LabError  # noqa: E402

ok = tap.ok

# 1. Every action by default, in ACTIONS' order; --action keeps that order
labels = [a[0] for a in benchmixed.actions(1024)]
ok(len(labels) == len(benchmixed.ACTIONS) and labels[0].startswith("vcpu_quota=50000"),
   "all actions by default, the cap that does not bind first", labels)
only = benchmixed.actions(100, ["shares-4x", "cap-binds"])
ok([a[0] for a in only] == ["vcpu_quota=20000 (cap, binds)", "cpu_shares=400"],
   "--action: only the actions named, in the order they always run", only)
ok(only[1][1] == ["cpu_shares=400"] and only[1][2] == {"shares": "400"},
   "v2's default weight (100): shares-4x is cpu_shares=400, live and in <cputune>", only[1])
try:
    benchmixed.actions(1024, ["cap", "nope"])
    ok(False, "an unknown action is refused")
except LabError as e:
    ok("nope" in str(e) and "cap-binds" in str(e), "an unknown action is refused, "
       "with the known ones", str(e))

for bad in ({"windows": 0}, {"reps": 0}, {"seconds": 0}):
    try:
        benchmixed.run_bench(**bad)
        ok(False, f"{bad} is refused")
    except LabError as e:
        ok("--windows must be at least 1" in str(e), f"{bad} is refused before anything runs",
           str(e))

# 2. The rule: a cap changes nothing unless it binds; shares S give S / (4 D + S)
ok(abs(benchmixed.expected("vcpu_quota=50000 (cap, does not bind)", 0.67, 1024, 2) - 0.67)
   < 1e-9, "a cap that does not bind: what noisy had before")
ok(abs(benchmixed.expected("vcpu_quota=20000 (cap, binds)", 0.67, 1024, 2) - 0.40) < 1e-9,
   "a cap that binds: 2 vCPUs x 0.2")
ok(abs(benchmixed.expected("cpu_shares=512 (half the default)", 0.67, 1024, 2)
       - 512 / (4 * 1024 + 512) * 2) < 1e-9, "cpu_shares=512 on v1: 512 / 4608 of 2 CPUs")

# 3. The tables of a run with one action: the rule column and the spreads
row = {"action": "vcpu_quota=20000 (cap, binds)", "before": [0.66, 0.67, 0.68],
       "after": [0.40, 0.40, 0.41], "small_spread_before": [1.00, 1.01, 1.02],
       "small_spread_after": [1.06, 1.08, 1.22]}
stock = dict(row, before=[0.38, 0.39, 0.39], after=[0.38, 0.38, 0.39],
             small_spread_after=[1.10, 1.41, 1.09])
results = {"command": "tools/lab bench mixed --action cap-binds", "cpus": 2, "cgroup": "v1",
           "windows": 3, "seconds": 4, "reps": 3,
           "modes": {"per-domain": [stock], "per-host": [row]}}
md = benchmixed.markdown(results)
ok("| `vcpu_quota=20000 (cap, binds)` | 0.39 (0.38-0.39) → 0.38 (0.38-0.39) | "
   "0.67 (0.66-0.68) → 0.40 (0.40-0.41) | 0.40 | 1.00 |" in md,
   "noisy's row: medians and ranges, the rule and after / rule", md)
ok("1.01 (1.00-1.02) → 1.08 (1.06-1.22) |" in md and "→ 1.10 (1.09-1.41) |" in md,
   "the default guests' spreads in both modes", md)
ok(md.rstrip().endswith("Reproduce: `tools/lab bench mixed --action cap-binds`"),
   "the command that reproduces it", md[-80:])

ok("Where noisy's two vCPUs ran" not in md,
   "a run that did not record placements has no placement table", md)

# 4. Where noisy's vCPUs ran: the fraction of samples with two of them on one CPU
a, b, c = ("n", 0), ("n", 1), ("s", 0)
ok(benchmixed._shared([{a: 0, b: 1, c: 0}, {a: 1, b: 1, c: 0}, {a: 0, b: 0, c: 1},
                       {a: 1, b: 0, c: 1}], [a, b]) == 0.5,
   "two of four placements with noisy's vCPUs on one CPU: 0.5 (the default guest aside)")
ok(benchmixed._shared([], [a, b]) == 0.0, "no placement sampled: 0")
together, apart = benchmixed._split_windows([[1.40, 0.60], [1.01, 0.0], [1.30, 0.25],
                                             [1.02, 0.24]])
ok(together == [1.40, 1.30] and apart == [1.01, 1.02],
   f"windows split at {benchmixed.TOGETHER} of the window together", (together, apart))

placed = dict(row, noisy_shared_before=[0.0, 0.0, 0.1], noisy_shared_after=[0.0, 0.4, 0.0],
              windows_after=[[1.01, 0.0], [1.74, 1.0], [1.03, 0.0], [1.44, 0.6]],
              balancer_after=[{"noisy": {"load_avg": 1023, "util_avg": 330},
                               "small": {"load_avg": 1023, "util_avg": 420}}])
placed_stock = dict(stock, noisy_shared_before=[0.0, 0.0, 0.0],
                    noisy_shared_after=[0.0, 0.0, 0.0], windows_after=[[1.04, 0.0]])
md = benchmixed.markdown(dict(results, modes={"per-domain": [placed_stock],
                                              "per-host": [placed]}))
ok("| `vcpu_quota=20000 (cap, binds)` | per-host | 0.00 (0.00-0.10) → 0.00 (0.00-0.40) | "
   "2: 1.59 (1.44-1.74) | 2: 1.02 (1.01-1.03) |" in md,
   "per-host: vCPUs together before and after; the spreads of the windows together and "
   "apart", md)
ok("| `vcpu_quota=20000 (cap, binds)` | per-domain | 0.00 (0.00-0.00) → 0.00 (0.00-0.00) | "
   "0 | 1: 1.04 (1.04-1.04) |" in md, "stock: no window together", md)
ok("| `vcpu_quota=20000 (cap, binds)` | per-host | 1023, 330 | 1023, 420 |" in md
   and "| per-domain | 1023" not in md, "the balancer's view, only for the mode that recorded it", md)
ok(md.rstrip().endswith("Reproduce: `tools/lab bench mixed --action cap-binds`"),
   "the command still ends it", md[-80:])

sys.exit(tap.end())
