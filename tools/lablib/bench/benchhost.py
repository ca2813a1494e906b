# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench host: the three layouts on the machine it runs on.

What an operator runs on one of their own hosts before rolling the
per-host vCPU cgroup out: synthetic domains (tools/bench/vcpu-spin.c) in
the layouts of hostlayout.py (per-domain, per-domain-scaled, per-host) on
the host's cgroup v1 or v2 hierarchy, in a subtree of the benchmark's own
that is removed afterwards.  No libvirt, no QEMU: the domains are threads
that compute (duty 100) or compute part of each period, placed and
weighed as the libvirt series places and weighs vCPU threads.

The mixes scale with the host's CPU count N (mixes()): the project's
shapes, many small domains, and default domains beside domains whose
vCPUs have a binding cap (vcpu_quota), which is what operators do to
noisy tenants.  Every run measures each layout once, one window each, in
an order that balances positions over the runs (benchstats); the figures
of a window come from /proc/PID/task/TID/schedstat and /proc/stat:

  delivered   CPUs the vCPU threads got (sum of their shares)
  wait        CPUs' worth of time they were runnable and waiting (steal)
  host_idle   the share of the host's CPU time that was idle
  maxmin      busy default vCPUs' largest share over their smallest
  capped      the mean share of a capped vCPU (its cap is the bound)

and with --trace the exact idle steal, from a scheduler trace that must
validate against schedstat (benchscale.add_idle_steal), refused with
its reasons otherwise.  Each comparison of two layouts is the paired
per-run ratio with its 95 % bootstrap interval (benchstats.compare).
"""

import contextlib
import math
import os
import signal
import statistics
import time

from ..common import LabError, build_dir, require_root, step
from . import benchstats, hostlayout
from .benchkit import check_args, median, publish
from .benchscale import TRACE_BUFFER_KB
from .benchsched import Domain, build_spinner, cpu_times, machine_info
from ..lab import measure

LAYOUTS = hostlayout.LAYOUTS
MIN_CPUS = 4
CAP_PCT = 20
# --quick: 2-1-1 rather than seed-4-2-2 (exactly committed from 4 CPUs
# on) overcommits any host 2x, so that stock gives a 2-vCPU domain's vCPUs
# half (what the gate checks); capped, for the capped domains' placement
QUICK = {"runs": 3, "seconds": 2, "settle": 1, "mixes": ["2-1-1", "capped"]}
FIELDS = ("delivered", "wait", "host_idle", "maxmin", "capped", "est_idle_steal",
          "idle_steal")
# The comparisons reported, (a, b): b against a
COMPARISONS = (("per-domain", "per-host"), ("per-domain-scaled", "per-host"),
               ("per-domain", "per-domain-scaled"))
# field -> how two layouts' figures compare (benchstats.compare): host idle
# and idle steal are often 0 (a layout that removes idle steal must not
# drop out of a ratio) and compare as differences
COMPARED = {"delivered": "ratio", "wait": "ratio", "host_idle": "difference",
            "maxmin": "ratio", "idle_steal": "difference"}

# A domain: (name, vCPUs, duty %, period ms, cap % per vCPU or None).


def mixes(ncpus):
    """{mix: (description, [domain])} for a host of ncpus CPUs."""
    n = max(ncpus, 2)
    half, quarter = max(2, n // 2), max(1, n // 4)
    copies = max(1, n // 8)
    over = []
    sizes = (2, 1, 1, 4)
    total, i = 0, 0
    while total < math.ceil(1.5 * n):
        v = min(sizes[i % len(sizes)], math.ceil(1.5 * n) - total)
        over.append((f"busy{v}-{i}", v, 100, 100, None))
        total += v
        i += 1
    seed_like = []
    for c in range(copies):
        seed_like += [(f"cpu1-{c}", 1, 100, 100, None), (f"sync1-{c}", 1, 30, 2, None),
                      (f"busy2-{c}", 2, 100, 100, None), (f"idle4-{c}", 4, 5, 100, None),
                      (f"mixed6-{c}", 6, 50, 8, None)]
    k = -(-n // 2)
    return {
        "2-1-1": (f"{k} of each: busy domains of 2, 1 and 1 vCPUs ({4 * k} vCPUs, about 2 "
                  "per CPU; the README's example)",
                  [(f"{name}-{c}", v, 100, 100, None) for c in range(k)
                   for name, v in (("big", 2), ("small1", 1), ("small2", 1))]),
        "seed-4-2-2": (f"the seed talk's shape: busy domains of {half}, {quarter} and "
                       f"{quarter} vCPUs ({half + 2 * quarter} on {n} CPUs)", [("big", half, 100, 100, None),
                                             ("mid1", quarter, 100, 100, None),
                                             ("mid2", quarter, 100, 100, None)]),
        "over": (f"{total} busy vCPUs on {n} CPUs (1.5x) in domains of "
                 f"{', '.join(str(d[1]) for d in over)} vCPUs", over),
        "many-small": (f"{2 * n} 1-vCPU domains: {n} busy, {n} at 30 % of 2 ms",
                       [(f"busy-{i}", 1, 100, 100, None) for i in range(n)]
                       + [(f"sync-{i}", 1, 30, 2, None) for i in range(n)]),
        "capped": (f"{2 * n} busy 1-vCPU default domains beside {max(1, n // 2)} busy "
                   f"2-vCPU domain{'s' if n >= 4 else ''} capped at {CAP_PCT} % per vCPU (vcpu_quota)",
                   [(f"default-{i}", 1, 100, 100, None) for i in range(2 * n)]
                   + [(f"capped-{i}", 2, 100, 100, CAP_PCT) for i in range(max(1, n // 2))]),
        "seed-like": (f"the seed talk's measured host, 8 CPUs' worth ({copies} "
                      f"{'copy' if copies == 1 else 'copies'} for {n} CPUs): domains of 1 "
                      "(CPU-bound), 1 (30 % of 2 ms), 2 (busy), 4 (5 % of 100 ms) and "
                      "6 vCPUs (50 % of 8 ms)", seed_like),
    }


def qemu_processes():
    """PIDs of running QEMU processes (qemu-system-*, qemu-kvm)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if comm.startswith("qemu-system") or comm.startswith("qemu-kvm"):
            pids.append(int(pid))
    return sorted(pids)


