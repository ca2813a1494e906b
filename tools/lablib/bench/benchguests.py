# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench guests: the per-host vCPU cgroup with real TCG guests.

The guests of a mix are started once under the patched libvirt; every
repetition then measures both settings of vcpu_cgroup, in alternating
order.  Switching restarts the lab's virtqemud with the other setting: on
reconnect the patched daemon moves running domains' vCPU threads into or
out of the shared group, so the same QEMU processes are measured in both
modes.

Besides share and steal per vCPU thread (schedstat), each window records
what makes TCG vCPU threads differ from pure CPU hogs:
  - voluntary context switches of the vCPU threads (a pure hog has none:
    they sleep when the guest halts or when they wait for QEMU's big lock),
  - the CPU time of each QEMU process's other threads (main loop, RCU,
    I/O), which stay in the domain's own cgroup in both modes,
  - the vCPU threads' migrations between host CPUs, and how the busy ones
    are spread over the CPUs (sampled 20 times a second): an uneven split,
    or the large guest's vCPUs stacked on one CPU, defeats any weights.
"""

import contextlib
import os
import re
import statistics
import time

from ..common import build_dir, mkdirs, require_root, run, step
from . import benchsched
from ..lab import daemon, guest, measure
from .benchkit import check_args, median, prepare_lab, publish
from ..config import VCPU_CGROUP_MODES as MODES

# name -> (description, [(guest, vcpus, workload)]).  'spin' guests boot no
# OS and spin with interrupts off: their vCPU threads are pure CPU hogs.
# 'busy' guests run a Linux kernel with a shell loop pinned to every vCPU:
# the guest's timer interrupts and APIC accesses take QEMU's big lock, so
# the vCPU threads of an SMP guest block on each other (see
# docs/performance.md).
MIXES = {
    "2-1-1": ("one 2-vCPU and two 1-vCPU spinning guests (no OS)",
              [("bg-big", 2, "spin"), ("bg-small1", 1, "spin"), ("bg-small2", 1, "spin")]),
    "busy+idle": ("a spinning 2-vCPU and a spinning 1-vCPU guest, two idle 1-vCPU Linux "
                  "guests",
                  [("bg-big", 2, "spin"), ("bg-small", 1, "spin"),
                   ("bg-idle1", 1, "idle"), ("bg-idle2", 1, "idle")]),
    "2-1-1-linux": ("the 2-1-1 mix as Linux guests with a busy shell loop per vCPU",
                    [("bg-big", 2, "busy"), ("bg-small1", 1, "busy"),
                     ("bg-small2", 1, "busy")]),
}


def _proc_cpu_ns(pid):
    """Run time of all of a process's threads (ns), from schedstat."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += measure.schedstat(pid, int(tid))[0]
        except (OSError, ValueError):
            pass
    return total


def _on_cpu(pid, tid):
    """The CPU a thread runs or last ran on (field 39 of its stat file)."""
    with open(f"/proc/{pid}/task/{tid}/stat") as fh:
        s = fh.read()
    return int(s[s.rindex(")") + 2:].split()[36])


def _migrations(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/sched") as fh:
            for line in fh:
                if line.startswith("se.nr_migrations"):
                    return int(line.split(":")[1])
    except OSError:
        pass
    return 0


def _sample_placement(threads, large, seconds, hz=20):
    """Sleep through the window while sampling which CPU each busy vCPU
    thread is on.  Returns the fraction of samples in which the busy threads
    were split unevenly over the host CPUs (for example 3 on one CPU and 1
    on the other), and the fraction in which two vCPUs of the large guest
    (`large`, a subset of `threads`) were on the same CPU.  In both cases no
    cgroup weight can give the threads the shares their groups ask for."""
    ncpu = os.cpu_count() or 1
    end = time.monotonic() + seconds
    n = uneven = stacked = 0
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(left, 1 / hz))
        per_cpu = [0] * ncpu
        try:
            where = {t: _on_cpu(*t) % ncpu for t in threads}
        except (OSError, ValueError, IndexError):
            continue
        for c in where.values():
            per_cpu[c] += 1
        n += 1
        uneven += max(per_cpu) - min(per_cpu) > 1
        on_large = [where[t] for t in large]
        stacked += len(set(on_large)) < len(on_large)
    return (uneven / n, stacked / n) if n else (0.0, 0.0)


