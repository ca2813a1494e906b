# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host": placement at start, isolation, hotplug, stats.

- a domain with default tunables starts with its vCPU threads in the shared
  group of the cpu hierarchy, its emulator thread in its own group;
- a domain whose XML sets shares starts in its own groups;
- every other controller (cpuset here) keeps the vCPUs in their domain's
  vcpuN groups, and live vcpupin still pins exactly that vCPU;
- a hot-plugged vCPU follows the rule;
- per-domain mode (the default) never uses the shared group, and domstats
  has no cpu.vcpu_cgroup field there, as with stock libvirt;
- domstats reports the placement of a domain the mode placed, and cpu.time
  of a shared domain still matches the CPU time its threads used.
"""

import labtest
import vcpucg
from labtest import daemon, guest, measure


def cpu_time_of_threads(pid):
    import os
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += measure.schedstat(pid, tid)[0]
        except OSError:
            pass
    return total


def main(t):
    daemon.stop()
    daemon.start(vcpu_cgroup="per-domain", quiet=True)
    d0 = guest.create("vc-default", vcpus=1, workload="idle")
    t.ok(vcpucg.all_own(d0), "per-domain mode: vCPUs in their own groups",
         vcpucg.placement_report(d0))
    t.eq(vcpucg.domstats(d0).get("cpu.vcpu_cgroup"), None,
         "per-domain mode: domstats has no cpu.vcpu_cgroup field, as with stock libvirt")
    daemon.virsh(["destroy", d0], capture=True)

    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-a", vcpus=2, workload="busy", max_vcpus=3)
    b = guest.create("vc-b", vcpus=1, workload="idle", cputune={"shares": "2048"})
    t.ok(vcpucg.all_shared(a), "default tunables: vCPUs start in the shared group",
         vcpucg.placement_report(a))
    shared_tasks = vcpucg.shared_threads()
    t.ok(set(guest.vcpu_tids(a).values()) <= shared_tasks,
         "the shared group's tasks file lists the vCPU threads")
    pid = guest.qemu_pid(a)
    t.eq(labtest.thread_cgroup(pid, pid, "cpu"), vcpucg.emulator_path(vcpucg.domain_group(a)),
         "the emulator thread stays in the domain's own group")
    t.ok(vcpucg.all_own(b), "shares=2048 in the XML: vCPUs start in their own groups",
         vcpucg.placement_report(b))
    t.eq(labtest.cgroup_value("cpu", vcpucg.domain_group(b), "cpu.shares"), "2048",
         "the diverging domain's group has its shares")

    # Isolation: cpuset placement and pinning stay per domain.
    if labtest.has_controller("cpuset"):
        cs = vcpucg.vcpu_groups(a, "cpuset")
        t.eq(cs, {i: vcpucg.vcpu_path(vcpucg.domain_group(a), i, "cpuset") for i in cs},
             "cpuset still places each vCPU in its domain's vcpuN group")
        daemon.virsh(["vcpupin", a, "1", "0", "--live"], capture=True)
        vcpu1 = vcpucg.vcpu_path(vcpucg.domain_group(a), 1, "cpuset")
        t.eq(labtest.cgroup_value("cpuset", vcpu1, "cpuset.cpus"), "0",
             "live vcpupin pins the vCPU through its own cpuset group")
    else:
        t.skip("cpuset placement and pinning", "this host has no cpuset controller")
        daemon.virsh(["vcpupin", a, "1", "0", "--live"], capture=True)
    t.ok(vcpucg.all_shared(a), "pinning does not move vCPUs out of the shared group")

    # Hotplug follows the rule.
    p = daemon.virsh(["setvcpus", a, "3", "--live"], check=False, capture=True)
    t.ok(p.returncode == 0, "vCPU hotplug succeeds", p.stderr)
    t.eq(len(guest.vcpu_tids(a)), 3, "QEMU has a thread for the new vCPU")
    t.ok(vcpucg.all_shared(a), "the hot-plugged vCPU joins the shared group",
         vcpucg.placement_report(a))

    # Visibility and accounting.
    t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-host", "domstats: per-host")
    t.eq(vcpucg.domstats(b).get("cpu.vcpu_cgroup"), "per-domain", "domstats: per-domain")
    import time

    def sample():
        # domstats against the threads' time at the middle of the virsh
        # call; of three calls the quickest, since a loaded host can stall
        # one for a good part of the window.
        best = None
        for _ in range(3):
            before, t0 = cpu_time_of_threads(pid), time.monotonic()
            c = int(vcpucg.domstats(a)["cpu.time"])
            gap = time.monotonic() - t0
            mid = (before + cpu_time_of_threads(pid)) / 2
            if best is None or gap < best[2]:
                best = (c, mid, gap)
        return best[:2]

    c0, s0 = sample()
    time.sleep(5)
    c1, s1 = sample()
    dc, ds = c1 - c0, s1 - s0
    t.ok(ds > 1e9 and abs(dc - ds) <= 0.1 * ds,
         "cpu.time of a shared domain grows with its threads' CPU time (10 %)",
         f"domstats delta {dc / 1e9:.3f}s, threads delta {ds / 1e9:.3f}s")
    vs = vcpucg.domstats(a, "--vcpu")
    t.ok("vcpu.0.time" in vs and "vcpu.0.delay" in vs, "per-vCPU time and delay are reported",
         vs)


labtest.run(main)