def check_host(ncpus, few_cpus=False, beside_vms=False):
    """Refuses a host the comparison would mean nothing on."""
    if ncpus < MIN_CPUS and not few_cpus:
        raise LabError(f"bench host: this host has {ncpus} CPUs; the layouts differ in how "
                       f"the scheduler spreads groups over CPUs, which needs {MIN_CPUS} or "
                       "more to show (--few-cpus runs it anyway)")
    vms = qemu_processes()
    if vms and not beside_vms:
        raise LabError(f"bench host: {len(vms)} QEMU processes run on this host "
                       f"(PIDs {', '.join(map(str, vms[:8]))}): they compete with the "
                       "synthetic domains and change the comparison; stop them, or give "
                       "--beside-vms to measure beside them (the results record it)")
    return vms


def window(domains, seconds, rec=None):
    """One window: each vCPU thread's schedstat share and steal and its
    cgroup (read from /proc at the start), the host's idle share over the
    sample; with a schedtrace.Recorder also the trace's lines (None if the
    buffer overflowed: the window is then refused for idle steal, its
    schedstat figures kept) and what benchscale.add_idle_steal needs."""
    threads = {f"{d.name}/{i}": (d.proc.pid, tid)
               for d in domains for i, tid in enumerate(d.tids)}
    cgroups = {k: measure.cpu_cgroup(*v) for k, v in threads.items()}
    affinity = {tid: sorted(os.sched_getaffinity(tid)) for _, tid in threads.values()}
    i0, t0 = cpu_times()
    if rec is not None:
        rec.start()
    s0 = time.monotonic()
    res = measure.sample(threads, seconds)
    sampled = time.monotonic() - s0
    i1, t1 = cpu_times()
    win = {"threads": {k: {"share": s, "steal": w, "tid": threads[k][1], "cgroup": cgroups[k]}
                       for k, (s, w) in res.items()},
           "host_idle": (i1 - i0) / (t1 - t0) if t1 > t0 else 0.0}
    lines = None
    if rec is not None:
        win.update(affinity=affinity, sample_s=sampled)
        try:
            lines = rec.stop()
        except LabError as e:       # lost events: no replay for this window
            win["refused"] = [str(e)]
    return win, lines


def finish_window(win, lines, ncpus):
    """The trace's figures of a traced window (benchscale.add_idle_steal),
    or only its bookkeeping removed for one that overflowed."""
    from .benchscale import add_idle_steal, cpu_nodes
    if lines is not None:
        add_idle_steal(win, lines, ncpus, cpu_nodes())
    else:
        win.pop("affinity", None)
        win.pop("sample_s", None)