def window(names, seconds, busy=None, large=None):
    """Measure one window.  busy: the guests whose vCPU threads are sampled
    for placement (all by default); large: the guest whose vCPUs should not
    share a CPU (none by default)."""
    threads = {}
    for n in names:
        pid = guest.qemu_pid(n)
        for i, tid in guest.vcpu_tids(n).items():
            threads[(n, i)] = (pid, tid)
    pids = {n: guest.qemu_pid(n) for n in names}
    c0 = {k: measure.ctxt_switches(*v) for k, v in threads.items()}
    p0 = {n: _proc_cpu_ns(p) for n, p in pids.items()}
    m0 = {k: _migrations(*v) for k, v in threads.items()}
    s0 = {k: measure.schedstat(*v) for k, v in threads.items()}
    i0, t0 = benchsched.cpu_times()
    w0 = time.monotonic()
    uneven, stacked = _sample_placement(
        [v for k, v in threads.items() if busy is None or k[0] in busy],
        [v for k, v in threads.items() if k[0] == large], seconds)
    wall = time.monotonic() - w0
    s1 = {k: measure.schedstat(*v) for k, v in threads.items()}
    m1 = {k: _migrations(*v) for k, v in threads.items()}
    res = {k: ((s1[k][0] - s0[k][0]) / (wall * 1e9), (s1[k][1] - s0[k][1]) / (wall * 1e9))
           for k in threads}
    i1, t1 = benchsched.cpu_times()
    c1 = {k: measure.ctxt_switches(*v) for k, v in threads.items()}
    p1 = {n: _proc_cpu_ns(p) for n, p in pids.items()}
    idle = (i1 - i0) / (t1 - t0) if t1 > t0 else 0.0
    per_thread = {}
    for k, (share, steal) in res.items():
        per_thread[f"{k[0]}/{k[1]}"] = {
            "share": share, "steal": steal, "idle_steal": steal * idle,
            "vol_per_s": (c1[k][0] - c0[k][0]) / wall,
            "invol_per_s": (c1[k][1] - c0[k][1]) / wall,
            "migrations_per_s": (m1[k] - m0[k]) / wall,
            "cgroup": measure.cpu_cgroup(*threads[k]),
        }
    other = {}
    for n in names:
        vcpu_ns = sum(s1[k][0] - s0[k][0] for k in threads if k[0] == n)
        other[n] = max(0.0, (p1[n] - p0[n] - vcpu_ns) / (wall * 1e9))
    return per_thread, other, idle, (uneven, stacked)


def summarise(spec, per_thread):
    busy = [(n, v) for n, v, w in spec if w != "idle"]
    big = max(busy, key=lambda x: x[1])
    small = [x for x in busy if x[1] == min(v for _, v in busy) and x != big]

    def per_vcpu(ds):
        xs = [per_thread[f"{n}/{i}"]["share"] for n, v in ds for i in range(v)]
        return sum(xs) / len(xs)
    shares = [per_thread[f"{n}/{i}"]["share"] for n, v in busy for i in range(v)]
    return {"ratio": per_vcpu([big]) / per_vcpu(small) if small and per_vcpu(small) else None,
            "jain": measure.jain(shares),
            "steal": sum(x["steal"] for x in per_thread.values()),
            "idle_steal": sum(x["idle_steal"] for x in per_thread.values()),
            "util": sum(x["share"] for x in per_thread.values())}


@contextlib.contextmanager
def _mix_guests(spec):
    """A fresh lab daemon in the first mode with the guests of a mix; the
    lab is stopped afterwards.  Yields the guests' domain names."""
    daemon.stop()
    try:
        daemon.start(vcpu_cgroup=MODES[0], quiet=True)
        yield [guest.create(n, vcpus=v, workload=w) for n, v, w in spec]
    finally:
        daemon.stop()


