# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" with systemd-machined on cgroup v2.

The per-host vCPU cgroup is not implemented for domains that machined
registers (docs/vcpu-cgroup-v2.md).  What the series does there, and what
this test holds it to: virtqemud warns once, every domain is a machine in
its own scope below machine.slice with its vCPUs in that scope's
libvirt/vcpuN groups, statistics say per-domain, live tuning works as
without the series, and the machine's scope goes away with the domain.

Runs on a test host with systemd, cgroup v2 and machined
(tools/lab testhost --variant v2-machined); skips elsewhere.
"""

import os
import subprocess

import labtest
import vcpucg
from labtest import common, daemon, guest


LOG = os.path.join(common.BUILD, "logs", "virtqemud.log")


def main(t):
    daemon.stop()
    log_start = os.path.getsize(LOG) if os.path.exists(LOG) else 0
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-md", vcpus=2, workload="idle")
    b = guest.create("vc-md2", vcpus=1, workload="idle")
    for n in (a, b):
        dom = vcpucg.domain_group(n)
        t.ok(dom is not None and dom.startswith("/machine.slice/machine-qemu")
             and dom.endswith(".scope"),
             f"{n}: the QEMU process is in a machine scope below machine.slice", dom)
        t.ok(vcpucg.all_own(n), f"{n}: its vCPUs are in the scope's own vCPU groups",
             vcpucg.placement_report(n))
        t.eq(vcpucg.domstats(n).get("cpu.vcpu_cgroup"), "per-domain",
             f"{n}: domstats says per-domain")
        listed = subprocess.run(["machinectl", "list", "--no-legend"],
                                capture_output=True, text=True).stdout
        t.ok(any(w.endswith(f"-{n}") for w in listed.split()),
             f"{n}: machinectl lists the machine", listed)
    with open(LOG, "rb") as fh:
        fh.seek(log_start)
        warned = [x for x in fh.read().decode(errors="replace").splitlines(True)
                  if "cannot be used on this host" in x]
    t.ok(len(warned) == 1 and "systemd-machined" in warned[0],
         "virtqemud warns once that per-host placement is not used with machined",
         "".join(warned))

    p = vcpucg.schedinfo(a, "vcpu_quota=50000")
    t.ok(p.returncode == 0, "live vcpu_quota works", p.stderr)
    dom = vcpucg.domain_group(a)
    t.eq(labtest.cgroup_value("cpu", vcpucg.vcpu_path(dom, 0), "cpu.cfs_quota_us"), "50000",
         "and is written to the scope's vcpu0 group")

    scope = os.path.basename(vcpucg.domain_group(b))
    daemon.virsh(["destroy", b], capture=True)
    gone = os.path.join(labtest.controller_dir("cpu"), "machine.slice", scope)
    t.ok(labtest.wait_for(lambda: not os.path.isdir(gone), 5),
         f"destroy removes the machine's scope {scope}")


if not labtest.has_machined():
    labtest.skip_all("needs systemd-machined (tools/lab testhost --variant v2-machined)")
labtest.run(main)
