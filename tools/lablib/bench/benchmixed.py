# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench mixed: what a CPU setting means on a mixed host.

Four 1-vCPU and one 2-vCPU guest ("noisy") whose vCPUs spin, all busy on the
host's CPUs.  For each action an operator takes on noisy (cap it with a
quota that does not bind and one that does, halve or raise its
cpu_shares), noisy's CPU time is measured before and after, in each mode of
vcpu_cgroup, in one run: per-domain is stock libvirt, the reference for
what the setting means; per-host must give the same.  Beside noisy's CPU
time, the spread among the four default guests (the most CPU time any of
them got over the least) shows whether they keep equal shares, in either
mode.

CPU time is the run time of noisy's vCPU threads from schedstat, in host
CPUs (a fraction of the guests' vCPU time times the host's CPUs), the
median of the windows (3 back to back by default, --windows); every
repetition applies the action and the defaults again.  On cgroup v1
actions are applied live (schedinfo --live); on v2, where placement is
chosen at start, noisy is started again with the values in its
definition.
"""

import os
import statistics
import time

from ..common import LabError, build_dir, require_root, step
from . import benchsched
from ..lab import daemon, guest, measure
from .benchkit import prepare_lab, publish
from ..config import VCPU_CGROUP_MODES as MODES

SMALL = ["bm-small1", "bm-small2", "bm-small3", "bm-small4"]
NOISY = "bm-noisy"
WINDOWS = 3
SETTLE = 3


def _is_v2():
    return os.path.exists("/sys/fs/cgroup/cgroup.controllers")


# The actions by the name --action takes, in the order they run
ACTIONS = ["cap", "cap-binds", "shares-half", "shares-double", "shares-4x"]


def actions(default, only=None):
    """(label, schedinfo settings, <cputune>) for each action, or for those
    named in 'only' (names of ACTIONS), in the order of ACTIONS."""
    half, four = default // 2, 4 * default
    table = {
        "cap": ("vcpu_quota=50000 (cap, does not bind)", ["vcpu_quota=50000"],
                {"quota": "50000"}),
        "cap-binds": ("vcpu_quota=20000 (cap, binds)", ["vcpu_quota=20000"],
                      {"quota": "20000"}),
        "shares-half": (f"cpu_shares={half} (half the default)", [f"cpu_shares={half}"],
                        {"shares": str(half)}),
        "shares-double": (f"cpu_shares={2 * default}", [f"cpu_shares={2 * default}"],
                          {"shares": str(2 * default)}),
        "shares-4x": (f"cpu_shares={four}", [f"cpu_shares={four}"], {"shares": str(four)}),
    }
    unknown = sorted(set(only or []) - set(ACTIONS))
    if unknown:
        raise LabError(f"unknown action(s) {', '.join(unknown)}; known: {', '.join(ACTIONS)}")
    return [table[name] for name in ACTIONS if not only or name in only]


def _threads(names):
    out = {}
    for n in names:
        pid = guest.qemu_pid(n)
        for i, tid in guest.vcpu_tids(n).items():
            out[(n, i)] = (pid, tid)
    return out


def _shared(placements, keys):
    """The fraction of the placements in which two of the threads 'keys'
    were on one CPU."""
    if not placements:
        return 0.0
    together = sum(1 for p in placements if len({p[k] for k in keys}) < len(keys))
    return together / len(placements)


def _balancer_view(th, noisy):
    """The load balancer's view of noisy's vCPUs and of the default guests'
    at this moment: {'noisy'|'small': {'load_avg', 'util_avg'}}, medians
    over the threads; None where the kernel does not show it."""
    seen = {k: measure.pelt(*v) for k, v in th.items()}
    if any(v is None for v in seen.values()):
        return None
    out = {}
    for who, keys in (("noisy", [k for k in th if k[0] == noisy]),
                      ("small", [k for k in th if k[0] != noisy])):
        out[who] = {f: statistics.median(seen[k][f] for k in keys)
                    for f in ("load_avg", "util_avg")}
    return out


def _measure(names, noisy, seconds, windows):
    """Over the windows: the medians of noisy's CPU time in host CPUs, of
    the default guests' spread (max / min of their CPU time) and of the
    fraction of the time two of noisy's vCPUs sat on one CPU; each window's
    (spread, that fraction); the balancer's view at the end."""
    th = _threads(names)
    ncpu = os.cpu_count()
    time.sleep(SETTLE)
    mine = [k for k in th if k[0] == noisy]
    got, spread, shared = [], [], []
    for _ in range(windows):
        s, placements = measure.sample_placed(th, seconds)
        total = sum(v[0] for v in s.values())
        got.append(sum(v[0] for k, v in s.items() if k[0] == noisy) / total * ncpu)
        # (shares of a CPU over the window: a guest that got none spreads
        # without bound)
        small = [v[0] for k, v in s.items() if k[0] != noisy]
        spread.append(max(small) / min(small) if min(small) > 0 else float("inf"))
        shared.append(_shared(placements, mine))
    return {"cpus": statistics.median(got), "spread": statistics.median(spread),
            "shared": statistics.median(shared),
            "windows": [list(w) for w in zip(spread, shared)],
            "balancer": _balancer_view(th, noisy)}


