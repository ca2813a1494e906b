# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench tuned: what a group of its own costs a tuned domain.

In per-host mode a domain with a quota that does not bind leaves the
per-host group for groups of its own, weighted 1024 per vCPU (issue 18).
On the 2-CPU development host its vCPUs then get up to 7 % less than their
share, with stock libvirt's layout too.  This benchmark finds out why,
with synthetic domains (tools/bench/vcpu-spin.c) in cgroup v1 groups of our
own, placed as libvirt places them: four 1-vCPU domains whose vCPUs are in
the per-host group, and a 2-vCPU domain ("noisy") in one of

  per-host  BENCH/machine/vcpus.partition               (default domain)
  own       BENCH/machine/noisy.libvirt-qemu/vcpuN      (the series today:
            domain group 2048, each vcpuN a quota that does not bind)
  nested    BENCH/machine/vcpus.partition/noisy.libvirt-qemu/vcpuN
            (the same groups below the per-host group, a candidate layout)

each with every domain's main thread (in its emulator group, as libvirt
puts it) asleep, or waking every WAKE_MS as QEMU's main loop of an idle
spinning guest does.  The per-host group weighs 1024 per vCPU below it.

Every vCPU thread spins, so noisy's fair share is 2/6 of the vCPU threads'
run time (schedstat); the result is noisy's share divided by 2/6, the
median of the repetitions, each repetition measuring every layout once.

Spinning threads seldom move once placed, and what a group of its own
costs depends on where noisy's two vCPUs are: on two CPUs ("split") or on
one ("together").  Before each window the threads are pinned for a moment
to CPUs 0 and 1 in that arrangement (three threads on each CPU), then let
go; the window reports the fraction of its samples (every 100 ms) in which
the arrangement still held.  The benchmark runs on CPUs 0 and 1 only.
"""

import os
import time

from ..common import LabError, build_dir, require_root, step
from ..lab import measure
from .benchkit import median, publish
from .benchsched import Domain, Layout, build_spinner, cpu_mount, machine_info

SMALL = ["small1", "small2", "small3", "small4"]
NOISY = "noisy"
PLACEMENTS = ("per-host", "own", "nested")
# arrangement -> (CPU of noisy's vCPU 0 and 1, CPUs of the four small vCPUs)
ARRANGEMENTS = {"split": ((0, 1), (0, 0, 1, 1)), "together": ((0, 0), (0, 1, 1, 1))}
CPUS = {0, 1}
SAMPLE = 0.1
WAKE_MS = 55
QUOTA = 50000
PERIOD = 100000
SHARES = 1024


def _write(path, value):
    with open(path, "w") as fh:
        fh.write(str(value))


class TunedLayout(Layout):
    """Layout's tree plus the groups of the 'nested' placement and the weights."""

    def setup(self, domains):
        super().setup(domains)
        noisy = next(d for d in domains if d.name == NOISY)
        self.mkdir(f"machine/vcpus.partition/{NOISY}.libvirt-qemu")
        for i in range(noisy.vcpus):
            self.mkdir(f"machine/vcpus.partition/{NOISY}.libvirt-qemu/vcpu{i}")
        for base in ("machine", "machine/vcpus.partition"):
            grp = os.path.join(self.root, base, f"{NOISY}.libvirt-qemu")
            _write(os.path.join(grp, "cpu.shares"), SHARES * noisy.vcpus)
            for i in range(noisy.vcpus):
                _write(os.path.join(grp, f"vcpu{i}", "cpu.cfs_period_us"), PERIOD)
                _write(os.path.join(grp, f"vcpu{i}", "cpu.cfs_quota_us"), QUOTA)

    def place_tuned(self, domains, placement):
        """Every small vCPU in the per-host group, noisy's where placement says."""
        nvcpus = 0
        for d in domains:
            self.attach(f"machine/{d.name}.libvirt-qemu/emulator", d.proc.pid)
            for i, tid in enumerate(d.tids):
                if d.name != NOISY or placement == "per-host":
                    self.attach("machine/vcpus.partition", tid)
                elif placement == "own":
                    self.attach(f"machine/{NOISY}.libvirt-qemu/vcpu{i}", tid)
                else:
                    self.attach(f"machine/vcpus.partition/{NOISY}.libvirt-qemu/vcpu{i}", tid)
                if d.name != NOISY or placement != "own":
                    nvcpus += 1
        _write(os.path.join(self.root, "machine/vcpus.partition/cpu.shares"), SHARES * nvcpus)


def arrange(domains, arrangement):
    """Pin the vCPU threads for a moment as the arrangement says, then let go."""
    noisy_cpus, small_cpus = ARRANGEMENTS[arrangement]
    small = iter(small_cpus)
    for d in domains:
        for i, tid in enumerate(d.tids):
            os.sched_setaffinity(tid, {noisy_cpus[i] if d.name == NOISY else next(small)})
    time.sleep(0.3)
    for d in domains:
        for tid in d.tids:
            os.sched_setaffinity(tid, CPUS)


def _cpu(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[36])


