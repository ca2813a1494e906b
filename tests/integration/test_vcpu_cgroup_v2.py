# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" on cgroup v2: one scheduling entity, limits per domain.

Runs only where the cpu controller is on cgroup v2 (the test host's v2
variants); docs/vcpu-cgroup-v2.md has the design.

- the shared partition does not enable cpu for its children, and each
  domain below it keeps its own group for memory, io and cpuset;
- the scheduling effect with real domains: a 2-vCPU and a 1-vCPU busy
  domain on a 2-CPU host get the same CPU time per vCPU in the shared
  partition, and per domain (stock placement) the 2-vCPU domain gets half
  of it per vCPU;
- memory already charged stays with the group a move left behind: that
  group is kept until the domain stops, capped at what it holds, and the
  domain's group gets the rest of the hard limit, so the two never exceed
  it; a live memtune change splits the new limit the same way;
- stopping the domain removes both groups;
- with systemd-machined systemd removes the scope a domain leaves, and
  what it held is charged to the slice above: the domain's scope gets the
  hard limit less what the scopes it left held, machined follows the
  domain to each new scope, and stopping it removes the scope.
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


def limits(dom):
    """Where libvirt writes the domain's own limits: its nested 'libvirt'
    group in a machine's scope, else the domain's group."""
    return labtest.domain_sub(dom, "memory") if vcpucg.MACHINED else dom


def other_group(dom):
    """The domain's group in the partition it is not in."""
    base = os.path.basename(dom)
    if os.path.dirname(dom) == vcpucg.SHARED:
        return "/machine/" + base
    return vcpucg.SHARED + "/" + base


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


def check_split(t, a, limit_kib, what):
    dom = vcpucg.domain_group(a)
    left = other_group(dom)
    t.ok(os.path.isdir(group_dir(left)), f"{what}: the group left behind is kept", left)
    held = int(read(left, "memory.current"))
    cap = int(read(left, "memory.max"))
    t.ok(held <= cap <= held + 4 * MiB,
         f"{what}: the group left behind is capped at what it holds",
         f"memory.current {held}, memory.max {cap}")
    own_max = int(read(dom, "memory.max"))
    want = limit_kib * 1024 - cap
    t.ok(abs(own_max - want) <= 4096,
         f"{what}: the domain's group gets the rest of the hard limit",
         f"memory.max {own_max}, limit {limit_kib * 1024} - left behind {cap} = {want}")
    total = int(read(dom, "memory.current")) + held
    t.ok(total <= limit_kib * 1024, f"{what}: both groups together stay within the limit",
         f"{total} <= {limit_kib * 1024}")
    t.eq(read(left, "cgroup.procs"), "", f"{what}: no task is left behind")
    return dom, left


def check_memory_kept(t, a, limit_kib):
    """The group a move leaves behind is kept and capped (no machined)."""
    dom = vcpucg.domain_group(a)
    # Out of the shared partition: memory charged so far stays behind.
    p = vcpucg.schedinfo(a, "vcpu_quota=50000")
    t.ok(p.returncode == 0 and vcpucg.all_own(a), "vcpu_quota moves the domain out",
         p.stderr + vcpucg.placement_report(a))
    check_split(t, a, limit_kib, "moved out")

    # Back in: the group it left is its group again.
    p = vcpucg.schedinfo(a, "vcpu_quota=-1")
    t.ok(p.returncode == 0 and vcpucg.all_shared(a), "vcpu_quota=-1 moves it back",
         p.stderr + vcpucg.placement_report(a))
    t.eq(vcpucg.domain_group(a), dom, "into the group it had before")
    check_split(t, a, limit_kib, "moved back")

    # A live memtune change is split too.
    limit_kib = 640 * 1024
    p = daemon.virsh(["memtune", a, "--hard-limit", str(limit_kib), "--live"],
                     check=False, capture=True)
    t.ok(p.returncode == 0, "memtune --hard-limit after moves", p.stderr)
    check_split(t, a, limit_kib, "new hard limit")

    # Stopping the domain removes both groups.
    dom = vcpucg.domain_group(a)
    left = other_group(dom)
    daemon.virsh(["destroy", a], capture=True)
    t.ok(not os.path.isdir(group_dir(dom)) and not os.path.isdir(group_dir(left)),
         "destroy removes the domain's group and the one left behind")


def check_moved_machined(t, a, limit_kib, left, old, what):
    dom = vcpucg.domain_group(a)
    t.ok(dom != old and not os.path.isdir(group_dir(old)),
         f"{what}: the domain is in a new scope, systemd removed the one it left",
         f"{old} -> {dom}")
    t.eq(vcpucg.machine_unit(a), os.path.basename(dom), f"{what}: machined has the new scope")
    own_max = int(read(limits(dom), "memory.max"))
    want = limit_kib * 1024 - left
    t.ok(abs(own_max - want) <= 8 * MiB,
         f"{what}: the domain's scope gets the hard limit less what the scopes it left held",
         f"memory.max {own_max}, limit {limit_kib * 1024} - left {left} = {want}")
    return dom


