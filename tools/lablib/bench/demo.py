# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab demo: three busy TCG guests (2, 1 and 1 vCPUs) on this host.

It prints each vCPU's CPU share and steal with libvirt's stock per-domain
cgroups and, when the patched libvirt knows vcpu_cgroup, with the per-host
vCPU cgroup, side by side.  The guests boot no OS and spin on every vCPU
with interrupts off (guest workload 'spin'), so their vCPU threads are pure
CPU hogs: Linux TCG guests hand QEMU's big lock between their vCPU threads,
which the host then stacks on one CPU (docs/performance.md, section 2).
"""

import statistics

from ..common import LabError, step
from ..lab import daemon, guest, measure
from ..stack import sources
from ..config import VCPU_CGROUP_MODES

GUESTS = [("lab-big", 2), ("lab-small1", 1), ("lab-small2", 1)]


def measure_mode(label, setting, seconds, rounds=3):
    """Boot the three guests with vcpu_cgroup = setting and measure them."""
    daemon.start(vcpu_cgroup=setting, quiet=True)
    for name, n in GUESTS:
        guest.create(name, vcpus=n, workload="spin")
    threads, placement = {}, {}
    for name, _ in GUESTS:
        pid = guest.qemu_pid(name)
        for idx, tid in guest.vcpu_tids(name).items():
            threads[(name, idx)] = (pid, tid)
            placement[(name, idx)] = measure.cpu_cgroup(pid, tid)
    step(f"demo: {label}: measuring {rounds} x {seconds // rounds}s")
    runs = [measure.sample(threads, max(1, seconds // rounds)) for _ in range(rounds)]
    res = {k: (statistics.median(r[k][0] for r in runs), statistics.median(r[k][1] for r in runs))
           for k in threads}
    for name, _ in GUESTS:
        daemon.virsh(["destroy", name], check=False, capture=True)
    return res, placement


def print_table(results):
    modes = list(results)
    hdr = f"{'domain':<12}{'vCPU':>5}" + "".join(
        f"{m + ' share':>20}{'steal':>8}" for m in modes)
    print(hdr)
    print("-" * len(hdr))
    keys = list(next(iter(results.values()))[0])
    for k in keys:
        line = f"{k[0]:<12}{k[1]:>5}"
        for m in modes:
            share, steal = results[m][0][k]
            line += f"{share * 100:>19.1f}%{steal * 100:>7.1f}%"
        print(line)
    print()
    for m in modes:
        res, place = results[m]
        big = [res[k][0] for k in keys if k[0] == "lab-big"]
        small = [res[k][0] for k in keys if k[0] != "lab-big"]
        ratio = (sum(big) / len(big)) / (sum(small) / len(small)) if small and sum(small) else 0
        groups = sorted({place[k] for k in keys})
        print(f"{m}: large/small per-vCPU share ratio {ratio:.2f} (ideal 1.00), "
              f"Jain fairness {measure.jain(res[k][0] for k in keys):.3f}, "
              f"total steal {sum(res[k][1] for k in keys) * 100:.0f}% of a CPU")
        print(f"  vCPU cpu cgroups: {', '.join(groups)}")


def synthetic_headline(reps=3, seconds=5):
    """The {2,1,1} mix of tools/lab bench sched, shortened: about 40 s."""
    from . import benchsched
    try:
        mount = benchsched.cpu_mount()
    except LabError as e:
        return f"synthetic benchmark skipped: {e}"
    benchsched.build_spinner()
    step(f"demo: synthetic {{2,1,1}} CPU-bound threads in libvirt's layouts, "
         f"{reps} x {seconds}s per mode")
    res = benchsched.run_mix(mount, "2-1-1", reps, seconds, settle=1)
    med = res["median"]
    return ("Synthetic, CPU-bound threads placed as libvirt places vCPU threads "
            f"(median of {reps} x {seconds}s; full run: tools/lab bench sched):\n"
            + "\n".join(f"  {m}: large/small per-vCPU share ratio "
                        f"{benchsched.fmt(med[m]['ratio'])} (ideal 1.00), "
                        f"Jain fairness {med[m]['jain']:.3f}" for m in VCPU_CGROUP_MODES))


def run_demo(seconds=20):
    import os
    if os.geteuid() == 0:
        sources.setup()
    from ..build import libvirt
    libvirt.build()
    guest.spin_image()
    if libvirt.has_vcpu_cgroup():
        modes = {m: m for m in VCPU_CGROUP_MODES}
    else:
        step("demo: this libvirt has no vcpu_cgroup tunable; showing per-domain only")
        modes = {VCPU_CGROUP_MODES[0]: None}
    synthetic = synthetic_headline()
    results = {}
    try:
        daemon.stop()
        for label, setting in modes.items():
            results[label] = measure_mode(label, setting, seconds)
    finally:
        daemon.stop()
    if not results:
        raise LabError("demo measured nothing")
    print()
    print(f"Three TCG guests (2, 1, 1 vCPUs) spinning on every vCPU, no OS, on "
          f"{os.cpu_count()} host CPUs; median of 3 "
          f"windows of {max(1, seconds // 3)}s; share and steal per vCPU thread from "
          f"/proc/PID/task/TID/schedstat")
    print_table(results)
    if synthetic:
        print()
        print(synthetic)