def summarise(domains, win):
    """The figures of a window (FIELDS)."""
    t = win["threads"]
    busy = [t[f"{d.name}/{i}"]["share"] for d in domains if d.duty >= 100 and not d.cap
            for i in range(d.vcpus)]
    capped = [t[f"{d.name}/{i}"]["share"] for d in domains if d.cap for i in range(d.vcpus)]
    wait = sum(v["steal"] for v in t.values())
    refused = win.get("refused")
    traced = "trace_idle" in win and not refused
    return {
        "delivered": sum(v["share"] for v in t.values()),
        "wait": wait,
        "host_idle": win["host_idle"],
        "maxmin": max(busy) / min(busy) if len(busy) > 1 and min(busy) > 0 else None,
        "capped": statistics.mean(capped) if capped else None,
        "est_idle_steal": wait * win["host_idle"],
        "idle_steal": sum(v["idle_steal"] for v in t.values()) if traced else None,
        **({"refused": refused} if refused else {}),
    }


def statistics_of(runs):
    """The comparisons of a mix's runs ([{layout: figures}])."""
    return [benchstats.compare(runs, a, b, f, kind) for a, b in COMPARISONS
            for f, kind in COMPARED.items() if any(r[a].get(f) is not None for r in runs)]


def run_mix(layout, mix, desc, spec, runs, seconds, settle, trace=False):
    """Every layout once per run, in balanced order; the mix's results."""
    ncpus = os.cpu_count()
    orders = benchstats.balanced_orders(LAYOUTS, runs)
    windows = []
    with contextlib.ExitStack() as cleanup:
        # Undone in reverse: the recorder, every domain, then the groups
        cleanup.callback(layout.teardown)
        domains = []
        for name, vcpus, duty, period, cap in spec:
            d = Domain(name, vcpus, duty, period_ms=period)
            d.cap = cap
            cleanup.callback(d.stop)
            domains.append(d)
        layout.setup(domains)
        rec = None
        if trace:
            from . import schedtrace
            rec = cleanup.enter_context(schedtrace.Recorder(buffer_kb=TRACE_BUFFER_KB))
        for r, order in enumerate(orders):
            for pos, lay in enumerate(order):
                layout.place(domains, lay)
                time.sleep(settle)
                win, lines = window(domains, seconds, rec)
                windows.append((r, lay, win, lines))
                if win.get("refused"):
                    step(f"bench host: {mix}: run {r + 1}, {lay}: no idle steal for this "
                         f"window: {win['refused'][0]}")
                s = summarise(domains, win)
                step(f"bench host: {mix}: run {r + 1}/{runs}, window {pos + 1}/3, {lay}: "
                     f"delivered {s['delivered']:.2f} of {ncpus} CPUs, host idle "
                     f"{s['host_idle'] * 100:.1f} %, busy max/min "
                     + ("n/a" if s["maxmin"] is None else f"{s['maxmin']:.2f}"))
    out = {"mix": mix, "description": desc, "orders": [list(o) for o in orders],
           "balanced": benchstats.is_balanced(orders),
           "follows_balanced": benchstats.follows_balanced(orders),
           "domains": [{"name": n, "vcpus": v, "duty": du, "period_ms": p, "cap_pct": c}
                       for n, v, du, p, c in spec],
           "runs": [dict() for _ in range(runs)]}
    for r, lay, win, lines in windows:
        if trace:
            finish_window(win, lines, ncpus)
        out["runs"][r][lay] = {**summarise(domains, win), "threads": win["threads"]}
    figures = [{lay: {f: run[lay][f] for f in FIELDS} for lay in LAYOUTS} for run in out["runs"]]
    out["median"] = {lay: {f: median(fig[lay][f] for fig in figures) for f in FIELDS}
                     for lay in LAYOUTS}
    out["comparisons"] = statistics_of(figures)
    return out


def _fmt(x, spec=".2f", scale=1.0):
    return "n/a" if x is None else format(x * scale, spec)


