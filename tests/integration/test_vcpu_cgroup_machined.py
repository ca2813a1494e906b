# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" with systemd-machined on cgroup v2.

With machined every domain is a machine in a systemd scope, and a scope
cannot change its slice.  The shared partition is the slice
machine-vcpus.slice with DisableControllers=cpu; a live move starts a new
scope for the QEMU process in the other slice and registers the machine
again (docs/vcpu-cgroup-v2.md).  This test holds systemd, machined and
libvirt to one view of each domain through those moves:

- at start each domain is a machine whose scope is in the vCPU slice,
  which does not enable cpu for its scopes; domstats says per-host and
  the daemon does not warn;
- a live quota moves the domain into a scope in machine.slice under its
  own name; machined, systemd and the domain's vCPU groups agree, no
  temporary scope is left, and the quota is in the new scope's vcpu0
  group; the reset moves it back the same way;
- a daemon restart reconnects to a moved domain;
- destroy after moves removes the scope and machined forgets the machine.

Runs on a test host with systemd, cgroup v2 and machined
(tools/lab testhost --variant v2-machined); skips elsewhere.
"""

import os
import subprocess

import labtest
import vcpucg
from labtest import common, daemon, guest


LOG = os.path.join(common.BUILD, "logs", "virtqemud.log")


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
    t.eq(run("systemctl", "list-units", "--all", "--plain", "--no-legend",
             "libvirt-qemu-move-*"), "", f"{what}: no temporary scope is left")
    return dom


def main(t):
    daemon.stop()
    log_start = os.path.getsize(LOG) if os.path.exists(LOG) else 0
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-md", vcpus=2, workload="idle")
    b = guest.create("vc-md2", vcpus=1, workload="idle")
    for n in (a, b):
        check_machine(t, n, vcpucg.SHARED_SLICE, "start")
        t.ok(vcpucg.all_shared(n), f"{n}: its vCPUs are in its scope, below the vCPU slice",
             vcpucg.placement_report(n))
        t.eq(vcpucg.domstats(n).get("cpu.vcpu_cgroup"), "per-host",
             f"{n}: domstats says per-host")
    t.ok(not vcpucg.shared_partition_enables_cpu(),
         "the vCPU slice does not enable cpu for its scopes")
    with open(LOG, "rb") as fh:
        fh.seek(log_start)
        warned = [x for x in fh.read().decode(errors="replace").splitlines(True)
                  if "cannot be used on this host" in x]
    t.eq(warned, [], "virtqemud does not warn about per-host placement")

    pid = guest.qemu_pid(a)
    p = vcpucg.schedinfo(a, "vcpu_quota=50000")
    t.ok(p.returncode == 0, "live vcpu_quota works", p.stderr)
    dom = check_machine(t, a, "machine.slice", "vcpu_quota")
    t.ok(vcpucg.all_own(a), "vcpu_quota: its vCPUs are in the new scope's groups",
         vcpucg.placement_report(a))
    t.eq(labtest.cgroup_value("cpu", vcpucg.vcpu_path(dom, 0), "cpu.cfs_quota_us"), "50000",
         "the quota is in the new scope's vcpu0 group")
    t.eq(guest.qemu_pid(a), pid, "the guest kept running")

    p = vcpucg.schedinfo(a, "vcpu_quota=-1")
    t.ok(p.returncode == 0, "live vcpu_quota=-1 works", p.stderr)
    check_machine(t, a, vcpucg.SHARED_SLICE, "vcpu_quota=-1")
    t.ok(vcpucg.all_shared(a), "vcpu_quota=-1: back below the vCPU slice",
         vcpucg.placement_report(a))

    # Moved out again, the daemon restarts and finds it where it is.
    vcpucg.schedinfo(a, "vcpu_quota=50000")
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    check_machine(t, a, "machine.slice", "daemon restart")
    t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-domain",
         "after the restart domstats says per-domain")
    p = vcpucg.schedinfo(a, "vcpu_quota=-1")
    t.ok(p.returncode == 0 and vcpucg.all_shared(a),
         "after the restart the reset moves it back", p.stderr + vcpucg.placement_report(a))

    for n in (a, b):
        scope = os.path.basename(vcpucg.domain_group(n))
        daemon.virsh(["destroy", n], capture=True)
        gone = os.path.join(labtest.controller_dir("cpu"), vcpucg.SHARED.lstrip("/"), scope)
        t.ok(labtest.wait_for(lambda: not os.path.isdir(gone), 5),
             f"destroy removes {n}'s scope {scope}")
        t.eq(vcpucg.machine(n), None, f"and machined forgets {n}")


if not labtest.has_machined():
    labtest.skip_all("needs systemd-machined (tools/lab testhost --variant v2-machined)")
labtest.run(main)