def _apply(noisy, settings, cputune, v2):
    if not v2:
        p = daemon.virsh(["schedinfo", noisy, "--live"] +
                         [a for s in settings for a in ("--set", s)], check=False, capture=True)
        if p.returncode != 0:
            raise LabError(f"schedinfo {settings}: {p.stderr.strip()}")
        return noisy
    daemon.virsh(["destroy", noisy], capture=True)
    return guest.create(NOISY, vcpus=2, workload="spin", cputune=cputune)


def _reset(noisy, default, v2):
    return _apply(noisy, [f"cpu_shares={default}", "vcpu_quota=-1"], None, v2)


def _record(row, when, m):
    """Adds one measurement (_measure) to an action's row, 'before' or
    'after' the action."""
    row.setdefault(when, []).append(m["cpus"])
    row.setdefault(f"small_spread_{when}", []).append(m["spread"])
    row.setdefault(f"noisy_shared_{when}", []).append(m["shared"])
    row.setdefault(f"windows_{when}", []).extend(m["windows"])
    if m["balancer"] is not None:
        row.setdefault(f"balancer_{when}", []).append(m["balancer"])


def run_mode(mode, reps, seconds, windows, v2, only=None):
    default = 100 if v2 else 1024
    daemon.stop()
    daemon.start(vcpu_cgroup=mode, quiet=True)
    small = [guest.create(n, vcpus=1, workload="spin") for n in SMALL]
    noisy = guest.create(NOISY, vcpus=2, workload="spin")
    rows = []
    try:
        for label, settings, cputune in actions(default, only):
            row = {"action": label}
            for r in range(reps):
                step(f"bench mixed: {mode}: {label}, repetition {r + 1}/{reps}")
                _record(row, "before", _measure(small + [noisy], noisy, seconds, windows))
                noisy = _apply(noisy, settings, cputune, v2)
                _record(row, "after", _measure(small + [noisy], noisy, seconds, windows))
                noisy = _reset(noisy, default, v2)
            rows.append(row)
    finally:
        daemon.stop()
    return rows


def run_bench(reps=3, seconds=4, windows=WINDOWS, outdir=None, command=None, only=None):
    if reps < 1 or seconds < 1 or windows < 1:
        raise LabError("--reps, --seconds and --windows must be at least 1")
    require_root("bench mixed")
    nactions = len(actions(1, only))
    prepare_lab("mixed")
    v2 = _is_v2()
    outdir = outdir or os.path.join(build_dir(), "bench", "mixed")
    per = 2 * windows * seconds + 2 * SETTLE + 2
    step(f"bench mixed: 2 modes x {nactions} actions x {reps} repetitions x about "
         f"{per} s = about {2 * nactions * reps * per // 60} min")
    results = {"command": command, "machine": benchsched.machine_info(), "seconds": seconds,
               "windows": windows, "reps": reps, "cgroup": "v2" if v2 else "v1",
               "cpus": os.cpu_count(), "modes": {}}
    for mode in MODES:
        results["modes"][mode] = run_mode(mode, reps, seconds, windows, v2, only)
    return publish("mixed", results, outdir, markdown)


def _fmt(xs):
    m = statistics.median(xs)
    return f"{m:.2f} ({min(xs):.2f}-{max(xs):.2f})"


def expected(action, before, default, cpus):
    """What the rule says noisy gets after an action, in host CPUs: a cap
    changes nothing unless it binds, cpu_shares=S gives S / (4 D + S)."""
    name, value = action.split(" ")[0].split("=")
    if name == "vcpu_quota":
        return min(before, 2 * int(value) / 100000)
    return int(value) / (4 * default + int(value)) * cpus


