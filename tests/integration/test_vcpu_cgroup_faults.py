# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" when a cgroup write fails, with the real daemon.

The daemon runs with tests/integration/cgroupfault.c preloaded, which makes
an open for writing of a cgroup file fail with EIO while the test names the
file, and an rmdir of a domain's groups fail with EBUSY for a while, as
the kernel does while the threads of a killed QEMU exit.

- A vCPU hotplug that QEMU completed is not an error because the per-host
  group's weight cannot be written: the vCPU is placed, the failure is
  logged, and the next change of weights writes the weight that counts the
  new vCPU.
- cgroup v1: a domain whose vCPUs are nested in the per-host group leaves
  no group behind when its groups are busy as it stops: the nested group
  is removed after the retries that wait for the domain's threads, not
  before them.
"""

import os
import shutil
import subprocess

import labtest
import vcpucg
from labtest import daemon, guest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cgroupfault.c")
WEIGHT_FILE = "cpu.weight" if vcpucg.V2 else "cpu.shares"
PER_VCPU = int(vcpucg.DEFAULT_SHARES)
# How long a stopping domain's groups refuse rmdir: qemuProcessStop retries
# the removal 5 times, 200 ms apart, so they are removed on the third or
# fourth try, and a removal before those retries meets the EBUSY.  A slower
# machine only lengthens the retries' sleeps, so the groups still go.
BUSY_MS = 500


def build_injector(where):
    so = os.path.join(where, "cgroupfault.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-o", so, SRC, "-ldl", "-lpthread"], check=True, capture_output=True, text=True)
    return so


def shared_weight():
    return int(labtest.cgroup_value("cpu", vcpucg.SHARED, WEIGHT_FILE))


def warnings_since(since):
    return [message for _, _, message in labtest.daemon_log_messages(since, ("warning",))]


def check_stop_busy(t, busy_ctl):
    """A nested domain stopped while its groups are busy for BUSY_MS."""
    c = guest.create("vf-c", vcpus=1, workload="idle", cputune={"quota": "50000"})
    t.ok(vcpucg.all_nested(c), "a domain with a vCPU quota has its vCPU nested in the "
         "shared group", vcpucg.placement_report(c))
    cpu_root = labtest.controller_dir("cpu")
    nested = os.path.join(cpu_root, vcpucg.nested_group(c).lstrip("/"))
    own = vcpucg.domain_group(c)
    since = labtest.daemon_log_end()
    with open(busy_ctl, "w") as fh:
        fh.write(f"{BUSY_MS} {os.path.basename(own)}")
    try:
        daemon.virsh(["destroy", c], capture=True)
    finally:
        open(busy_ctl, "w").close()
    errors = [m for _, _, m in labtest.daemon_log_messages(since, ("error",))]
    t.ok(any("Unable to remove" in m for m in errors),
         "the injected EBUSY was met: the daemon logged a group it could not remove yet",
         "\n".join(errors[-5:]))
    t.ok(not os.path.isdir(nested),
         "the nested group is removed once the domain's threads are gone", nested)
    t.ok(not os.path.isdir(os.path.join(cpu_root, own.lstrip("/"))),
         "the domain's own group is removed after the retries", own)
    left = [w for w in warnings_since(since) if "Unable to remove" in w
            or "Failed to remove cgroup" in w]
    t.ok(not left, "no group is reported left behind", "\n".join(left))


def main(t):
    if vcpucg.MACHINED:
        labtest.skip_all("with systemd-machined the partition's weight is set over D-Bus, "
                         "which the injector does not reach")
    if not shutil.which("gcc"):
        labtest.skip_all("no gcc to build the fault injector (cgroupfault.c)")
    daemon.stop()
    where = daemon.lab().dir
    os.makedirs(where, exist_ok=True)
    so = build_injector(where)
    ctl = os.path.join(where, "cgroupfault.ctl")
    busy_ctl = os.path.join(where, "cgroupbusy.ctl")
    open(ctl, "w").close()
    open(busy_ctl, "w").close()
    daemon.start(vcpu_cgroup="per-host", quiet=True,
                 daemon_env={"LD_PRELOAD": so, "UNSTEAL_CGROUP_FAULT": ctl,
                             "UNSTEAL_CGROUP_BUSY": busy_ctl})

    a = guest.create("vf-a", vcpus=1, workload="idle", max_vcpus=2)
    t.ok(vcpucg.all_shared(a), "a default domain's vCPU is in the shared group",
         vcpucg.placement_report(a))
    t.eq(shared_weight(), PER_VCPU, "the shared group weighs one vCPU")

    since = labtest.daemon_log_end()
    with open(ctl, "w") as fh:
        fh.write(f"{os.path.basename(vcpucg.SHARED)}/{WEIGHT_FILE}")
    try:
        p = daemon.virsh(["setvcpus", a, "2", "--live"], check=False, capture=True)
    finally:
        open(ctl, "w").close()
    t.ok(p.returncode == 0,
         "a vCPU hotplug that completed succeeds though the shared group's weight "
         "cannot be written", p.stderr)
    t.eq(len(guest.vcpu_tids(a)), 2, "QEMU has a thread for the new vCPU")
    t.ok(vcpucg.all_shared(a), "the new vCPU is in the shared group",
         vcpucg.placement_report(a))
    t.eq(shared_weight(), PER_VCPU, "the injected fault kept the old weight")
    logged = [w for w in warnings_since(since) if "Unable to weigh the vCPUs" in w]
    t.ok(logged, "the daemon logs the weight it could not write",
         "\n".join(warnings_since(since)[-5:]))

    b = guest.create("vf-b", vcpus=1, workload="idle")
    t.eq(shared_weight(), 3 * PER_VCPU,
         "the next change of weights counts the hot-plugged vCPU (three vCPUs)")
    daemon.virsh(["destroy", b], capture=True)
    daemon.virsh(["destroy", a], capture=True)

    if vcpucg.V2:
        t.skip("a nested domain stopped while its groups are busy",
               "nothing is nested on cgroup v2")
    else:
        check_stop_busy(t, busy_ctl)


labtest.run(main)
