# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup and the daemon: restart, live toggling, removed group, bad values.

- restarting virtqemud with the tunable switched off moves running domains'
  vCPUs into their own groups, switching it on moves them back, without
  restarting the guests;
- the shared group is created on demand: removed while empty, it comes back
  with the next domain; with systemd-machined, where the group is a slice
  systemd owns, a reverted slice gets its DisableControllers=cpu back;
- bad values in qemu.conf make the daemon refuse to start and name the
  option and the value.
"""

import os
import subprocess

import labtest
import vcpucg
from labtest import LabError, daemon, guest


def disabled_controllers(unit):
    p = subprocess.run(["systemctl", "show", "-p", "DisableControllers", unit],
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


def check_slice_revert(t):
    """With machined systemd owns the slice: an administrator's revert drops
    the runtime DisableControllers=cpu, and the next domain sets it again."""
    p = subprocess.run(["systemctl", "revert", vcpucg.SHARED_SLICE],
                       capture_output=True, text=True)
    t.ok(p.returncode == 0, f"systemctl revert {vcpucg.SHARED_SLICE}", p.stderr)
    t.eq(disabled_controllers(vcpucg.SHARED_SLICE), "DisableControllers=",
         "the revert dropped DisableControllers")
    c = guest.create("vc-again", vcpus=1, workload="idle")
    t.eq(disabled_controllers(vcpucg.SHARED_SLICE), "DisableControllers=cpu",
         "the next domain sets it again")
    t.ok(vcpucg.all_shared(c), "and its vCPU is placed in the slice without cpu",
         vcpucg.placement_report(c))


def main(t):
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-restart", vcpus=2, workload="idle")
    b = guest.create("vc-tuned", vcpus=1, workload="idle", cputune={"quota": "50000"})
    pid = guest.qemu_pid(a)
    t.ok(vcpucg.all_shared(a) and vcpucg.all_own(b), "initial placement follows the rule")

    daemon.start(vcpu_cgroup="per-domain", quiet=True)
    t.eq(guest.qemu_pid(a), pid, "the guest kept running across the daemon restart")
    t.ok(vcpucg.all_own(a), "tunable off + restart: vCPUs moved into their own groups",
         vcpucg.placement_report(a))
    t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-domain", "domstats after reconnect")

    daemon.start(vcpu_cgroup="per-host", quiet=True)
    t.ok(vcpucg.all_shared(a), "tunable on + restart: vCPUs moved back to the shared group",
         vcpucg.placement_report(a))
    t.ok(vcpucg.all_own(b), "the domain with a quota stays in its own groups")
    t.eq(labtest.cgroup_value("cpu", vcpucg.vcpu_path(vcpucg.domain_group(b), 0), "cpu.cfs_quota_us"),
         "50000", "and keeps its quota")
    t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-host", "domstats after reconnect")

    # Removed shared group comes back on demand.
    daemon.virsh(["destroy", a], capture=True)
    if vcpucg.MACHINED:
        check_slice_revert(t)
    else:
        check_removed_group(t)

    # Bad values: the daemon refuses to start and says why.
    daemon.stop()
    log = os.path.join(labtest.daemon.BUILD, "logs", "virtqemud.log")
    for extra, words in [
        ({"vcpu_cgroup": '"bogus"'}, ["vcpu_cgroup", "bogus"]),
        ({"vcpu_cgroup_partition": '"machine/vcpus"'}, ["vcpu_cgroup_partition", "machine/vcpus"]),
        ({"vcpu_cgroup_partition": '"/machine/../x"'}, ["vcpu_cgroup_partition", "/machine/../x"]),
    ]:
        if os.path.exists(log):
            os.unlink(log)
        try:
            daemon.start(quiet=True, extra=extra)
            started = True
        except LabError:
            started = False
        t.ok(not started, f"the daemon refuses to start with {extra}")
        text = open(log).read() if os.path.exists(log) else ""
        t.ok(all(w in text for w in words), f"its log names {words[0]} and the value",
             text[-600:])
        daemon.stop()


labtest.run(main)
