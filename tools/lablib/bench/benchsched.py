# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench sched: the scheduler effect of the per-host vCPU cgroup.

Synthetic domains (tools/bench/vcpu-spin.c: one process per domain, one
thread per vCPU) are placed in cpu cgroups exactly as libvirt places vCPU
threads:

  per-domain  BENCH/machine/NAME.libvirt-qemu/vcpuN   (stock libvirt)
  per-host    BENCH/machine/vcpus.partition           (vcpu_cgroup = "per-host",
              weighing 1024 per vCPU thread it holds, as the series sets it)

and each domain's main thread in BENCH/machine/NAME.libvirt-qemu/emulator
in both layouts.  BENCH is a cpu cgroup of our own ("unsteal-bench") under
the root of the cpu hierarchy, removed afterwards.  The same threads are
moved between the two layouts, so both modes are measured side by side in
one run: every repetition measures both, in alternating order.

Per vCPU thread and window W (schedstat, /proc/stat):
  share       = Δrun / W
  steal       = Δwait / W
  idle steal  = steal x (idle fraction of the host CPUs over W)
which are unsteal's definitions (docs/unsteal.md).
"""

import os
import statistics
import subprocess
import time

from ..common import LabError, build_dir, require_root, step, warn
from ..lab import cgroupfs, measure
from ..config import VCPU_CGROUP_MODES as MODES
from .benchkit import build_program, check_args, close_and_wait, median, publish

BENCH_GROUP = "unsteal-bench"
TOP_SHARES = 10240

# name -> (description, [(domain, vcpus, duty %)]).  Duty 100 is a busy vCPU;
# lower duties are mostly idle guests that wake up every 100 ms.
MIXES = {
    "2-1-1": ("one 2-vCPU and two 1-vCPU busy domains (the README's example)",
              [("big", 2, 100), ("small1", 1, 100), ("small2", 1, 100)]),
    "4-2-2": ("the seed talk's mix: one 4-vCPU and two 2-vCPU busy domains",
              [("big", 4, 100), ("mid1", 2, 100), ("mid2", 2, 100)]),
    "2+6x1": ("many small domains and one large: one 2-vCPU and six 1-vCPU busy domains",
              [("big", 2, 100)] + [(f"small{i}", 1, 100) for i in range(1, 7)]),
    "light": ("a host with spare CPU: one busy 1-vCPU domain and three 1-vCPU domains at "
              "20 % duty (1.6 CPUs of demand)",
              [("busy", 1, 100), ("idle1", 1, 20), ("idle2", 1, 20), ("idle3", 1, 20)]),
    "busy+idle": ("busy and mostly idle domains: a busy 2-vCPU and a busy 1-vCPU domain, "
                  "three 1-vCPU domains at 20 % duty",
                  [("big", 2, 100), ("small", 1, 100),
                   ("idle1", 1, 20), ("idle2", 1, 20), ("idle3", 1, 20)]),
}


def build_spinner():
    return build_program("vcpu-spin")


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def cpu_mount():
    """The v1 hierarchy that has the cpu controller."""
    mount = cgroupfs.v1_hierarchy("cpu")
    if mount is None:
        raise LabError("bench sched needs a cgroup v1 hierarchy with the cpu controller; "
                       "this host has none (cgroup v2 support is issue #9)")
    return mount


class Layout:
    """The benchmark's own cgroup tree; removes exactly what it created."""

    def __init__(self, mount, top_shares=None):
        self.root = os.path.join(mount, BENCH_GROUP)
        self.made = []
        self.top_shares = top_shares or TOP_SHARES

    def mkdir(self, rel):
        path = os.path.join(self.root, rel) if rel else self.root
        if not os.path.isdir(path):
            os.mkdir(path)
            self.made.append(path)
        return path

    def setup(self, domains):
        if os.path.isdir(self.root):
            raise LabError(f"{self.root} exists: a benchmark is running, or an earlier one "
                           "was killed; remove it (rmdir, deepest first) once it holds no tasks")
        self.mkdir("")
        # Weight of the whole benchmark against the rest of the host (the
        # layouts below it are libvirt's): high, so that other work on the
        # host disturbs the comparison less.  It is recorded in the results.
        with open(os.path.join(self.root, "cpu.shares"), "w") as fh:
            fh.write(str(self.top_shares))
        self.mkdir("machine")
        self.mkdir("machine/vcpus.partition")
        for d in domains:
            self.mkdir(f"machine/{d.name}.libvirt-qemu")
            self.mkdir(f"machine/{d.name}.libvirt-qemu/emulator")
            for i in range(d.vcpus):
                self.mkdir(f"machine/{d.name}.libvirt-qemu/vcpu{i}")

    def attach(self, rel, tid):
        with open(os.path.join(self.root, rel, "tasks"), "w") as fh:
            fh.write(str(tid))

    def shares(self, rel, value):
        with open(os.path.join(self.root, rel, "cpu.shares"), "w") as fh:
            fh.write(str(value))

    def place(self, domains, mode):
        """Moves the threads into mode's layout and sets its weights:
        per-domain and per-host as libvirt sets them (a default domain
        weighs 1024; the shared group 1024 per vCPU it holds), and
        per-domain-scaled with each domain weighing 1024 per vCPU, as
        OpenStack Nova set cpu_shares."""
        for d in domains:
            dom = f"machine/{d.name}.libvirt-qemu"
            self.shares(dom, 1024 * d.vcpus if mode == "per-domain-scaled" else 1024)
            self.attach(f"{dom}/emulator", d.proc.pid)
            for i, tid in enumerate(d.tids):
                if mode == "per-host":
                    self.attach("machine/vcpus.partition", tid)
                else:
                    self.attach(f"{dom}/vcpu{i}", tid)
        self.shares("machine/vcpus.partition",
                    1024 * sum(d.vcpus for d in domains) if mode == "per-host" else 1024)

    def teardown(self):
        mount = os.path.dirname(self.root)
        for path in reversed(self.made):
            try:
                with open(os.path.join(path, "tasks")) as fh:
                    tids = fh.read().split()
                for tid in tids:
                    try:
                        with open(os.path.join(mount, "tasks"), "w") as out:
                            out.write(tid)
                    except OSError:
                        pass
                os.rmdir(path)
            except OSError as e:
                warn(f"bench: could not remove {path}: {e}")
        self.made = []