def window(domains, seconds, arrangement):
    """noisy's fraction of the vCPU threads' run time, the fraction of samples
    in which the arrangement held, and the groups of noisy's vCPU threads."""
    threads = {(d.name, i): (d.proc.pid, tid) for d in domains for i, tid in enumerate(d.tids)}
    noisy = [v for k, v in threads.items() if k[0] == NOISY]
    before = {k: measure.schedstat(*v)[0] for k, v in threads.items()}
    held = samples = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(SAMPLE)
        apart = len({_cpu(*v) for v in noisy}) > 1
        held += apart == (arrangement == "split")
        samples += 1
    ran = {k: measure.schedstat(*v)[0] - before[k] for k, v in threads.items()}
    total = sum(ran.values())
    return {"noisy": sum(x for k, x in ran.items() if k[0] == NOISY) / total if total else None,
            "held": held / samples if samples else None,
            "cgroups": sorted({measure.cpu_cgroup(*v) for v in noisy})}


def run_configs(mount, reps, seconds, settle, wakes=(0, WAKE_MS)):
    """{(placement, wake, arrangement): [result per repetition]}."""
    out = {}
    for wake in wakes:
        domains = []
        layout = TunedLayout(mount)
        try:
            for n in SMALL:
                domains.append(Domain(n, 1, 100, wake_ms=wake))
            domains.append(Domain(NOISY, 2, 100, wake_ms=wake))
            for d in domains:
                os.sched_setaffinity(d.proc.pid, CPUS)
            layout.setup(domains)
            for r in range(reps):
                order = PLACEMENTS if r % 2 == 0 else tuple(reversed(PLACEMENTS))
                for p in order:
                    layout.place_tuned(domains, p)
                    for a in ARRANGEMENTS:
                        arrange(domains, a)
                        time.sleep(settle)
                        out.setdefault((p, wake, a), []).append(window(domains, seconds, a))
                how = f"waking every {wake} ms" if wake else "asleep"
                step(f"bench: tuned: main threads {how}: repetition {r + 1}/{reps}: "
                     "noisy / its share, split and together: "
                     + ", ".join(f"{p} " + " ".join(
                         f"{out[(p, wake, a)][-1]['noisy'] * 3:.3f}" for a in ARRANGEMENTS)
                                 for p in PLACEMENTS))
        finally:
            for d in domains:
                d.stop()
            layout.teardown()
    return out


def markdown(results):
    lines = ["| noisy's vCPUs | noisy's vCPUs on | main threads asleep "
             f"| main threads waking every {results['wake_ms']} ms |",
             "| --- | --- | --- | --- |"]
    for p in PLACEMENTS:
        for a in ARRANGEMENTS:
            cells = []
            for w in ("asleep", "waking"):
                r = results["results"][p][a][w]
                cells.append(f"{r['median']:.3f} ({min(r['reps']):.3f}-{max(r['reps']):.3f}),"
                             f" held {r['held'] * 100:.0f} %")
            where = "two CPUs" if a == "split" else "one CPU"
            lines.append(f"| {p} | {where} | {cells[0]} | {cells[1]} |")
    lines.append("")
    lines.append("noisy's CPU time as a fraction of its share (2/6 of the vCPU threads' run "
                 f"time): median (range) of {results['reps']} repetitions of "
                 f"{results['seconds']} s; 'held': the median fraction of the window in which "
                 "noisy's vCPUs stayed arranged as pinned before it")
    return "\n".join(lines)


def run_bench(reps=3, seconds=5, settle=2, outdir=None, command=None):
    require_root("bench tuned")
    if reps < 1 or seconds < 1:
        raise LabError("--reps and --seconds must be at least 1")
    if not CPUS <= os.sched_getaffinity(0):
        raise LabError("bench tuned runs on CPUs 0 and 1; this process may not use both")
    outdir = outdir or os.path.join(build_dir(), "bench", "tuned")
    mount = cpu_mount()
    build_spinner()
    n = 2 * reps * len(PLACEMENTS) * len(ARRANGEMENTS)
    total = int(n * (seconds + settle + 0.3))
    step(f"bench: tuned: 2 kinds of main thread x {reps} repetitions x {len(PLACEMENTS)} "
         f"placements x {len(ARRANGEMENTS)} arrangements x ({settle}+{seconds}) s = about "
         f"{total // 60} min {total % 60} s")
    raw = run_configs(mount, reps, seconds, settle)
    results = {"command": command, "machine": machine_info(), "reps": reps,
               "seconds": seconds, "settle": settle, "wake_ms": WAKE_MS,
               "quota": QUOTA, "period": PERIOD, "results": {}}
    for p in PLACEMENTS:
        results["results"][p] = {}
        for a in ARRANGEMENTS:
            results["results"][p][a] = {}
            for w, label in ((0, "asleep"), (WAKE_MS, "waking")):
                runs = raw[(p, w, a)]
                fr = [x["noisy"] * 3 for x in runs]
                results["results"][p][a][label] = {
                    "median": median(fr), "reps": fr,
                    "held": median(x["held"] for x in runs),
                    "cgroups": runs[0]["cgroups"]}
    return publish("tuned", results, outdir, markdown)
