# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench control: control-plane latency, stock vs patched libvirt.

Three daemons are compared, each the lab's private virtqemud:
  stock               libvirt at the pinned base, without the series
  patched per-domain  the series, vcpu_cgroup = "per-domain" (the default)
  patched per-host    the series, vcpu_cgroup = "per-host"
with 1 and with 10 running domains (the measured one plus 0 or 9 idle TCG
guests).  Timed through the libvirt API from one client connection
(Debian's python3-libvirt), so that process start-up of virsh is not in
the figures:
  start   virDomainCreate of a defined 2-vCPU guest (returns when QEMU runs
          and its vCPUs are placed)
  set     virDomainSetSchedulerParametersFlags(vcpu_quota=50000, LIVE):
          per-host moves the vCPUs out of the shared group
  reset   the same with vcpu_quota=-1: per-host moves them back
Every round measures every (daemon, domains) block, in rotating order; the
tables give medians over all rounds and repetitions.

A move between cgroups has a floor the daemon cannot avoid: writing a
thread into a v1 'tasks' file takes the kernel's cgroup_threadgroup_rwsem
for writing, which waits for an RCU grace period unless another move
happened just before.  'attach' measures that floor without libvirt: a
sleeping process of our own moved between two groups of our own
(unsteal-bench-attach/a and /b in the cpu hierarchy), 0.5 s apart and
back to back.
"""

import os
import statistics
import subprocess
import time

from ..common import LabError, build_dir, require_root, step
from . import benchsched
from .. import config
from ..lab import daemon, guest
from .benchkit import prepare_lab, publish
from ..config import VCPU_CGROUP_MODES

# (label, vcpu_cgroup): stock libvirt, then the series in each mode.
VARIANTS = [("stock", None)] + [(f"patched {m}", m) for m in VCPU_CGROUP_MODES]
RUNNING = (1, 10)
TARGET = "cp-target"


def _libvirt():
    from ..stack import sources
    sources.ensure_group("benchmarks", sources.BENCH_PACKAGES, quiet_present=True)
    import libvirt as lv
    lv.registerErrorHandler(lambda *a: None, None)
    return lv


def _block(lv, variant, setting, running, reps):
    from ..build import libvirt as lab_libvirt
    cfg = daemon.config_at(lab_libvirt.stock_prefix()) if variant == "stock" else config.get()
    with config.using(cfg):
        return _measure(lv, setting, running, reps)


def _measure(lv, setting, running, reps):
    """One block on the configuration's lab daemon, restarted with setting."""
    try:
        daemon.stop()
        daemon.start(vcpu_cgroup=setting, quiet=True)
        for i in range(running - 1):
            guest.create(f"cp-bg{i}", vcpus=1, workload="idle")
        xml = guest.domain_xml(guest.lab_name(TARGET), vcpus=2, workload="idle")
        conn = lv.open(daemon.lab().uri)
        try:
            dom = conn.defineXML(xml)
            out = {"start": [], "set": [], "reset": []}
            for _ in range(reps):
                t0 = time.perf_counter()
                dom.create()
                out["start"].append(time.perf_counter() - t0)
                time.sleep(0.3)
                for key, quota in (("set", 50000), ("reset", -1)):
                    t0 = time.perf_counter()
                    dom.setSchedulerParametersFlags({"vcpu_quota": quota},
                                                    lv.VIR_DOMAIN_AFFECT_LIVE)
                    out[key].append(time.perf_counter() - t0)
                dom.destroy()
            dom.undefine()
        finally:
            conn.close()
        return out
    finally:
        daemon.stop()


ATTACH_GROUP = "unsteal-bench-attach"


def attach_floor(reps=15):
    """Median ms of one tasks-file write, isolated (0.5 s apart) and back to back."""
    root = os.path.join(benchsched.cpu_mount(), ATTACH_GROUP)
    made = []
    proc = None
    try:
        for d in (root, os.path.join(root, "a"), os.path.join(root, "b")):
            os.mkdir(d)
            made.append(d)
        proc = subprocess.Popen(["sleep", "600"])
        out = {}
        for key, gap in (("isolated", 0.5), ("back to back", 0.0)):
            xs = []
            for i in range(reps):
                time.sleep(gap)
                t0 = time.perf_counter()
                with open(os.path.join(root, "ab"[i % 2], "tasks"), "w") as fh:
                    fh.write(str(proc.pid))
                xs.append(time.perf_counter() - t0)
            out[key] = statistics.median(xs)
        return out
    finally:
        if proc:
            proc.kill()
            proc.wait()
        for d in reversed(made):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)


def markdown(results):
    lines = ["| operation | running domains | " + " | ".join(v for v, _ in VARIANTS)
             + " | per-host / stock | per-domain / stock |",
             "|---|---|" + "---|" * (len(VARIANTS) + 2)]
    for op in ("start", "set", "reset"):
        for n in RUNNING:
            med = {v: results["median"][f"{v}|{n}"][op] for v, _ in VARIANTS}
            lines.append(f"| {op} | {n} | " + " | ".join(f"{med[v] * 1000:.1f} ms"
                                                         for v, _ in VARIANTS)
                         + f" | {med['patched per-host'] / med['stock']:.3f} "
                         f"| {med['patched per-domain'] / med['stock']:.3f} |")
    if results.get("attach"):
        a = results["attach"]
        lines += ["", "Kernel floor of one cgroup move (a thread written into a v1 tasks "
                  f"file, median): isolated {a['isolated'] * 1000:.2f} ms, back to back "
                  f"{a['back to back'] * 1000:.2f} ms."]
    return "\n".join(lines)


def plot(results, outdir):
    from . import plots
    groups = [f"{op}, {n} dom" for op in ("start", "set", "reset") for n in RUNNING]
    series = [v for v, _ in VARIANTS]
    vals = [[results["median"][f"{v}|{n}"][op] * 1000 for op in ("start", "set", "reset")
             for n in RUNNING] for v in series]
    plots.bars(os.path.join(outdir, "control.png"),
               "control-plane latency, median (libvirt API from one connection)", "ms",
               groups, series, vals, log=True)


def run_bench(reps=10, rounds=3, outdir=None, command=None):
    require_root("bench control")
    if reps < 1:
        raise LabError("--reps must be at least 1")
    prepare_lab("control", stock=True)
    lv = _libvirt()
    outdir = outdir or os.path.join(build_dir(), "bench", "control")
    machine = benchsched.machine_info()
    blocks = [(v, s, n) for n in RUNNING for v, s in VARIANTS]
    raw = {f"{v}|{n}": {"start": [], "set": [], "reset": []} for v, _, n in blocks}
    for r in range(rounds):
        k = r % len(blocks)
        for v, s, n in blocks[k:] + blocks[:k]:
            step(f"bench control: round {r + 1}/{rounds}: {v}, {n} running domain(s), "
                 f"{reps} repetitions")
            got = _block(lv, v, s, n, reps)
            for op in got:
                raw[f"{v}|{n}"][op].extend(got[op])
    step("bench control: kernel floor of a cgroup move (tasks-file writes)")
    attach = attach_floor()
    results = {"command": command, "machine": machine, "reps": reps,
               "rounds": rounds, "raw": raw, "attach": attach,
               "median": {k: {op: statistics.median(xs) for op, xs in ops.items()}
                          for k, ops in raw.items()}}
    return publish("control", results, outdir, markdown, plot)
