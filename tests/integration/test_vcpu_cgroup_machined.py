# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" with systemd-machined on cgroup v2.

With machined every domain is a machine in a systemd scope, and systemd
owns the tree outside the scopes.  The shared partition is the slice
machine-vcpus.slice; the machines are in machine-vcpus-shared.slice below
it, whose DisableControllers=cpu comes from the unit file libvirt installs:

- at start a sharing domain is a machine whose scope is in the vCPU slice,
  which does not enable cpu for its scopes; machined, systemd and the
  cgroup tree agree on it; domstats says per-host and the daemon does not
  warn; machine-vcpus.slice's CPUWeight is 100 per vCPU below it;
- a domain with a quota is a machine in machine.slice, as with stock
  libvirt, with its quota, and weighs 100 per vCPU;
- a live change that would move a machine to the other slice is refused,
  the machine stays where it is, and machined keeps it;
- a daemon restart finds each machine where it is and keeps the weights;
- destroy removes the scope and machined forgets the machine.

Runs on a test host with systemd, cgroup v2 and machined
(tools/lab testhost --variant v2-machined); skips elsewhere.
"""

import os
import subprocess

import labtest
import vcpucg
from labtest import common, daemon, guest


LOG = os.path.join(common.logs_dir(), "virtqemud.log")
# The slice that carries the weight of the machines in vcpucg.SHARED_SLICE
WEIGHT_SLICE = "machine-vcpus.slice"


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True).stdout.strip()


def check_machine(t, n, slice_, what):
    """machined, systemd and the cgroup tree agree on where domain n is."""
    dom = vcpucg.domain_group(n)
    scope = os.path.basename(dom) if dom else None
    t.ok(dom is not None and os.path.basename(os.path.dirname(dom)) == slice_
         and scope.startswith("machine-qemu") and scope.endswith(".scope"),
         f"{what}: {n}'s QEMU process is in a machine scope in {slice_}", dom)
    t.eq(vcpucg.machine_unit(n), scope, f"{what}: machined has that scope as {n}'s unit")
    t.eq(run("systemctl", "show", "-p", "Slice", "--value", scope or "none"), slice_,
         f"{what}: systemd has the scope in {slice_}")
    return dom


def main(t):
    daemon.stop()
    log_start = os.path.getsize(LOG) if os.path.exists(LOG) else 0
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-md", vcpus=2, workload="idle")
    b = guest.create("vc-md2", vcpus=1, workload="idle")
    c = guest.create("vc-mdq", vcpus=2, workload="idle", cputune={"quota": "50000"})
    for n in (a, b):
        check_machine(t, n, vcpucg.SHARED_SLICE, "start")
        t.ok(vcpucg.all_shared(n), f"{n}: its vCPUs are in its scope, below the vCPU slice",
             vcpucg.placement_report(n))
        t.eq(vcpucg.domstats(n).get("cpu.vcpu_cgroup"), "per-host",
             f"{n}: domstats says per-host")
    t.ok(not vcpucg.shared_partition_enables_cpu(),
         "the vCPU slice does not enable cpu for its scopes")
    t.eq(run("systemctl", "show", "-p", "CPUWeight", "--value", WEIGHT_SLICE), "300",
         f"{WEIGHT_SLICE}'s CPUWeight is 100 per vCPU below it")
    with open(LOG, "rb") as fh:
        fh.seek(log_start)
        warned = [x for x in fh.read().decode(errors="replace").splitlines(True)
                  if "cannot be used on this host" in x or "per-host" in x and "error" in x]
    t.eq(warned, [], "the daemon neither warns nor errs about per-host placement")

    dom = check_machine(t, c, "machine.slice", "quota")
    t.ok(vcpucg.all_own(c), "the domain with a quota has its own groups",
         vcpucg.placement_report(c))
    t.eq(labtest.cgroup_value("cpu", vcpucg.vcpu_path(dom, 0), "cpu.cfs_quota_us"), "50000",
         "its quota is in its scope's vcpu0 group")
    t.eq(run("systemctl", "show", "-p", "CPUWeight", "--value", os.path.basename(dom)), "200",
         "its scope's CPUWeight is 100 per vCPU")

    pid = guest.qemu_pid(a)
    p = vcpucg.schedinfo(a, "vcpu_quota=50000")
    t.ok(p.returncode != 0 and "--config" in p.stderr,
         "a live quota on a machine in the vCPU slice is refused", p.stdout + p.stderr)
    check_machine(t, a, vcpucg.SHARED_SLICE, "refused quota")
    t.eq(guest.qemu_pid(a), pid, "the guest kept running")

    daemon.start(vcpu_cgroup="per-host", quiet=True)
    check_machine(t, a, vcpucg.SHARED_SLICE, "daemon restart")
    check_machine(t, c, "machine.slice", "daemon restart")
    t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-host",
         "after the restart domstats says per-host")
    t.eq(vcpucg.domstats(c).get("cpu.vcpu_cgroup"), "per-domain",
         "and per-domain for the domain with a quota")
    t.eq(run("systemctl", "show", "-p", "CPUWeight", "--value", WEIGHT_SLICE), "300",
         f"{WEIGHT_SLICE} keeps its weight")

    for n in (a, b, c):
        dom = vcpucg.domain_group(n)
        scope = os.path.basename(dom)
        daemon.virsh(["destroy", n], capture=True)
        gone = os.path.join(labtest.controller_dir("cpu"), dom.lstrip("/"))
        t.ok(labtest.wait_for(lambda: not os.path.isdir(gone), 5),
             f"destroy removes {n}'s scope {scope}")
        t.eq(vcpucg.machine(n), None, f"and machined forgets {n}")


if not labtest.has_machined():
    labtest.skip_all("needs systemd-machined (tools/lab testhost --variant v2-machined)")
labtest.run(main)
