# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup and the daemon: restart, switching the mode, removed group,
the administrator's slice, bad values.

- cgroup v1: restarting the daemon with the mode switched off moves
  running domains' vCPUs into their own groups, switching it on moves them
  back, without restarting the guests;
- cgroup v2: running domains keep the placement they started with across
  such a restart (it is chosen at start); domains started afterwards follow
  the new setting;
- the shared group is created on demand: removed while empty, it comes back
  with the next domain;
- with systemd-machined the slice's DisableControllers=cpu is the
  administrator's: when an override drops it, a sharing domain fails to
  start with an error naming the slice, and the slice keeps the override;
  once the administrator reverts it, domains share again;
- a bad value in qemu.conf makes the daemon refuse to start and name the
  option and the value.
"""

import os
import subprocess

import labtest
import vcpucg
from labtest import LabError, daemon, guest


def disabled_controllers(unit):
    p = subprocess.run(["systemctl", "show", "-p", "DisableControllers", "--value", unit],
                       capture_output=True, text=True)
    return p.stdout.strip()


def check_removed_group(t):
    shared_dir = labtest.controller_dir("cpu") + vcpucg.SHARED
    try:
        os.rmdir(shared_dir)
    except OSError as e:
        t.ok(False, "the empty shared group can be removed", e)
        return
    t.ok(not os.path.isdir(shared_dir), "shared group removed by the administrator")
    c = guest.create("vc-again", vcpus=1, workload="idle")
    t.ok(os.path.isdir(shared_dir), "the next domain recreates the shared group")
    t.ok(vcpucg.all_shared(c), "and its vCPU is placed there", vcpucg.placement_report(c))


def check_slice_override(t):
    """With machined the slice is systemd's, configured by the administrator."""
    slice_ = vcpucg.SHARED_SLICE
    t.eq(disabled_controllers(slice_), "cpu",
         f"{slice_} has DisableControllers=cpu from its unit file")
    p = subprocess.run(["systemctl", "set-property", "--runtime", slice_, "DisableControllers="],
                       capture_output=True, text=True)
    t.ok(p.returncode == 0, f"an administrator drops DisableControllers on {slice_}", p.stderr)
    try:
        guest.create("vc-override", vcpus=1, workload="idle")
        started, err = True, ""
    except LabError as e:
        started, err = False, str(e)
    t.ok(not started, "a sharing domain does not start in a slice that gives it cpu")
    t.ok("DisableControllers=cpu" in err and slice_ in err,
         "the error names the slice and DisableControllers=cpu", err[-600:])
    t.eq(disabled_controllers(slice_), "",
         "the administrator's override is left alone")
    p = subprocess.run(["systemctl", "revert", slice_], capture_output=True, text=True)
    t.ok(p.returncode == 0, f"systemctl revert {slice_}", p.stderr)
    c = guest.create("vc-again", vcpus=1, workload="idle")
    t.ok(vcpucg.all_shared(c), "after the revert a domain shares again",
         vcpucg.placement_report(c))


def main(t):
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-restart", vcpus=2, workload="idle")
    b = guest.create("vc-tuned", vcpus=2, workload="idle", cputune={"quota": "50000"})
    pid = guest.qemu_pid(a)
    # A vCPU quota alone: nested in the shared group on cgroup v1, its own
    # groups on v2
    capped = vcpucg.all_own if vcpucg.V2 else vcpucg.all_nested
    t.ok(vcpucg.all_shared(a) and capped(b), "initial placement follows the rule",
         vcpucg.placement_report(b))

    daemon.start(vcpu_cgroup="per-domain", quiet=True)
    t.eq(guest.qemu_pid(a), pid, "the guest kept running across the daemon restart")
    if vcpucg.V2:
        t.ok(vcpucg.all_shared(a), "cgroup v2: mode off + restart: the domain keeps its placement",
             vcpucg.placement_report(a))
        t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-host",
             "domstats reports where it is")
        c = guest.create("vc-new", vcpus=1, workload="idle")
        t.ok(vcpucg.all_own(c), "a domain started now is placed per domain",
             vcpucg.placement_report(c))
        daemon.virsh(["destroy", c], capture=True)
    else:
        t.ok(vcpucg.all_own(a), "mode off + restart: vCPUs moved into their own groups",
             vcpucg.placement_report(a))
        t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), None,
             "domstats after reconnect: no cpu.vcpu_cgroup field, as with stock libvirt")
    t.eq(labtest.cgroup_value("cpu", vcpucg.domain_group(b), "cpu.shares"),
         vcpucg.DEFAULT_SHARES, "mode off: the domain with a quota has its stock weight back")

    daemon.start(vcpu_cgroup="per-host", quiet=True)
    t.ok(vcpucg.all_shared(a), "mode on + restart: the vCPUs are in the shared group",
         vcpucg.placement_report(a))
    if vcpucg.V2:
        t.ok(vcpucg.all_own(b), "the domain with a quota stays in its own groups")
        weighed = vcpucg.domain_group(b)
        capgroup = vcpucg.vcpu_path(vcpucg.domain_group(b), 0)
    else:
        t.ok(vcpucg.all_nested(b), "the domain with a quota is nested in the shared group "
             "again", vcpucg.placement_report(b))
        weighed = vcpucg.nested_group(b)
        capgroup = f"{weighed}/vcpu0"
    t.eq(labtest.cgroup_value("cpu", capgroup, "cpu.cfs_quota_us"), "50000",
         "and keeps its quota")
    t.eq(labtest.cgroup_value("cpu", weighed, "cpu.shares"),
         str(2 * int(vcpucg.DEFAULT_SHARES)), "and weighs the default per vCPU again")
    t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-host", "domstats after reconnect")

    # Stopping a nested domain removes its group in the shared group
    nested = None if vcpucg.V2 else vcpucg.nested_group(b)
    daemon.virsh(["destroy", b], capture=True)
    if nested:
        t.ok(not os.path.isdir(labtest.controller_dir("cpu") + nested),
             "the nested group of a stopped domain is removed", nested)

    # The shared group is created on demand; with machined it is the
    # administrator's slice.
    daemon.virsh(["destroy", a], capture=True)
    if vcpucg.MACHINED:
        check_slice_override(t)
    else:
        check_removed_group(t)

    # A bad value: the daemon refuses to start and says why.
    daemon.stop()
    log = os.path.join(labtest.common.logs_dir(), "virtqemud.log")
    if os.path.exists(log):
        os.unlink(log)
    try:
        daemon.start(quiet=True, extra={"vcpu_cgroup": '"bogus"'})
        started = True
    except LabError:
        started = False
    t.ok(not started, "the daemon refuses to start with vcpu_cgroup = \"bogus\"")
    text = open(log).read() if os.path.exists(log) else ""
    t.ok("vcpu_cgroup" in text and "bogus" in text, "its log names vcpu_cgroup and the value",
         text[-600:])
    daemon.stop()


labtest.run(main)
