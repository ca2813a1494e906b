# SPDX-License-Identifier: GPL-2.0-or-later
"""The lab boots a real TCG guest through its private virtqemud, and stops clean.

Stock per-domain layout: each vCPU thread sits in its own vcpuN group below
the domain's cgroup in the cpu hierarchy, and the guest's busy loops make its
vCPU threads run.  A 'spin' guest (no OS) has vCPU threads that never block.  'tools/lab stop' then leaves no lab process and no lab
cgroup behind.
"""

import os
import time

import labtest
import vcpucg
from labtest import daemon, guest, measure
from lablib.lab import cgroupfs


def top_level_groups():
    """Top-level cgroups except the machine partition, which libvirt (or,
    for machined's scopes, systemd) creates on demand for domains."""
    out = set()
    for mnt in (m.path for m in cgroupfs.mounts()):
        for d in os.listdir(mnt):
            if os.path.isdir(os.path.join(mnt, d)) and d not in ("machine", "machine.slice"):
                out.add(os.path.join(mnt, d))
    return out


def main(t):
    daemon.stop()
    before = top_level_groups()
    daemon.start(quiet=True)
    name = guest.create("itest-boot", vcpus=2, workload="busy")
    pid = guest.qemu_pid(name)
    tids = guest.vcpu_tids(name)
    t.eq(sorted(tids), [0, 1], "QEMU runs one thread per vCPU")
    dom = vcpucg.domain_group(name)
    t.ok(dom is not None, "the domain has its own group in the cpu hierarchy")
    for idx, tid in tids.items():
        t.eq(labtest.thread_cgroup(pid, tid, "cpu"), vcpucg.vcpu_path(dom, idx),
             f"vCPU {idx} is in its per-domain cpu group")
        t.ok(tid in labtest.cgroup_tasks("cpu", vcpucg.vcpu_path(dom, idx)),
             f"vCPU {idx} is listed in that group's tasks file")
    res = measure.sample({i: (pid, tid) for i, tid in tids.items()}, 2)
    for idx, (share, steal) in res.items():
        t.ok(share + steal > 0.5, f"busy vCPU {idx} is runnable most of the time",
             f"share {share:.2f} steal {steal:.2f}")
    spin = guest.create("itest-spin", vcpus=2, workload="spin")
    spid = guest.qemu_pid(spin)
    stids = guest.vcpu_tids(spin)
    t.eq(sorted(stids), [0, 1], "a spin guest (no OS) runs one thread per vCPU")
    vol0 = {i: measure.ctxt_switches(spid, tid)[0] for i, tid in stids.items()}
    res = measure.sample({i: (spid, tid) for i, tid in stids.items()}, 2)
    for idx, (share, steal) in res.items():
        vol = measure.ctxt_switches(spid, stids[idx])[0] - vol0[idx]
        # It may wait for QEMU's big lock now and then (a few times a second
        # on a loaded host); the vCPUs of an SMP Linux guest block 20-70
        # times a second, a firmware that halts blocks far more often.
        t.ok(share + steal > 0.9 and vol <= 30,
             f"spin vCPU {idx} is a CPU hog: always runnable, rarely blocks",
             f"share {share:.2f} steal {steal:.2f}, {vol} voluntary switches in 2 s")
    dom_groups = [os.path.join(m.path, dom.lstrip("/")) for m in cgroupfs.mounts()]
    t.ok(any(os.path.isdir(g) for g in dom_groups), "the domain's cgroups exist while it runs")
    daemon.stop()
    time.sleep(0.2)
    t.eq(labtest.lab_processes(), [], "no lab process is left after tools/lab stop")
    left = [g for g in dom_groups if os.path.isdir(g)]
    t.eq(left, [], "no lab cgroup is left after tools/lab stop")
    t.eq(top_level_groups(), before, "cgroups the lab did not create are untouched")


labtest.run(main)