def markdown(results):
    lines = [f"bench host on {results['machine']['cpus']} CPUs "
             f"({results['machine']['cpu_model']}, kernel {results['machine']['kernel']}, "
             f"cgroup {results['cgroup']}), {results['runs']} runs of {results['seconds']} s "
             f"windows per layout; command: `{results['command']}`", ""]
    for mix in results["mixes"]:
        lines += [f"**{mix['mix']}**: {mix['description']}"
                  + ("" if mix["balanced"] else " (order not balanced)"), "",
                  "| layout | delivered (CPUs) | wait (CPUs) | host idle | busy max/min "
                  "| capped vCPU | idle steal (trace) |",
                  "|---|---|---|---|---|---|---|"]
        for lay in LAYOUTS:
            m = mix["median"][lay]
            lines.append(f"| {lay} | {_fmt(m['delivered'])} | {_fmt(m['wait'])} "
                         f"| {_fmt(m['host_idle'], '.1f', 100)} % | {_fmt(m['maxmin'])} "
                         f"| {_fmt(m['capped'])} | {_fmt(m['idle_steal'], '.3f')} |")
        refused = [(r + 1, lay, run[lay]["refused"]) for r, run in enumerate(mix["runs"])
                   for lay in LAYOUTS if run[lay].get("refused")]
        if refused:
            lines += ["", f"Idle steal refused in {len(refused)} "
                      f"window{'' if len(refused) == 1 else 's'} (the trace cannot be "
                      f"trusted), e.g. run {refused[0][0]}, {refused[0][1]}: "
                      + "; ".join(refused[0][2][:2])]
        lines += ["", "Paired per-run comparisons (ratios: geometric mean; host idle: mean "
                  "difference; 95 % bootstrap interval):", ""]
        lines += [f"- {describe(c)}" for c in mix["comparisons"]]
        lines.append("")
    return "\n".join(lines)


def describe(c):
    """A comparison in the Markdown: host idle in percentage points."""
    if c["field"] == "host_idle":
        return benchstats.describe(c, scale=100, unit=" points", digits=1)
    if c["kind"] == "difference":
        return benchstats.describe(c, unit=" vCPUs", digits=3)
    return benchstats.describe(c)


def plot(results, outdir):
    from . import plots
    plots.host(results, os.path.join(outdir, "host.png"), LAYOUTS)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _stopped(signum, frame):
    # Once: a second signal must not cut the cleanup short
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise LabError(f"bench host: stopped by signal {signum}; its groups, processes and "
                   "trace instance are removed")


def run_bench(mixes_wanted=None, runs=6, seconds=10, settle=2, outdir=None, command=None,
              quick=False, few_cpus=False, beside_vms=False, trace=False):
    require_root("bench host")
    # An operator stopping a long run (kill, systemd, timeout, a dropped
    # ssh session) gets the host back as it was: the cleanup runs
    before = {sig: signal.signal(sig, _stopped) for sig in STOP_SIGNALS}
    try:
        return _run(mixes_wanted, runs, seconds, settle, outdir, command, quick, few_cpus,
                    beside_vms, trace)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _run(mixes_wanted, runs, seconds, settle, outdir, command, quick, few_cpus, beside_vms,
         trace):
    ncpus = os.cpu_count()
    if quick:
        runs, seconds, settle = QUICK["runs"], QUICK["seconds"], QUICK["settle"]
        mixes_wanted = mixes_wanted or QUICK["mixes"]
    known = mixes(ncpus)
    if runs < 1 or seconds < 1:
        raise LabError("--runs and --seconds must be at least 1")
    mixes_wanted = check_args(mixes_wanted, known, runs, seconds)
    if runs % len(LAYOUTS):
        raise LabError(f"--runs {runs}: give a multiple of {len(LAYOUTS)}, so that each "
                       "layout is measured equally often in each position")
    vms = check_host(ncpus, few_cpus=few_cpus or quick, beside_vms=beside_vms)
    version, mount = hostlayout.find()
    if trace:
        from . import schedtrace
        if not schedtrace.available():
            raise LabError("bench host --trace needs tracefs (CONFIG_FTRACE)")
    build_spinner()
    outdir = outdir or os.path.join(build_dir(), "bench", "host-quick" if quick else "host")
    total = int(len(mixes_wanted) * runs * len(LAYOUTS) * (seconds + settle))
    step(f"bench host: cgroup {version}, {ncpus} CPUs, {len(mixes_wanted)} mixes x {runs} "
         f"runs x 3 layouts x ({settle}+{seconds}) s = about {total // 60} min {total % 60} s")
    results = {"command": command, "machine": machine_info(), "cgroup": version,
               "top_weight": hostlayout.TOP_WEIGHT[version], "runs": runs,
               "seconds": seconds, "settle": settle, "quick": quick, "trace": trace,
               "qemu_pids_beside": vms, "mixes": []}
    for m in mixes_wanted:
        desc, spec = known[m]
        results["mixes"].append(run_mix(hostlayout.Layout(version, mount), m, desc, spec,
                                        runs, seconds, settle, trace))
    return publish("host", results, outdir, markdown, None if quick else plot)
