#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The figures of README.md's performance paragraph, recomputed from the
JSON files of docs/performance/ with their 95 % intervals.

Nothing is measured: the script reads the files 'tools/lab bench ... --out'
wrote and prints a Markdown summary.  Each repetition of a benchmark
measures the layouts back to back on the same processes, so a layout is
compared with another by the paired ratio of the two in each repetition.

* Shares (sched.json, guests.json): the large/small per-vCPU ratio,
  per-host over per-domain; geometric mean of the 5 paired ratios with a
  t interval of the mean log-ratio.
* Idle steal at scale (scale.json and scale-*/scale.json, the rows without
  a tuning): every mix with idle steal, per-host against stock
  (per-domain) and against per-domain weights scaled by vCPUs.  With 5
  repetitions a run gives no distribution-free 95 % interval (the exact
  sign and signed-rank tests cannot reach p < 0.0625), and runs of the same
  mix differ by as much as the layouts do, so the interval is over the
  runs: a run's value is the geometric mean of its paired ratios over its
  mixes, and the t interval is over the runs.
* Default guests beside a binding cap (mixed-binding-cap-held/mixed.json):
  the windows in which the four default guests' max/min CPU time exceeded
  1.10; too few repetitions for an interval.
* Start of a domain (control.json): per-host over stock, ratio of the
  medians with a two-sample bootstrap interval (10,000 resamples, fixed
  seed) and a Mann-Whitney test.