def spin_bin():
    """The vCPU spinner (tools/bench/vcpu-spin.c) as build_program() builds it."""
    return os.path.join(build_dir(), "bench", "vcpu-spin")


class Domain:
    def __init__(self, name, vcpus, duty, wake_ms=0, period_ms=100, mem_mb=0):
        """wake_ms: the main thread (QEMU's main loop) wakes that often; 0:
        never.  period_ms: a vCPU's duty cycle below 100 %; mem_mb: memory
        each vCPU writes through while it runs (tools/bench/vcpu-spin.c)."""
        self.name, self.vcpus, self.duty = name, vcpus, duty
        argv = [spin_bin(), str(vcpus), str(duty)]
        if wake_ms or period_ms != 100 or mem_mb:
            argv += [str(period_ms), str(wake_ms)] + ([str(mem_mb)] if mem_mb else [])
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.tids = []
        for line in self.proc.stdout:
            line = line.strip()
            if line == "ready":
                break
            self.tids.append(int(line))
        if len(self.tids) != vcpus:
            self.stop()
            raise LabError(f"bench: vcpu-spin for {name} did not start its threads")

    def stop(self):
        close_and_wait(self.proc)


def cpu_times():
    """(idle + iowait, total) jiffies summed over all CPUs."""
    with open("/proc/stat") as fh:
        f = [int(x) for x in fh.readline().split()[1:9]]
    return f[3] + f[4], sum(f)


def window(domains, seconds):
    threads = {(d.name, i): (d.proc.pid, tid) for d in domains for i, tid in enumerate(d.tids)}
    i0, t0 = cpu_times()
    res = measure.sample(threads, seconds)
    i1, t1 = cpu_times()
    idle = (i1 - i0) / (t1 - t0) if t1 > t0 else 0.0
    return {f"{k[0]}/{k[1]}": {"share": s, "steal": w, "idle_steal": w * idle,
                               "cgroup": measure.cpu_cgroup(*threads[k])}
            for k, (s, w) in res.items()}, idle


def summarise(domains, per_thread):
    """Figures of one window: ratio, Jain, steal totals (busy domains for fairness)."""
    busy = [d for d in domains if d.duty >= 100]
    big = max(busy, key=lambda d: d.vcpus)
    small = [d for d in busy if d.vcpus == min(x.vcpus for x in busy) and d is not big]

    def per_vcpu(ds):
        xs = [per_thread[f"{d.name}/{i}"]["share"] for d in ds for i in range(d.vcpus)]
        return sum(xs) / len(xs)
    busy_shares = [per_thread[f"{d.name}/{i}"]["share"] for d in busy for i in range(d.vcpus)]
    return {
        "ratio": per_vcpu([big]) / per_vcpu(small) if small and per_vcpu(small) else None,
        "jain": measure.jain(busy_shares),
        "steal": sum(v["steal"] for v in per_thread.values()),
        "idle_steal": sum(v["idle_steal"] for v in per_thread.values()),
        "util": sum(v["share"] for v in per_thread.values()),
    }


