# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" on cgroup v2: placement at start, limits per domain.

Runs only where the cpu controller is on cgroup v2 (the test host's v2
variants).

- a sharing domain has its whole group below the shared partition, which
  has the cpu controller but does not enable it for its children; the
  partition weighs 100 per vCPU below it, a domain with its own group for
  a quota 100 per vCPU, a domain with <shares> exactly that;
- the scheduling effect with real domains: a 2-vCPU and a 1-vCPU busy
  domain on a 2-CPU host get the same CPU time per vCPU in the shared
  partition, and per domain (stock placement) the 2-vCPU domain gets half
  of it per vCPU;
- limits stay per domain below the partition: memory, cpuset; a live
  memtune writes the domain's own group, and stays there;
- placement is kept while a domain runs: a live change that would give a
  sharing domain CPU tunables of its own is refused before anything
  changes and says how to apply it (--config and a restart); --config
  applies at the next start; a domain with its own group may go back to
  the defaults live, and joins the partition at its next start; defaults
  given explicitly count as defaults and stay in the live XML;
- stopping a domain removes its group.
"""

import os
import time

import labtest
import vcpucg
from labtest import daemon, guest, measure

MiB = 1024 * 1024


def group_dir(path):
    return os.path.join(labtest.controller_dir("memory"), path.lstrip("/"))


def read(path, name):
    return labtest.cgroup_value("memory", path, name)


def vcpu_shares(names, seconds=6):
    """CPU time per vCPU thread over a window, as a fraction of a CPU."""
    tids = {(n, i): (guest.qemu_pid(n), tid) for n in names
            for i, tid in guest.vcpu_tids(n).items()}
    t0 = {k: measure.schedstat(*v)[0] for k, v in tids.items()}
    time.sleep(seconds)
    t1 = {k: measure.schedstat(*v)[0] for k, v in tids.items()}
    return {k: (t1[k] - t0[k]) / (seconds * 1e9) for k in tids}


def ratio(shares, big, small):
    """Mean CPU share of the big domain's vCPUs over the small domain's."""
    b = [v for (n, _), v in shares.items() if n == big]
    s = [v for (n, _), v in shares.items() if n == small]
    return (sum(b) / len(b)) / (sum(s) / len(s)) if s and sum(s) else 0.0


def fmt(shares):
    return ", ".join(f"{n}/vcpu{i} {v:.2f}" for (n, i), v in sorted(shares.items()))


def check_scheduling(t):
    daemon.start(vcpu_cgroup="per-domain", quiet=True)
    big = guest.create("v2-big", vcpus=2, workload="spin")
    small = guest.create("v2-small", vcpus=1, workload="spin")
    time.sleep(2)
    per_domain = vcpu_shares([big, small])
    r_dom = ratio(per_domain, big, small)
    t.ok(r_dom < 0.75, "per-domain: a 2-vCPU domain's vCPUs get less than a 1-vCPU domain's",
         f"ratio {r_dom:.2f}: {fmt(per_domain)}")
    daemon.virsh(["destroy", big], capture=True)
    daemon.virsh(["destroy", small], capture=True)

    daemon.start(vcpu_cgroup="per-host", quiet=True)
    big = guest.create("v2-big", vcpus=2, workload="spin")
    small = guest.create("v2-small", vcpus=1, workload="spin")
    t.ok(vcpucg.all_shared(big) and vcpucg.all_shared(small),
         "per-host: both domains are below the shared partition",
         vcpucg.placement_report(big) + "\n" + vcpucg.placement_report(small))
    t.ok(not vcpucg.shared_partition_enables_cpu(),
         "the shared partition does not enable cpu for its children")
    t.ok(not os.path.exists(group_dir(vcpucg.domain_group(big)) + "/cpu.weight"),
         "a shared domain's group has no cpu controller of its own")
    t.eq(labtest.cgroup_value("cpu", vcpucg.SHARED, "cpu.shares"), "300",
         "the shared partition weighs 100 per vCPU below it")
    time.sleep(2)
    per_host = vcpu_shares([big, small])
    r_host = ratio(per_host, big, small)
    t.ok(r_host > 0.8, "per-host: every vCPU gets about the same CPU time",
         f"ratio {r_host:.2f}: {fmt(per_host)} (per-domain {r_dom:.2f})")
    print(f"# scheduling: per-vCPU ratio big/small per-domain {r_dom:.2f}, per-host {r_host:.2f}")
    daemon.virsh(["destroy", big], capture=True)
    daemon.virsh(["destroy", small], capture=True)


def check_limits(t):
    a = guest.create("v2-mem", vcpus=2, workload="idle", persistent=True)
    b = guest.create("v2-other", vcpus=1, workload="idle")
    limit_kib = 768 * 1024
    p = daemon.virsh(["memtune", a, "--hard-limit", str(limit_kib), "--live"],
                     check=False, capture=True)
    t.ok(p.returncode == 0, "memtune --hard-limit on a shared domain", p.stderr)
    dom = vcpucg.domain_group(a)
    t.eq(read(vcpucg.limits_group(dom), "memory.max"), str(limit_kib * 1024),
         "the limit is in the domain's own group below the shared partition")
    t.eq(read(vcpucg.limits_group(vcpucg.domain_group(b)), "memory.max"), "max",
         "and not in the other domain's")
    t.ok(int(read(dom, "memory.current")) > 8 * MiB, "the domain's group holds its memory",
         read(dom, "memory.current"))
    ctrls = read(dom, "cgroup.controllers").split()
    t.ok({"memory", "cpuset"} <= set(ctrls) and "cpu" not in ctrls,
         "the domain's group has memory and cpuset, but no cpu", ctrls)
    return a, b, dom


def check_kept_placement(t, a, dom):
    """A live change cannot move a running domain to another partition."""
    pid = guest.qemu_pid(a)
    for setting in ("vcpu_quota=50000", "cpu_shares=200", "emulator_quota=50000"):
        p = vcpucg.schedinfo(a, setting)
        t.ok(p.returncode != 0, f"schedinfo --live --set {setting} is refused", p.stdout)
        t.ok("--config" in p.stderr and "restart" in p.stderr,
             f"{setting}: the error says how to apply it", p.stderr)
        t.ok(vcpucg.all_shared(a) and vcpucg.domain_group(a) == dom,
             f"{setting}: the domain stays where it was", vcpucg.placement_report(a))
    t.eq(guest.qemu_pid(a), pid, "the guest kept running")
    p = vcpucg.schedinfo(a, "vcpu_quota=500")
    t.ok(p.returncode != 0 and "range" in p.stderr, "an invalid value is refused as invalid",
         p.stderr)
    t.ok(vcpucg.all_shared(a) and vcpucg.domain_group(a) == dom
         and guest.qemu_pid(a) == pid, "and moves nothing", vcpucg.placement_report(a))
    p = vcpucg.schedinfo(a, "cpu_shares=100", "vcpu_quota=-1")
    t.ok(p.returncode == 0, "writing the defaults live is accepted", p.stderr)
    t.ok(vcpucg.all_shared(a), "and changes nothing", vcpucg.placement_report(a))
    info = vcpucg.schedinfo(a, live=True).stdout
    t.ok("cpu_shares     : 100" in info, "schedinfo reports the defaults", info)

    # --config applies at the next start, in its own group
    p = vcpucg.schedinfo(a, "vcpu_quota=50000", live=False, config=True)
    t.ok(p.returncode == 0, "schedinfo --config --set vcpu_quota=50000", p.stderr)
    daemon.virsh(["destroy", a], capture=True)
    t.ok(labtest.wait_for(lambda: not os.path.isdir(group_dir(dom)), 5),
         "destroy removes the domain's group", dom)
    daemon.virsh(["start", a], capture=True)
    guest.wait_console(a, "unsteal-guest: ready")
    own = vcpucg.domain_group(a)
    t.ok(vcpucg.all_own(a), "at the next start the domain has its own groups",
         vcpucg.placement_report(a))
    t.eq(labtest.cgroup_value("cpu", vcpucg.vcpu_path(own, 0), "cpu.cfs_quota_us"), "50000",
         "with its quota")
    t.eq(labtest.cgroup_value("cpu", own, "cpu.shares"), "200",
         "weighing 100 per vCPU like the partition")

    # A domain with its own group may go back to the defaults live
    p = vcpucg.schedinfo(a, "vcpu_quota=-1")
    t.ok(p.returncode == 0, "schedinfo --live --set vcpu_quota=-1 on a domain with its own group",
         p.stderr)
    t.ok(vcpucg.all_own(a), "it keeps its group while it runs", vcpucg.placement_report(a))
    t.eq(labtest.cgroup_value("cpu", vcpucg.vcpu_path(own, 0), "cpu.cfs_quota_us"), "max",
         "without the quota")
    # ... given explicitly: they count as defaults, and stay in its XML
    defaults = {"cpu_shares": "100", "vcpu_period": "100000", "vcpu_quota": "-1",
                "emulator_period": "100000", "global_period": "100000"}
    p = vcpucg.schedinfo(a, *(f"{k}={v}" for k, v in defaults.items()),
                         live=False, config=True)
    t.ok(p.returncode == 0, "schedinfo --config sets every default explicitly", p.stderr)
    daemon.virsh(["destroy", a], capture=True)
    p = daemon.virsh(["start", a], check=False, capture=True)
    t.ok(p.returncode == 0, "a domain with explicit defaults starts", p.stderr)
    guest.wait_console(a, "unsteal-guest: ready")
    t.ok(vcpucg.all_shared(a), "and joins the partition at its next start",
         vcpucg.placement_report(a))
    xml = daemon.virsh(["dumpxml", a], capture=True).stdout
    tags = {"cpu_shares": "shares", "vcpu_period": "period", "vcpu_quota": "quota",
            "emulator_period": "emulator_period", "global_period": "global_period"}
    missing = [f"<{tags[k]}>{v}</{tags[k]}>" for k, v in defaults.items()
               if f"<{tags[k]}>{v}</{tags[k]}>" not in xml]
    t.ok(not missing, "its live XML keeps the defaults it was given",
         f"missing: {missing}")


def main(t):
    if not vcpucg.V2:
        labtest.skip_all("the cpu controller is not on cgroup v2 here")
    daemon.stop()
    check_scheduling(t)
    a, b, dom = check_limits(t)
    check_kept_placement(t, a, dom)
    for n in (a, b):
        daemon.virsh(["destroy", n], check=False, capture=True)
    daemon.virsh(["undefine", a], check=False, capture=True)


labtest.run(main)