def check_memory_machined(t, a, limit_kib):
    """With machined systemd removes the scope a domain leaves, and what it
    held is charged to the slice above: the domain's scope gets the hard
    limit less the memory the scopes it left held at the moves."""
    dom = vcpucg.domain_group(a)
    left = int(read(dom, "memory.current"))
    p = vcpucg.schedinfo(a, "vcpu_quota=50000")
    t.ok(p.returncode == 0 and vcpucg.all_own(a), "vcpu_quota moves the domain out",
         p.stderr + vcpucg.placement_report(a))
    dom = check_moved_machined(t, a, limit_kib, left, dom, "moved out")

    left += int(read(dom, "memory.current"))
    p = vcpucg.schedinfo(a, "vcpu_quota=-1")
    t.ok(p.returncode == 0 and vcpucg.all_shared(a), "vcpu_quota=-1 moves it back",
         p.stderr + vcpucg.placement_report(a))
    dom = check_moved_machined(t, a, limit_kib, left, dom, "moved back")

    limit_kib = 640 * 1024
    p = daemon.virsh(["memtune", a, "--hard-limit", str(limit_kib), "--live"],
                     check=False, capture=True)
    t.ok(p.returncode == 0, "memtune --hard-limit after moves", p.stderr)
    own_max = int(read(limits(dom), "memory.max"))
    t.ok(abs(own_max - (limit_kib * 1024 - left)) <= 8 * MiB,
         "new hard limit: less what the scopes the domain left held",
         f"memory.max {own_max}, limit {limit_kib * 1024} - left {left}")

    scope = os.path.basename(dom)
    daemon.virsh(["destroy", a], capture=True)
    t.ok(labtest.wait_for(lambda: not os.path.isdir(group_dir(dom)), 5),
         f"destroy removes the machine's scope {scope}")
    t.eq(vcpucg.machine_unit(a), None, "and machined forgets the machine")


def main(t):
    if not vcpucg.V2:
        labtest.skip_all("the cpu controller is not on cgroup v2 here")
    daemon.stop()

    # The scheduling effect, per domain first (stock placement) ...
    daemon.start(vcpu_cgroup="per-domain", quiet=True)
    big = guest.create("v2-big", vcpus=2, workload="busy")
    small = guest.create("v2-small", vcpus=1, workload="busy")
    time.sleep(2)
    per_domain = vcpu_shares([big, small])
    r_dom = ratio(per_domain, big, small)
    t.ok(r_dom < 0.75, "per-domain: a 2-vCPU domain's vCPUs get less than a 1-vCPU domain's",
         f"ratio {r_dom:.2f}: {fmt(per_domain)}")

    # ... then in the shared partition (the daemon restart moves them).
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    t.ok(vcpucg.all_shared(big) and vcpucg.all_shared(small),
         "per-host: both domains are below the shared partition",
         vcpucg.placement_report(big) + "\n" + vcpucg.placement_report(small))
    t.ok(not vcpucg.shared_partition_enables_cpu(),
         "the shared partition does not enable cpu for its children")
    t.ok(not os.path.exists(group_dir(vcpucg.domain_group(big)) + "/cpu.weight"),
         "a shared domain's group has no cpu controller of its own")
    time.sleep(2)
    per_host = vcpu_shares([big, small])
    r_host = ratio(per_host, big, small)
    t.ok(r_host > 0.8, "per-host: every vCPU gets about the same CPU time",
         f"ratio {r_host:.2f}: {fmt(per_host)} (per-domain {r_dom:.2f})")
    print(f"# scheduling: per-vCPU ratio big/small per-domain {r_dom:.2f}, per-host {r_host:.2f}")
    daemon.virsh(["destroy", big], capture=True)
    daemon.virsh(["destroy", small], capture=True)

    # Limits stay per domain below the shared partition.
    a = guest.create("v2-mem", vcpus=1, workload="idle")
    b = guest.create("v2-other", vcpus=1, workload="idle")
    limit_kib = 768 * 1024
    p = daemon.virsh(["memtune", a, "--hard-limit", str(limit_kib), "--live"],
                     check=False, capture=True)
    t.ok(p.returncode == 0, "memtune --hard-limit on a shared domain", p.stderr)
    dom = vcpucg.domain_group(a)
    t.eq(read(limits(dom), "memory.max"), str(limit_kib * 1024),
         "the limit is in the domain's own group below the shared partition")
    t.eq(read(limits(vcpucg.domain_group(b)), "memory.max"), "max",
         "and not in the other domain's")
    t.ok(int(read(dom, "memory.current")) > 8 * MiB, "the domain's group holds its memory",
         read(dom, "memory.current"))
    ctrls = read(dom, "cgroup.controllers").split()
    t.ok({"memory", "cpuset"} <= set(ctrls) and "cpu" not in ctrls,
         "the domain's group has memory and cpuset, but no cpu", ctrls)

    if vcpucg.MACHINED:
        check_memory_machined(t, a, limit_kib)
    else:
        check_memory_kept(t, a, limit_kib)
    daemon.virsh(["destroy", b], capture=True)


labtest.run(main)
