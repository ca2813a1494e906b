# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench scale, the part that runs inside the many-CPU test host.

tools/lablib/testing/scalehost.py boots the test host with N CPUs in two
NUMA nodes and starts this with 'tools/lab bench scale --in-guest'.  Here
the synthetic domains of bench sched (tools/bench/vcpu-spin.c, one
process per domain, one thread per vCPU; benchsched.Domain) are placed in
the cpu cgroup v1 hierarchy in three layouts (benchsched.Layout):

  per-domain         stock libvirt: a group per domain, each weighing 1024
  per-domain-scaled  the same groups weighing 1024 per vCPU (what OpenStack
                     Nova did with cpu_shares; no patch needed)
  per-host           vcpu_cgroup = "per-host": every vCPU in one group

The same threads go through all three in every repetition, so the
layouts are measured side by side, in an order that balances: with a
number of repetitions that is a multiple of 3, each layout is measured
first, second and third equally often, and with a multiple of 6 each
follows each other equally often (benchstats.balanced_orders).  In each window
the scheduler's sched_switch, sched_wakeup and sched_migrate_task
tracepoints are recorded (schedtrace.Recorder); after a mix, with its
domains stopped, the traces are replayed (idlesteal.replay) into the exact
idle steal of every vCPU thread: the time it was runnable and waiting
while a CPU it may run on was idle, split into own, near and far by where
that CPU was (idlesteal.py).  Share and steal come from /proc/PID/task/TID/schedstat.

A window whose trace cannot be trusted is refused (idlesteal.check_window:
a CPU whose switches into and out of idle do not add up, a lost switch,
or a thread whose run or wait time by the trace is more than
SCHEDSTAT_TOLERANCE of the window from its schedstat): its result has the
reasons under 'refused' and None for every figure of the trace, which the
medians and ranges leave out, and the guest prints them on a line of its
own ('unsteal-bench: refused ...').

The records (the topology, and a result per mix, tuning and NUMA
balancing setting) go to RECORDS in the directory given with --out,
rewritten whole after each result; the test host's runner writes that
file onto a disk of its own, which the host reads after the boot
(scalehost.read_records).  The console gets progress lines only.