Usage: tools/bench/claims.py [DIR]   (default: docs/performance)
"""

import glob
import json
import math
import os
import random
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "performance")
SEED, RESAMPLES = 20261127, 10000
# 0.975 quantile of Student's t by degrees of freedom
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
        8: 2.306, 9: 2.262, 10: 2.228}
med = statistics.median


def load(rel):
    with open(os.path.join(DIR, rel)) as f:
        return json.load(f)


def where(d):
    m = d["machine"]
    return f"{m['cpus']}-vCPU VM, {m['cpu_model']}, kernel {m['kernel']}"


def geo_t(ratios):
    """Geometric mean of ratios and the t 95 % interval of the mean log."""
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    half = T975[len(logs) - 1] * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def verdict(lo, hi):
    return "excludes 1" if hi < 1 or lo > 1 else "includes 1: size not established"


def shares():
    print("## Busy vCPUs: large/small per-vCPU ratio, per-host / per-domain\n")
    for rel, mixes in (("sched.json", ("2-1-1", "4-2-2", "2+6x1")), ("guests.json", ("2-1-1",))):
        d = load(rel)
        print(f"{rel} ({where(d)}):")
        for m in d["mixes"]:
            if m["mix"] in mixes:
                a = [r["per-domain"]["ratio"] for r in m["reps"]]
                b = [r["per-host"]["ratio"] for r in m["reps"]]
                g, lo, hi = geo_t([y / x for x, y in zip(a, b)])
                print(f"* {m['mix']}: per-domain {med(a):.2f}, per-host {med(b):.2f}, "
                      f"ratio {g:.2f} (95 % {lo:.2f}-{hi:.2f}, n = {len(a)}; {verdict(lo, hi)})")
        print()


def scale_runs():
    files = sorted(glob.glob(os.path.join(DIR, "scale*", "scale.json")))
    files = [os.path.join(DIR, "scale.json")] + files
    for path in files:
        if os.path.exists(path):
            yield os.path.relpath(path, DIR), load(os.path.relpath(path, DIR))


def idle_steal():
    print("## Idle steal at scale (exact, vCPUs), per-host against the other layouts\n")
    runs = {}
    for rel, d in scale_runs():
        print(f"{rel}: `{d['command']}`, TCG {d['tcg']}-threaded, guest kernel "
              f"{d['hosts'][0]['kernel']}, on a {where(d)}")
        for m in d["mixes"]:
            if m.get("tuning") not in (None, "none"):
                continue
            v = {k: [r[k]["idle_steal"] for r in m["reps"]]
                 for k in ("per-domain", "per-domain-scaled", "per-host")}
            if med(v["per-domain"]) < 0.05:
                continue  # no idle steal to compare (seed-4-2-2)
            cells = []
            for other in ("per-domain", "per-domain-scaled"):
                pairs = [h / o for o, h in zip(v[other], v["per-host"]) if h and o]
                below = med(v["per-host"]) < med(v[other])
                runs.setdefault((m["mix"], other), {}).setdefault(rel, []).append((pairs, below))
                cells.append(f"{other} {med(v[other]):.2f} ({med(v['per-host']) / med(v[other]) - 1:+.0%})")
            nb = "on" if m["numa_balancing"] else "off"
            print(f"* {m['mix']}, NUMA balancing {nb}: per-host {med(v['per-host']):.2f}; " + ", ".join(cells))
        print()
    print("Over the runs (a run: geometric mean of its paired ratios; t 95 % over the runs):\n")
    for mixes, label in ((("seed-like", "over-16"), "mixed loads (seed-like, over-16)"),
                         (("exact-16",), "exact-16")):
        for other in ("per-domain", "per-domain-scaled"):
            per_run, names, lower, paired, total = [], [], 0, 0, 0
            files = sorted({rel for mix in mixes for rel in runs.get((mix, other), {})})
            for rel in files:
                rows = [row for mix in mixes for row in runs.get((mix, other), {}).get(rel, [])]
                logs = [sum(map(math.log, p)) / len(p) for p, _ in rows]
                lower += sum(below for _, below in rows)
                paired += sum(x < 0 for x in logs)
                total += len(logs)
                per_run.append(math.exp(sum(logs) / len(logs)))
                names.append(os.path.dirname(rel) or rel)
            g, lo, hi = geo_t(per_run)
            print(f"* {label}, per-host / {other}: per-host's median lower in {lower} of {total} "
                  f"comparisons, its paired geometric mean in {paired}; "
                  f"runs {', '.join(f'{n} {x:.2f}' for n, x in zip(names, per_run))}; {g:.2f} "
                  f"(95 % {lo:.2f}-{hi:.2f}, n = {len(per_run)} runs; {verdict(lo, hi)})")
    print()


def binding_cap():
    rel = os.path.join("mixed-binding-cap-held", "mixed.json")
    if not os.path.exists(os.path.join(DIR, rel)):
        return
    d = load(rel)
    print(f"## Default guests beside a binding cap ({rel}, {where(d)})\n")
    for mode, acts in d["modes"].items():
        for a in acts:
            w = [x[0] for x in a["windows_after"]]
            bad = [x for x in w if x > 1.10]
            rng = f" ({min(bad):.2f}-{max(bad):.2f})" if bad else ""
            print(f"* {mode}, {a['action']}: {len(bad)} of {len(w)} windows above 1.10{rng}, "
                  f"median {med(w):.3f}, max {max(w):.2f} ({d['reps']} repetitions: no interval)")
    print()


def mannwhitney_p(a, b):
    """Two-sided, normal approximation with continuity and tie correction."""
    both = sorted(a + b)
    ranks = {v: (both.index(v) + len(both) - both[::-1].index(v) + 1) / 2 for v in both}
    n1, n2 = len(a), len(b)
    u = sum(ranks[v] for v in a) - n1 * (n1 + 1) / 2
    ties = sum(both.count(v) ** 3 - both.count(v) for v in set(both))
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * (n + 1 - ties / (n * (n - 1))))
    return math.erfc((abs(u - n1 * n2 / 2) - 0.5) / sigma / math.sqrt(2))


def start_cost():
    d = load("control.json")
    print(f"## Start of a domain, per-host / stock (control.json, {where(d)})\n")
    for n in ("1", "10"):
        rng = random.Random(SEED)
        a = d["raw"]["stock|" + n]["start"]
        b = d["raw"]["patched per-host|" + n]["start"]
        boot = sorted(med(rng.choices(b, k=len(b))) / med(rng.choices(a, k=len(a)))
                      for _ in range(RESAMPLES))
        lo, hi = boot[int(0.025 * RESAMPLES)], boot[int(0.975 * RESAMPLES) - 1]
        r = med(b) / med(a)
        print(f"* {n} running domain(s): {1000 * med(a):.1f} -> {1000 * med(b):.1f} ms, "
              f"{r - 1:+.1%} (95 % {lo - 1:+.1%} to {hi - 1:+.1%}; Mann-Whitney p = "
              f"{mannwhitney_p(a, b):.3f}; n = {len(a)} + {len(b)})")
    print()


def main():
    print(f"# Claims recomputed from {os.path.relpath(DIR, ROOT)}\n")
    shares()
    idle_steal()
    binding_cap()
    start_cost()


if __name__ == "__main__":
    main()