def run_mix(mix, reps, seconds, settle):
    desc, spec = MIXES[mix]
    out = {"mix": mix, "description": desc,
           "guests": [{"name": n, "vcpus": v, "workload": w} for n, v, w in spec], "reps": []}
    busy = {guest.lab_name(n): v for n, v, w in spec if w != "idle"}
    large = max(busy, key=busy.get)
    large = large if busy[large] > 1 else None
    with _mix_guests(spec) as names:
        current = MODES[0]
        for r in range(reps):
            order = MODES if r % 2 == 0 else tuple(reversed(MODES))
            rep = {}
            for mode in order:
                if mode != current:
                    daemon.start(vcpu_cgroup=mode, quiet=True)
                    current = mode
                time.sleep(settle)
                per_thread, other, idle, (uneven, stacked) = window(names, seconds, busy,
                                                                    large)
                rep[mode] = {"threads": per_thread, "other_threads": other, "host_idle": idle,
                             "uneven": uneven, "stacked": stacked,
                             **summarise([(guest.lab_name(n), v, w) for n, v, w in spec],
                                         per_thread)}
            out["reps"].append(rep)
            step(f"bench guests: {mix}: repetition {r + 1}/{reps}: ratio per-domain "
                 f"{benchsched.fmt(rep['per-domain']['ratio'])} "
                 f"per-host {benchsched.fmt(rep['per-host']['ratio'])}")
    out["median"] = {}
    for mode in MODES:
        rm = [rep[mode] for rep in out["reps"]]
        keys = list(rm[0]["threads"])
        out["median"][mode] = {
            "threads": {k: {f: statistics.median(r["threads"][k][f] for r in rm)
                            for f in ("share", "steal", "idle_steal", "vol_per_s",
                                      "invol_per_s", "migrations_per_s")} for k in keys},
            "other_threads": {n: statistics.median(r["other_threads"][n] for r in rm)
                              for n in rm[0]["other_threads"]},
            **{f: median(r[f] for r in rm)
               for f in ("ratio", "jain", "steal", "idle_steal", "util", "host_idle",
                         "uneven", "stacked")},
        }
        out["median"][mode]["cgroups"] = sorted({r["threads"][k]["cgroup"]
                                                 for r in rm for k in keys})
    return out


def _pct(x):
    return "n/a" if x is None else f"{x * 100:.0f} %"


def markdown(results):
    lines = ["| mix | mode | large/small per-vCPU ratio | ratio range | Jain (busy vCPUs) "
             "| total steal (vCPUs) | idle steal (vCPUs) | host idle | uneven split "
             "| large guest's vCPUs on one CPU |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for mix in results["mixes"]:
        for mode in MODES:
            m = mix["median"][mode]
            rs = [r[mode]["ratio"] for r in mix["reps"] if r[mode]["ratio"] is not None]
            rng = f"{min(rs):.2f}–{max(rs):.2f}" if rs else "–"
            lines.append(f"| {mix['mix']} | {mode} | {benchsched.fmt(m['ratio'])} | {rng} "
                         f"| {m['jain']:.3f} "
                         f"| {m['steal']:.2f} | {m['idle_steal']:.3f} "
                         f"| {m['host_idle'] * 100:.1f} % | {_pct(m.get('uneven'))} "
                         f"| {_pct(m.get('stacked'))} |")
    lines.append("")
    for mix in results["mixes"]:
        lines.append(f"**{mix['mix']}** ({mix['description']}): medians per vCPU thread: "
                     "CPU share % (steal %), voluntary context switches and migrations "
                     "between host CPUs per second")
        lines.append("")
        lines.append("| vCPU | per-domain share (steal) | vol. cs/s | migr./s "
                     "| per-host share (steal) | vol. cs/s | migr./s |")
        lines.append("|---|---|---|---|---|---|---|")
        a, b = mix["median"]["per-domain"], mix["median"]["per-host"]
        for k in a["threads"]:
            x, y = a["threads"][k], b["threads"][k]
            lines.append(f"| {k} | {x['share'] * 100:.1f} ({x['steal'] * 100:.1f}) "
                         f"| {x['vol_per_s']:.0f} | {x.get('migrations_per_s', 0):.1f} "
                         f"| {y['share'] * 100:.1f} ({y['steal'] * 100:.1f}) "
                         f"| {y['vol_per_s']:.0f} | {y.get('migrations_per_s', 0):.1f} |")
        lines.append("")
        lines.append("Other QEMU threads (main loop, RCU, I/O), % of one CPU: "
                     + ", ".join(f"{n} {a['other_threads'][n] * 100:.1f} / "
                                 f"{b['other_threads'][n] * 100:.1f}"
                                 for n in a["other_threads"])
                     + " (per-domain / per-host).")
        lines.append("")
    return "\n".join(lines)


def plot(results, outdir):
    from . import plots
    plots.sched_all(results, outdir, "guests")


def run_bench(mixes=None, reps=5, seconds=20, settle=5, outdir=None, command=None):
    require_root("bench guests")
    mixes = check_args(mixes, MIXES, reps, seconds)
    prepare_lab("guests")
    outdir = outdir or os.path.join(build_dir(), "bench", "guests")
    total = len(mixes) * reps * 2 * (seconds + settle + 3)
    step(f"bench guests: {len(mixes)} mixes x {reps} repetitions x 2 modes x "
         f"({settle}+{seconds} s + restart) = about {total // 60} min")
    results = {"command": command, "machine": benchsched.machine_info(), "seconds": seconds,
               "settle": settle, "reps": reps, "mixes": []}
    for m in mixes:
        results["mixes"].append(run_mix(m, reps, seconds, settle))
    return publish("guests", results, outdir, markdown, plot)


# --- who wakes the vCPU threads: tools/lab bench wakers -------------------

TRACE_EVENTS = ("sched:sched_waking", "sched:sched_migrate_task")
_PERF_LINE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<tid>\d+)\s+\[\d+\]\s+[\d.]+:\s+"
                        r"(?P<event>[\w:]+):\s+(?P<args>.*)$")