A mix can also run under a host tuning (TUNINGS), the remedies an operator
has without changing the scheduler: pinning each domain to a NUMA node
(libvirt's <numatune> with the vCPUs placed on its node), pinning each
vCPU to a CPU of that node (<vcpupin>), or idle=poll on the host's kernel
command line (no idle-exit latency: an idle CPU polls for work).  Pinning
is each thread's affinity, which the idle steal honours (a CPU the thread
may not run on is not one it could have had).
"""

import json
import os
import statistics
import time

from ..common import LabError, require_root
from . import benchstats, idlesteal, schedtrace
from .benchkit import check_args, median
from .benchsched import Domain, Layout, build_spinner, cpu_mount, cpu_times, summarise
from ..lab import measure

LAYOUTS = ("per-domain", "per-domain-scaled", "per-host")
PREFIX = "unsteal-bench: "
RECORDS = "bench.json"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
# name -> what the tuning is; "idle-poll" is on the kernel command line of
# the boot (scalehost.py boots it so), the others are applied here.
TUNINGS = {
    "none": "no tuning: the scheduler places the threads on any CPU",
    "pin-nodes": "each domain's vCPU threads pinned to one NUMA node (largest domain first, "
                 "to the node with the fewest vCPUs so far)",
    "pin-cpus": "the same nodes, and each vCPU thread pinned to one CPU of its node "
                "(in turn; CPUs are shared only when a node has more vCPUs than CPUs)",
    "idle-poll": "idle=poll on the kernel command line: an idle CPU polls for work "
                 "instead of halting",
}
BOOT_TUNINGS = {"idle-poll": "idle=poll"}
TRACE_BUFFER_KB = 4096     # per CPU
SETTLE = 2                 # seconds after a change of layout before a window
# How far, as a share of the window, a thread's run and wait time by the
# trace may be from its schedstat before the window is refused; on top of
# it, the part of the trace's span that the schedstat sample did not cover
SCHEDSTAT_TOLERANCE = 0.02
# A thread's figures from the trace, None in a refused window
TRACE_FIGURES = ("idle_steal", "idle_steal_own", "idle_steal_near", "idle_steal_far",
                 "trace_wait")

# A domain: (name, vCPUs, duty %, period ms, MiB each vCPU writes through).
# Duty 100 is a busy vCPU; below 100 a vCPU runs duty % of each period and
# sleeps the rest (2-8 ms periods: a guest doing synchronous I/O or waking
# on short timers; 100 ms: a mostly idle guest).
# name -> (CPUs of the host, description, [domain]).
MIXES = {
    "seed-4-2-2": (8, "the seed talk's conceptual host: busy domains of 4, 2 and 2 vCPUs "
                      "on 8 CPUs (exactly committed)",
                   [("big", 4, 100, 100, 0), ("mid1", 2, 100, 100, 0),
                    ("mid2", 2, 100, 100, 0)]),
    "seed-like": (8, "the seed talk's measured host, scaled to 8 CPUs: domains of 1 (CPU-bound), "
                     "1 (sync: 30 % of 2 ms), 2 (memory-bound, 64 MiB each), 4 (idle: 5 % of "
                     "100 ms) and 6 vCPUs (50 % of 8 ms): 14 vCPUs, 6.5 CPUs of demand",
                  [("cpu1", 1, 100, 100, 0), ("sync1", 1, 30, 2, 0), ("vm2", 2, 100, 100, 64),
                   ("idle4", 4, 5, 100, 0), ("mixed6", 6, 50, 8, 0)]),
    "exact-16": (16, "16 vCPUs on 16 CPUs: domains of 8 (50 % of 8 ms), 4 and 2 (busy) and "
                     "2 vCPUs (20 % of 100 ms): 10.4 CPUs of demand",
                 [("mixed8", 8, 50, 8, 0), ("busy4", 4, 100, 100, 0), ("busy2", 2, 100, 100, 0),
                  ("light2", 2, 20, 100, 0)]),
    "over-16": (16, "24 vCPUs on 16 CPUs (1.5x): domains of 8 (50 % of 8 ms), 6 and 4 (busy, "
                    "the 4 memory-bound, 32 MiB each), 2 (sync: 30 % of 2 ms), 2 and 1 (busy) "
                    "and 1 vCPU (idle: 5 % of 100 ms): 17.7 CPUs of demand",
                [("mixed8", 8, 50, 8, 0), ("busy6", 6, 100, 100, 0), ("vm4", 4, 100, 100, 32),
                 ("sync2", 2, 30, 2, 0), ("busy2", 2, 100, 100, 0), ("busy1", 1, 100, 100, 0),
                 ("idle1", 1, 5, 100, 0)]),
    # tools/lab test's smoke run: 4 CPUs, seconds.
    "smoke": (4, "the smoke run of tools/lab test: a busy 2-vCPU domain and a 1-vCPU domain "
                 "at 50 % of 4 ms on 4 CPUs",
              [("busy2", 2, 100, 100, 0), ("sync1", 1, 50, 4, 0)]),
}


def emit(kind, payload):
    print(PREFIX + kind + " " + (payload if isinstance(payload, str)
                                 else json.dumps(payload, separators=(",", ":"))), flush=True)


def set_numa_balancing(value):
    """Sets kernel.numa_balancing (0 or 1); the value it had."""
    try:
        with open(NUMA_BALANCING) as fh:
            old = int(fh.read().split()[0])
        with open(NUMA_BALANCING, "w") as fh:
            fh.write(str(value))
    except OSError as e:
        raise LabError(f"cannot set {NUMA_BALANCING} to {value} (CONFIG_NUMA_BALANCING?): {e}")
    return old


def pin_plan(spec, nodes, tuning):
    """{domain: [the CPUs each vCPU thread may use]} for a pinning tuning
    (None for the others).  spec: MIXES' domains; nodes: {node: sorted
    CPUs}.  Domains go, largest first, to the node holding the fewest
    vCPUs so far (the lower node on a tie); pin-cpus then gives the vCPUs
    of a node its CPUs in turn."""
    if tuning not in ("pin-nodes", "pin-cpus"):
        return None
    if not nodes:
        raise LabError(f"{tuning}: the host shows no NUMA nodes")
    load = {n: 0 for n in nodes}
    plan = {}
    for name, vcpus, *_ in sorted(spec, key=lambda d: -d[1]):
        node = min(load, key=lambda n: (load[n], n))
        cpus = nodes[node]
        if tuning == "pin-nodes":
            plan[name] = [list(cpus)] * vcpus
        else:
            plan[name] = [[cpus[(load[node] + i) % len(cpus)]] for i in range(vcpus)]
        load[node] += vcpus
    return plan


def apply_tuning(domains, spec, tuning):
    """Pins the domains' threads as the tuning says; the plan (or None)."""
    if tuning in BOOT_TUNINGS:
        with open("/proc/cmdline") as fh:
            if BOOT_TUNINGS[tuning] not in fh.read().split():
                raise LabError(f"tuning {tuning} needs {BOOT_TUNINGS[tuning]} on the kernel "
                               "command line (tools/lab bench scale boots it so)")
        return None
    plan = pin_plan(spec, node_cpus(), tuning)
    for d in domains if plan else []:
        for tid, cpus in zip(d.tids, plan[d.name]):
            os.sched_setaffinity(tid, cpus)
    return plan