def run_mix(layout_mount, mix, reps, seconds, settle, top_shares=None):
    desc, spec = MIXES[mix]
    domains = []
    layout = Layout(layout_mount, top_shares)
    out = {"mix": mix, "description": desc,
           "domains": [{"name": n, "vcpus": v, "duty": d} for n, v, d in spec],
           "reps": []}
    try:
        for n, v, d in spec:
            domains.append(Domain(n, v, d))
        layout.setup(domains)
        for r in range(reps):
            order = MODES if r % 2 == 0 else tuple(reversed(MODES))
            rep = {}
            for mode in order:
                layout.place(domains, mode)
                time.sleep(settle)
                per_thread, idle = window(domains, seconds)
                rep[mode] = {"threads": per_thread, "host_idle": idle,
                             **summarise(domains, per_thread)}
            out["reps"].append(rep)
            step(f"bench: {mix}: repetition {r + 1}/{reps}: ratio per-domain "
                 f"{fmt(rep['per-domain']['ratio'])} per-host {fmt(rep['per-host']['ratio'])}")
    finally:
        for d in domains:
            d.stop()
        layout.teardown()
    out["median"] = {}
    for mode in MODES:
        reps_m = [rep[mode] for rep in out["reps"]]
        keys = list(reps_m[0]["threads"])
        out["median"][mode] = {
            "threads": {k: {f: statistics.median(r["threads"][k][f] for r in reps_m)
                            for f in ("share", "steal", "idle_steal")} for k in keys},
            **{f: median(r[f] for r in reps_m)
               for f in ("ratio", "jain", "steal", "idle_steal", "util", "host_idle")},
        }
    return out


def machine_info():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": os.uname().release,
            "load_before": open("/proc/loadavg").read().split()[:3]}


def markdown(results):
    lines = []
    lines.append("| mix | mode | large/small per-vCPU ratio | Jain (busy vCPUs) "
                 "| total steal (vCPUs) | idle steal (vCPUs) | host idle |")
    lines.append("|---|---|---|---|---|---|---|")
    for mix in results["mixes"]:
        for mode in MODES:
            m = mix["median"][mode]
            lines.append(f"| {mix['mix']} | {mode} | {fmt(m['ratio'])} | {m['jain']:.3f} "
                         f"| {m['steal']:.2f} | {m['idle_steal']:.3f} "
                         f"| {m['host_idle'] * 100:.1f} % |")
    lines.append("")
    for mix in results["mixes"]:
        lines.append(f"**{mix['mix']}** ({mix['description']}): median CPU share "
                     "per vCPU thread, % of one CPU (steal in brackets)")
        lines.append("")
        lines.append("| vCPU | duty | per-domain | per-host |")
        lines.append("|---|---|---|---|")
        duty = {d["name"]: d["duty"] for d in mix["domains"]}
        for k in mix["median"]["per-domain"]["threads"]:
            a = mix["median"]["per-domain"]["threads"][k]
            b = mix["median"]["per-host"]["threads"][k]
            lines.append(f"| {k} | {duty[k.split('/')[0]]} % | {a['share'] * 100:.1f} "
                         f"({a['steal'] * 100:.1f}) | {b['share'] * 100:.1f} "
                         f"({b['steal'] * 100:.1f}) |")
        lines.append("")
    return "\n".join(lines)


def plot(results, outdir):
    from . import plots
    plots.sched_all(results, outdir, "sched")


def run_bench(mixes=None, reps=5, seconds=10, settle=2, outdir=None, command=None,
              top_shares=None):
    require_root("bench sched")
    mixes = check_args(mixes, MIXES, reps, seconds)
    outdir = outdir or os.path.join(build_dir(), "bench", "sched")
    mount = cpu_mount()
    build_spinner()
    total = len(mixes) * reps * 2 * (seconds + settle)
    step(f"bench: sched: {len(mixes)} mixes x {reps} repetitions x 2 modes x "
         f"({settle}+{seconds}) s = about {total // 60} min {total % 60} s")
    results = {"command": command, "machine": machine_info(), "seconds": seconds,
               "top_shares": top_shares or TOP_SHARES,
               "settle": settle, "reps": reps, "mixes": []}
    for m in mixes:
        results["mixes"].append(run_mix(mount, m, reps, seconds, settle, top_shares))
    return publish("sched", results, outdir, markdown, plot)