def _thread_names(names):
    """{tid: 'guest:thread name'} for every thread of the guests' QEMU processes."""
    out = {}
    for n in names:
        pid = guest.qemu_pid(n)
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            except OSError:
                continue
            out[int(tid)] = f"{n}:{comm}"
    return out


def _trace(names, seconds, datafile):
    """perf-record the scheduler's wake-ups and migrations for `seconds`;
    count, per vCPU thread, its wake-ups by waking thread and its migrations."""
    tids = _thread_names(names)
    run(["perf", "record", "-q", "-a", "-o", datafile]
        + [a for e in TRACE_EVENTS for a in ("-e", e)] + ["--", "sleep", str(seconds)],
        quiet=True)
    p = run(["perf", "script", "-i", datafile, "-F", "comm,tid,cpu,time,event,trace"],
            quiet=True, capture=True)
    wakes, migr = {}, {}
    for line in p.stdout.splitlines():
        m = _PERF_LINE.match(line)
        if not m:
            continue
        target = re.search(r"\bpid=(\d+)", m.group("args"))
        target = int(target.group(1)) if target else None
        if target not in tids or "/TCG" not in tids[target]:
            continue
        wakee = tids[target]
        if m.group("event").endswith("sched_waking"):
            waker = tids.get(int(m.group("tid")), f"other:{m.group('comm')}")
            if waker.split(":")[0] == wakee.split(":")[0]:
                waker = "own QEMU: " + waker.split(":", 1)[1]
            wakes.setdefault(wakee, {}).setdefault(waker, 0)
            wakes[wakee][waker] += 1
        else:
            migr[wakee] = migr.get(wakee, 0) + 1
    return {"seconds": seconds, "wakeups": wakes, "migrations": migr}


def wakers_markdown(results):
    lines = ["| mode | vCPU thread | wake-ups | woken by (count) | migrations |",
             "|---|---|---|---|---|"]
    for mode, r in results["modes"].items():
        keys = sorted(set(r["wakeups"]) | set(r["migrations"]))
        for k in keys:
            by = r["wakeups"].get(k, {})
            lines.append(f"| {mode} | {k} | {sum(by.values())} | "
                         + ", ".join(f"{w} ({c})" for w, c in
                                     sorted(by.items(), key=lambda x: -x[1]))
                         + f" | {r['migrations'].get(k, 0)} |")
    return "\n".join(lines)


def run_wakers(mix="2-1-1-linux", seconds=15, settle=5, outdir=None, command=None):
    """Trace who wakes the vCPU threads of a mix, once per mode."""
    require_root("bench wakers")
    from ..stack import sources
    mix = check_args([mix], MIXES, 1, seconds)[0]
    prepare_lab("wakers")
    sources.ensure_group("tracing", ["linux-perf"], quiet_present=True)
    outdir = outdir or os.path.join(build_dir(), "bench", "wakers")
    mkdirs(outdir)
    spec = MIXES[mix][1]
    results = {"command": command, "machine": benchsched.machine_info(), "mix": mix,
               "modes": {}}
    with _mix_guests(spec) as names:
        for mode in MODES:
            daemon.start(vcpu_cgroup=mode, quiet=True)
            time.sleep(settle)
            step(f"bench wakers: {mix}: {mode}: tracing wake-ups for {seconds} s")
            data = os.path.join(outdir, f"perf-{mode}.data")
            try:
                results["modes"][mode] = _trace(names, seconds, data)
            finally:
                if os.path.exists(data):
                    os.unlink(data)
    return publish("wakers", results, outdir, wakers_markdown)