def record_window(domains, rec, seconds):
    """One window: schedstat share and steal per vCPU thread, host idle
    fraction, each thread's affinity, the seconds schedstat was sampled
    over (within the trace's), and the trace's lines."""
    threads = {f"{d.name}/{i}": (d.proc.pid, tid) for d in domains for i, tid in enumerate(d.tids)}
    affinity = {tid: sorted(os.sched_getaffinity(tid)) for _, tid in threads.values()}
    i0, t0 = cpu_times()
    rec.start()
    s0 = time.monotonic()
    res = measure.sample(threads, seconds)
    sampled = time.monotonic() - s0
    lines = rec.stop()
    i1, t1 = cpu_times()
    idle = (i1 - i0) / (t1 - t0) if t1 > t0 else 0.0
    per_thread = {k: {"share": s, "steal": w, "tid": threads[k][1]} for k, (s, w) in res.items()}
    return {"threads": per_thread, "host_idle": idle, "affinity": affinity,
            "sample_s": sampled}, lines


def add_idle_steal(win, lines, ncpus, nodes=None):
    """The exact idle steal of every thread of a window, from its trace;
    nodes: {cpu: node}, to split it into own, near and far (idlesteal.py).

    Returns why the trace cannot be trusted (idlesteal.check_window), []
    if it can.  A refused window gets the reasons as win['refused'] and
    None for the trace's figures (TRACE_FIGURES of each thread, the
    window's trace_idle).  The threads' schedstat share and steal are
    compared with the replay when the window says over how many seconds
    they were sampled (sample_s, from record_window): those seconds lie
    within the trace's span, so scaled to the span they may differ from
    the replay by the rest of the span as well.  Without sample_s only the
    trace itself is checked."""
    affinity = {int(t): set(c) for t, c in win.pop("affinity").items()}
    sampled = win.pop("sample_s", None)
    events = idlesteal.parse(lines)
    span, totals, idle = idlesteal.replay(events, affinity, range(ncpus), nodes)
    win["trace_s"] = span
    schedstat, tolerance = None, SCHEDSTAT_TOLERANCE
    if sampled and span > 0:
        schedstat = {v["tid"]: (v["share"] * span, v["steal"] * span)
                     for v in win["threads"].values()}
        tolerance += abs(span - sampled) / span
    # An empty window (span 0) is refused too
    refused = idlesteal.check_window(events, span, totals, range(ncpus), schedstat, tolerance)
    for v in win["threads"].values():
        t = totals[v["tid"]]
        for key, secs in zip(TRACE_FIGURES, (t.idle_wait, t.idle_wait_own, t.idle_wait_near,
                                             t.idle_wait_far, t.wait)):
            v[key] = None if refused else secs / span
        v["est_idle_steal"] = v["steal"] * win["host_idle"]
    win["trace_idle"] = None if refused else sum(idle.values()) / (span * ncpus)
    if refused:
        win["refused"] = refused
    return refused


