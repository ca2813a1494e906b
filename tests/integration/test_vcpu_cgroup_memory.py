# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host": a guest that balloons down and back up stays
within its memory limit and is not OOM-killed.

A guest that frees memory to the host (a balloon, free-page reporting)
and takes it back makes its QEMU process's memory shrink and grow again
while it runs.  The domain's memory limit must hold all of it at every
point, whichever vCPU placement the domain has.  Two domains run the
balloon guest (tools/testhost/balloon-guest.c: it writes to all its
memory, gives pages to the host as the balloon inflates, and takes them
back and writes to them again as it deflates): one with default tuning,
whose vCPUs share the per-host group (on cgroup v2 its whole group is
below the shared partition), and one with <shares>, which keeps its own
groups.  For each, after the guest has written to all its memory:

- a live hard limit of what it uses plus 48 MiB lands in the domain's own
  memory group;
- twice: 'virsh setmem' to 32 MiB gives the memory back (the group's usage
  falls by at least three quarters of the 96 MiB), and back to 128 MiB
  takes it again (usage back where it was) -- each time within the limit,
  without an OOM kill in the group, with the same QEMU process and the
  limit unchanged.

Runs on cgroup v1 (the development host) and v2 (the test host's v2 rows).
"""

import time

import labtest
import vcpucg
from labtest import daemon, guest

MiB = 1024 * 1024
GUEST_MIB = 128
LOW_MIB = 32
MARGIN = 48 * MiB


class MemoryGroup:
    """The domain's memory group: its usage, limit and OOM kills, read from
    the cgroup files (v1 or v2)."""

    def __init__(self, name):
        pid = guest.qemu_pid(name)
        if vcpucg.V2:
            self.path = vcpucg.domain_group(name)
            self.limit_path = vcpucg.limits_group(self.path)
        else:
            self.path = labtest.thread_cgroup(pid, pid, "memory")
            self.limit_path = self.path

    def _read(self, path, name):
        return labtest.cgroup_value("memory", path, name)

    def usage(self):
        return int(self._read(self.path, "memory.current" if vcpucg.V2
                              else "memory.usage_in_bytes"))

    def limit(self):
        return self._read(self.limit_path, "memory.max" if vcpucg.V2
                          else "memory.limit_in_bytes")

    def oom_kills(self):
        """OOM kills in the group (v2: its whole subtree)."""
        text = self._read(self.path, "memory.events" if vcpucg.V2 else "memory.oom_control")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        raise labtest.LabError(f"no oom_kill counter in {self.path}")


def balloon_actual(name):
    """The guest's memory as the balloon reports it, in KiB."""
    p = daemon.virsh(["dommemstat", name], check=False, capture=True)
    for line in p.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "actual":
            return int(value)
    return None


def set_memory(name, mib, timeout=120):
    """virsh setmem, then wait until the guest has followed the balloon."""
    p = daemon.virsh(["setmem", name, str(mib * 1024), "--live"], check=False, capture=True)
    if p.returncode != 0:
        return p.stderr.strip()
    # (None: the domain is gone)
    labtest.wait_for(lambda: balloon_actual(name) in (mib * 1024, None), timeout)
    actual = balloon_actual(name)
    if actual is None:
        return "the domain is not running"
    if actual != mib * 1024:
        return f"the balloon reports {actual} KiB, not {mib * 1024}"
    return None


def check_domain(t, name, what):
    group = MemoryGroup(name)
    pid = guest.qemu_pid(name)
    t.ok(group.path is not None, f"{what}: has a memory group", group.path)
    full = group.usage()
    t.ok(full > (GUEST_MIB - 16) * MiB,
         f"{what}: the guest's memory is resident once it has written to it",
         f"{full // MiB} MiB")
    limit_kib = (full + MARGIN) // 1024
    p = daemon.virsh(["memtune", name, "--hard-limit", str(limit_kib), "--live"],
                     check=False, capture=True)
    t.ok(p.returncode == 0, f"{what}: memtune --hard-limit {limit_kib} --live", p.stderr)
    limit = group.limit()
    t.eq(limit, str(limit_kib * 1024), f"{what}: the limit is in the domain's own group")
    kills = group.oom_kills()
    for cycle in (1, 2):
        err = set_memory(name, LOW_MIB)
        t.ok(err is None, f"{what}: cycle {cycle}: the balloon inflates to "
             f"{GUEST_MIB - LOW_MIB} MiB", err)
        low = group.usage()
        t.ok(full - low >= (GUEST_MIB - LOW_MIB) * MiB * 3 // 4,
             f"{what}: cycle {cycle}: the host gets the memory back",
             f"{full // MiB} -> {low // MiB} MiB")
        err = set_memory(name, GUEST_MIB)
        t.ok(err is None, f"{what}: cycle {cycle}: the balloon deflates", err)
        state = daemon.virsh(["domstate", name], check=False, capture=True).stdout.strip()
        if not t.ok(state == "running" and guest.qemu_pid(name) == pid,
                    f"{what}: cycle {cycle}: the same QEMU process is running", state):
            return
        high = group.usage()
        print(f"# {what}: cycle {cycle}: {full // MiB} MiB resident, {low // MiB} MiB "
              f"ballooned down, {high // MiB} MiB back up; limit {limit_kib // 1024} MiB",
              flush=True)
        t.ok(high >= full - 8 * MiB and high <= limit_kib * 1024,
             f"{what}: cycle {cycle}: the guest has its memory again, within the limit",
             f"{low // MiB} -> {high // MiB} MiB, limit {limit_kib // 1024} MiB")
        t.eq(group.oom_kills(), kills, f"{what}: cycle {cycle}: no OOM kill in its group")
        t.eq(group.limit(), limit, f"{what}: cycle {cycle}: the limit is unchanged")


def main(t):
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    t0 = time.monotonic()
    shared = guest.create("mem-shared", vcpus=1, workload="balloon", memory=GUEST_MIB)
    own = guest.create("mem-own", vcpus=1, workload="balloon", memory=GUEST_MIB,
                       cputune={"shares": "2048"})
    print(f"# both guests ready after {time.monotonic() - t0:.1f} s", flush=True)
    t.ok(vcpucg.all_shared(shared), "the default domain shares the per-host group",
         vcpucg.placement_report(shared))
    t.ok(vcpucg.all_own(own), "the domain with <shares> has its own groups",
         vcpucg.placement_report(own))
    check_domain(t, shared, "shared")
    check_domain(t, own, "own groups")
    for n in (shared, own):
        daemon.virsh(["destroy", n], check=False, capture=True)


labtest.run(main)