def markdown(results):
    cpus = results["cpus"]
    default = 100 if results["cgroup"] == "v2" else 1024
    lines = [f"Four 1-vCPU and one 2-vCPU spinning guest (noisy) on {cpus} host CPUs, "
             f"cgroup {results['cgroup']}; noisy's CPU time in host CPUs, median of "
             f"{results['windows']} windows of {results['seconds']} s per measurement, then "
             f"the median and range of {results['reps']} repetitions.  Per-domain is stock "
             f"libvirt: noisy weighs as much as each 1-vCPU guest.  Per-host weighs every "
             f"guest per vCPU and a setting as with stock libvirt: a cap changes nothing "
             f"unless it binds, cpu_shares=S gives S / (4 x {default} + S).",
             "",
             "| action on noisy | per-domain (stock): before → after | per-host: before → after "
             "| per-host: the rule says | after / rule |",
             "| --- | --- | --- | --- | --- |"]
    stock = {r["action"]: r for r in results["modes"]["per-domain"]}
    for r in results["modes"]["per-host"]:
        s = stock[r["action"]]
        want = expected(r["action"], statistics.median(r["before"]), default, cpus)
        got = statistics.median(r["after"])
        lines.append(f"| `{r['action']}` | {_fmt(s['before'])} → {_fmt(s['after'])} | "
                     f"{_fmt(r['before'])} → {_fmt(r['after'])} | {want:.2f} | "
                     f"{got / want:.2f} |")
    if all("small_spread_after" in r for m in results["modes"].values() for r in m):
        lines += ["", "The four default guests: the most CPU time any of them got over the "
                  "least (1.00: equal shares), median of the windows, then the median and "
                  "range of the repetitions.", "",
                  "| action on noisy | per-domain (stock): before → after | "
                  "per-host: before → after |", "| --- | --- | --- |"]
        for r in results["modes"]["per-host"]:
            s = stock[r["action"]]
            lines.append(f"| `{r['action']}` | {_fmt(s['small_spread_before'])} → "
                         f"{_fmt(s['small_spread_after'])} | "
                         f"{_fmt(r['small_spread_before'])} → "
                         f"{_fmt(r['small_spread_after'])} |")
    lines += _placement_lines(results)
    lines += ["", f"Reproduce: `{results['command']}`"]
    return "\n".join(lines)


# A window counts as one with noisy's vCPUs together from this fraction on
TOGETHER = 0.25


def _split_windows(windows):
    """The spreads of the windows in which noisy's vCPUs shared a CPU for
    TOGETHER of the window or more, and of the others."""
    together = [sp for sp, sh in windows if sh >= TOGETHER]
    apart = [sp for sp, sh in windows if sh < TOGETHER]
    return together, apart


def _spreads(xs):
    return f"{len(xs)}: {_fmt(xs)}" if xs else "0"


def _placement_lines(results):
    """Where noisy's vCPUs ran and what the load balancer saw of them
    (results of a run that recorded them)."""
    rows = [(mode, r) for mode in MODES for r in results["modes"][mode]]
    if not all("noisy_shared_after" in r for _, r in rows):
        return []
    lines = ["", "Where noisy's two vCPUs ran: the fraction of a window in which both sat on "
             "one CPU (sampled every 0.1 s), median of the windows, then the median and range "
             "of the repetitions; then every window after the action, split by whether they "
             f"sat together for {TOGETHER:.2f} of it or more: how many windows, and the default "
             "guests' spread in them (median and range).", "",
             "| action on noisy | mode | vCPUs on one CPU: before → after | windows after, "
             "together: spread | windows after, apart: spread |",
             "| --- | --- | --- | --- | --- |"]
    for mode, r in rows:
        together, apart = _split_windows(r["windows_after"])
        lines.append(f"| `{r['action']}` | {mode} | {_fmt(r['noisy_shared_before'])} → "
                     f"{_fmt(r['noisy_shared_after'])} | {_spreads(together)} | "
                     f"{_spreads(apart)} |")
    seen = [(mode, r) for mode, r in rows if r.get("balancer_after")]
    if seen:
        lines += ["", "What the load balancer saw at the end of each window after the action "
                  "(se.avg.load_avg and se.avg.util_avg of /proc/PID/task/TID/sched, 0-1024; "
                  "medians over the threads, then over the repetitions):", "",
                  "| action on noisy | mode | noisy's vCPUs: load, util | the default "
                  "guests' vCPUs: load, util |", "| --- | --- | --- | --- |"]
        for mode, r in seen:
            view = {who: {f: statistics.median(b[who][f] for b in r["balancer_after"])
                          for f in ("load_avg", "util_avg")} for who in ("noisy", "small")}
            lines.append(f"| `{r['action']}` | {mode} | {view['noisy']['load_avg']:.0f}, "
                         f"{view['noisy']['util_avg']:.0f} | {view['small']['load_avg']:.0f}, "
                         f"{view['small']['util_avg']:.0f} |")
    return lines