def per_domain_shares(domains, threads):
    """Mean CPU share per vCPU of each domain."""
    return {d.name: statistics.mean(threads[f"{d.name}/{i}"]["share"] for i in range(d.vcpus))
            for d in domains}


def window_summary(domains, win):
    """A window's figures; a refused one (add_idle_steal) has None for the
    trace's and its reasons under 'refused'."""
    t = win["threads"]
    refused = win.get("refused")
    if refused:     # summarise adds up idle_steal too; replaced by None below
        t = {k: {**v, "idle_steal": 0.0} for k, v in t.items()}
    out = {**summarise(domains, t),
           **{k: None if refused and k != "est_idle_steal" else sum(v[k] for v in t.values())
              for k in ("est_idle_steal", "idle_steal_own", "idle_steal_near",
                        "idle_steal_far")},
           "host_idle": win["host_idle"], "trace_idle": win["trace_idle"],
           "per_vcpu": per_domain_shares(domains, t)}
    if refused:
        out["idle_steal"] = None
        out["refused"] = refused
    return out


FIELDS = ("ratio", "jain", "steal", "idle_steal", "idle_steal_own", "idle_steal_near",
          "idle_steal_far", "est_idle_steal", "util", "host_idle", "trace_idle")


def run_mix(mount, mix, balancing, reps, seconds, settle, tuning="none"):
    """One mix with NUMA balancing on (1) or off (0) under a tuning: every
    layout, reps times."""
    ncpus = os.cpu_count()
    want, desc, spec = MIXES[mix]
    if ncpus < want:
        raise LabError(f"mix {mix} is for {want} CPUs; this host has {ncpus}")
    # Balanced (benchstats) when reps is a multiple of 3; the smoke run's
    # single repetition is the design's first row
    orders = benchstats.orders(LAYOUTS, reps)
    old = set_numa_balancing(balancing)
    domains, windows = [], []
    layout = Layout(mount)
    try:
        for name, vcpus, duty, period, mem in spec:
            domains.append(Domain(name, vcpus, duty, period_ms=period, mem_mb=mem))
        plan = apply_tuning(domains, spec, tuning)
        layout.setup(domains)
        with schedtrace.Recorder(buffer_kb=TRACE_BUFFER_KB) as rec:
            for r, order in enumerate(orders):
                for lay in order:
                    layout.place(domains, lay)
                    time.sleep(settle)
                    win, lines = record_window(domains, rec, seconds)
                    windows.append((r, lay, win, lines))
                emit("progress", f"{mix}, NUMA balancing {'on' if balancing else 'off'}, "
                                 f"tuning {tuning}: repetition {r + 1}/{reps} measured")
    finally:
        try:
            try:
                for d in domains:
                    d.stop()
            finally:
                layout.teardown()
        finally:
            set_numa_balancing(old)
    out = {"mix": mix, "cpus": ncpus, "numa_balancing": bool(balancing), "tuning": tuning,
           "pinning": plan, "description": desc, "orders": [list(o) for o in orders],
           "balanced": benchstats.is_balanced(orders),
           "domains": [{"name": n, "vcpus": v, "duty": d, "period_ms": p, "mem_mb": m}
                       for n, v, d, p, m in spec],
           "reps": [dict() for _ in range(reps)]}
    nodes = cpu_nodes()
    for r, lay, win, lines in windows:
        refused = add_idle_steal(win, lines, ncpus, nodes)
        if refused:
            emit("refused", f"{mix}, NUMA balancing {'on' if balancing else 'off'}, tuning "
                            f"{tuning}, repetition {r + 1}, {lay}: the trace cannot be trusted, "
                            "no idle steal for this window: " + "; ".join(refused[:5])
                            + (f"; and {len(refused) - 5} more" if len(refused) > 5 else ""))
        out["reps"][r][lay] = {**window_summary(domains, win), "trace_s": win["trace_s"],
                               "threads": win["threads"]}
    out["median"], out["range"] = {}, {}
    for lay in LAYOUTS:
        rs = [rep[lay] for rep in out["reps"]]
        out["median"][lay] = {f: median(x[f] for x in rs) for f in FIELDS}
        out["median"][lay]["per_vcpu"] = {d.name: statistics.median(x["per_vcpu"][d.name]
                                                                    for x in rs)
                                          for d in domains}
        out["range"][lay] = {f: [min(x[f] for x in rs if x[f] is not None),
                                 max(x[f] for x in rs if x[f] is not None)]
                             for f in FIELDS if any(x[f] is not None for x in rs)}
    return out


