# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" on cgroup v1: live schedinfo moves, --config,
emulator tunables.

A live change that makes a domain's vCPU tunables diverge moves its vCPU
threads into their own groups, which carry the new limit before the move;
writing the defaults back moves them into the shared group.  --config
changes take effect at the next start.  Emulator tunables never move vCPUs.
A --live --config change whose definition cannot be saved changes
nothing: not the vCPUs' groups, not the weights, not the status XML.
On cgroup v2 placement is chosen at start and kept while a domain runs:
test_vcpu_cgroup_v2 covers live changes there.
"""

import os
import re
import subprocess

import labtest
import vcpucg
from labtest import daemon, guest


def check_config_save_fails(t, a):
    """--live --config with a configuration directory nothing can be
    written to (chattr +i): the live part is undone before it is recorded."""
    what = "--live --config whose definition cannot be saved changes nothing"
    confdir = os.path.join(daemon.lab().prefix, "etc", "libvirt", "qemu")
    status = os.path.join(daemon.lab().rundir, "qemu", f"{a}.xml")
    try:
        p = subprocess.run(["chattr", "+i", confdir], capture_output=True, text=True)
    except OSError as e:
        t.skip(what, f"no chattr here ({e.strerror}); the development host runs it")
        return
    if p.returncode != 0:
        t.skip(what, f"chattr +i {confdir} failed: {p.stderr.strip()}")
        return
    try:
        before = open(status).read()
        p = vcpucg.schedinfo(a, "cpu_shares=2048", live=True, config=True)
    finally:
        subprocess.run(["chattr", "-i", confdir], check=True)
    after = open(status).read()
    t.ok(p.returncode != 0, "--live --config fails when the definition cannot be saved",
         p.stdout)
    t.ok(vcpucg.all_shared(a), f"{what}: the vCPUs stay in the shared group",
         vcpucg.placement_report(a))
    t.eq(labtest.cgroup_value("cpu", vcpucg.domain_group(a), "cpu.shares"),
         vcpucg.DEFAULT_SHARES, f"{what}: the domain's own weight")
    t.ok(after == before, f"{what}: the status XML records no change",
         "<shares> in the status XML" if "<shares>" in after else "")
    shown = re.search(r"^cpu_shares\s*:\s*(\d+)", vcpucg.schedinfo(a, live=True).stdout, re.M)
    t.eq(shown and shown.group(1), vcpucg.DEFAULT_SHARES,
         f"{what}: schedinfo reports the weight as before")


def main(t):
    if vcpucg.V2:
        labtest.skip_all("cgroup v2 keeps placement while a domain runs (test_vcpu_cgroup_v2)")
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vc-live", vcpus=2, workload="idle", persistent=True)
    dom = vcpucg.domain_group(a)
    t.ok(vcpucg.all_shared(a), "starts in the shared group", vcpucg.placement_report(a))

    # A vCPU quota or period alone nests the vCPUs in the shared group
    # (vcpuN groups of the domain's there); <shares> and the global
    # bandwidth move them into their own groups.
    cases = [
        ("vcpu_quota=50000", "vcpu_quota=-1", "vcpu0", "cpu.cfs_quota_us", "50000", True),
        ("vcpu_period=50000", "vcpu_period=100000", "vcpu0", "cpu.cfs_period_us", "50000",
         True),
        ("cpu_shares=2048", f"cpu_shares={vcpucg.DEFAULT_SHARES}", "", "cpu.shares", "2048",
         False),
        ("global_quota=150000", "global_quota=-1", "", "cpu.cfs_quota_us", "150000", False),
    ]
    for diverge, reset, sub, knob, want, nested in cases:
        p = vcpucg.schedinfo(a, diverge)
        t.ok(p.returncode == 0, f"schedinfo --live --set {diverge} succeeds", p.stderr)
        dom = vcpucg.domain_group(a)
        if nested:
            t.ok(vcpucg.all_nested(a), f"{diverge}: vCPUs moved into groups nested in the "
                 "shared group", vcpucg.placement_report(a))
            path = f"{vcpucg.nested_group(a)}/{sub}"
            t.eq(labtest.cgroup_value("cpu", vcpucg.nested_group(a), "cpu.shares"),
                 str(2 * int(vcpucg.DEFAULT_SHARES)),
                 f"{diverge}: the nested group weighs the default per vCPU")
        else:
            t.ok(vcpucg.all_own(a), f"{diverge}: vCPUs moved into their own groups",
                 vcpucg.placement_report(a))
            # libvirt writes the global quota into a machine scope's nested
            # group, and the weight through systemd onto the scope itself
            if sub:
                path = f"{labtest.domain_sub(dom)}/{sub}"
            else:
                path = dom if knob == "cpu.shares" else labtest.domain_sub(dom)
        t.eq(labtest.cgroup_value("cpu", path, knob), want,
             f"{diverge}: {path}/{knob} holds the requested value")
        t.eq(vcpucg.domstats(a).get("cpu.vcpu_cgroup"), "per-host" if nested else "per-domain",
             f"{diverge}: domstats says where the vCPUs are weighed")
        p = vcpucg.schedinfo(a, reset)
        t.ok(p.returncode == 0, f"schedinfo --live --set {reset} succeeds", p.stderr)
        t.ok(vcpucg.all_shared(a), f"{reset}: vCPUs back in the shared group",
             vcpucg.placement_report(a))
        t.ok(not vcpucg.nested_exists(a), f"{reset}: no group of the domain is left in "
             "the shared group")

    p = vcpucg.schedinfo(a, "emulator_quota=50000")
    t.ok(p.returncode == 0, "emulator_quota can be set", p.stderr)
    t.ok(vcpucg.all_shared(a), "emulator tunables do not move vCPUs")
    dom = vcpucg.domain_group(a)
    t.eq(labtest.cgroup_value("cpu", vcpucg.emulator_path(dom), "cpu.cfs_quota_us"), "50000",
         "the emulator group holds its quota")
    vcpucg.schedinfo(a, "emulator_quota=-1")
    t.ok(vcpucg.all_shared(a), "emulator_quota=-1: back in the shared group",
         vcpucg.placement_report(a))

    p = vcpucg.schedinfo(a, "vcpu_quota=500", live=True)
    t.ok(p.returncode != 0, "an out-of-range quota is refused", p.stdout)
    t.ok(vcpucg.all_shared(a), "a refused change leaves the vCPUs where they were")

    check_config_save_fails(t, a)

    p = vcpucg.schedinfo(a, "cpu_shares=4096", live=False, config=True)
    t.ok(p.returncode == 0, "schedinfo --config succeeds", p.stderr)
    t.ok(vcpucg.all_shared(a), "--config does not move the running domain")
    daemon.virsh(["destroy", a], capture=True)
    daemon.virsh(["start", a], capture=True)
    guest.wait_console(a, "unsteal-guest: ready")
    t.ok(vcpucg.all_own(a), "--config shares=4096: own groups at the next start",
         vcpucg.placement_report(a))
    vcpucg.schedinfo(a, f"cpu_shares={vcpucg.DEFAULT_SHARES}", live=False, config=True)
    daemon.virsh(["destroy", a], capture=True)
    daemon.virsh(["start", a], capture=True)
    guest.wait_console(a, "unsteal-guest: ready")
    t.ok(vcpucg.all_shared(a), "--config shares back at the default: shared at the next start",
         vcpucg.placement_report(a))


labtest.run(main)