NODE_DIR = "/sys/devices/system/node"


def node_cpulists():
    """{'nodeN': its cpulist ('0-3,8')}, as the host sees them."""
    nodes = {}
    for n in sorted(os.listdir(NODE_DIR)) if os.path.isdir(NODE_DIR) else []:
        if n.startswith("node") and n[4:].isdigit():
            with open(os.path.join(NODE_DIR, n, "cpulist")) as fh:
                nodes[n] = fh.read().strip()
    return nodes


def parse_cpulist(text):
    """'0-3,8' -> {0, 1, 2, 3, 8}."""
    cpus = set()
    for part in text.split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def node_cpus():
    """{NUMA node: its CPUs, sorted}."""
    return {int(n[4:]): sorted(parse_cpulist(text)) for n, text in node_cpulists().items()}


def cpu_nodes():
    """{cpu: NUMA node}."""
    return {c: n for n, cpus in node_cpus().items() for c in cpus}


def topology():
    """CPUs per NUMA node and the kernel, as the guest sees them."""
    return {"cpus": os.cpu_count(), "nodes": node_cpulists(), "kernel": os.uname().release}


def check_tunings(tunings):
    """The tunings asked for (default: none), each known and once."""
    tunings = list(tunings or ["none"])
    bad = [t for t in tunings if t not in TUNINGS]
    if bad:
        raise LabError(f"unknown tuning {bad[0]}: one of {', '.join(TUNINGS)}")
    if len(set(tunings)) != len(tunings):
        raise LabError("a tuning is given twice")
    return tunings


def save_records(out, records):
    """records as out/RECORDS, replaced whole (never a half-written file)."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, RECORDS)
    with open(path + ".tmp", "w") as fh:
        json.dump(records, fh, separators=(",", ":"))
    os.replace(path + ".tmp", path)


def run_in_guest(mixes, balancing, out, reps=6, seconds=10, settle=SETTLE, tunings=None):
    """What the test host runs: every mix under every tuning with every
    NUMA balancing setting, its records in out/RECORDS."""
    require_root("bench scale --in-guest")
    mixes = check_args(mixes, MIXES, reps, seconds)
    tunings = check_tunings(tunings)
    if not schedtrace.available():
        raise LabError("bench scale needs tracefs (CONFIG_FTRACE) to measure idle steal")
    mount = cpu_mount()
    build_spinner()     # in the test host: the image's, newer than its source
    records = {"topology": topology(), "results": []}
    save_records(out, records)
    for mix in mixes:
        for tuning in tunings:
            for b in balancing:
                records["results"].append(run_mix(mount, mix, b, reps, seconds, settle,
                                                  tuning))
                save_records(out, records)
    return 0
