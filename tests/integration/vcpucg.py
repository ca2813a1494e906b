# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the per-host vCPU cgroup integration tests.

Placement is read from /proc/PID/task/TID/cgroup and the cgroup files,
never from libvirt.
"""

import glob
import os
import subprocess

import labtest
from labtest import daemon, guest

# On cgroup v2 the shared group is a partition that holds whole domain
# groups and does not enable cpu for them (docs/vcpu-cgroup-v2.md); the
# default cpu.weight is 100 where v1's cpu.shares is 1024.  Where
# systemd-machined registers the domains, the partition is a systemd slice
# and every domain group is a machine's scope.
V2 = labtest.is_v2("cpu")
MACHINED = V2 and labtest.has_machined()
SHARED = "/machine.slice/machine-vcpus.slice" if MACHINED else "/machine/vcpus.partition"
# Where the sharing domains' groups are: below the shared partition, or,
# with machined, in the slice below it that disables cpu for its machines
# (systemd sets no weight on a slice with DisableControllers=cpu)
SHARED_SLICE = "machine-vcpus-shared.slice"
DOMAINS = SHARED + "/" + SHARED_SLICE if MACHINED else SHARED
DEFAULT_SHARES = "100" if V2 else "1024"


def limits_group(dom):
    """Where libvirt writes a domain's own memory limits on cgroup v2: the
    nested 'libvirt' group of a machine's scope (machined), else DOM."""
    return labtest.domain_sub(dom, "memory") if MACHINED else dom


def domain_group(name):
    """The domain's own group in the cpu hierarchy (NAME or qemu-ID-NAME).

    On cgroup v2 the group the QEMU process is in: below /machine or below
    the shared partition."""
    if V2:
        try:
            pid = guest.qemu_pid(name)
        except Exception:
            pid = None
        if pid:
            path = labtest.thread_cgroup(pid, pid, "cpu")
            if path:
                for tail in ("/emulator", "/libvirt"):
                    if path.endswith(tail):
                        path = path[:-len(tail)]
                return path
    cpu = labtest.controller_dir("cpu")
    for cand in glob.glob(f"{cpu}/machine/*{glob.escape(name)}.libvirt-qemu"):
        base = os.path.basename(cand)
        if base == f"{name}.libvirt-qemu" or base.endswith(f"-{name}.libvirt-qemu"):
            return "/machine/" + base
    return None


def shared_partition_enables_cpu():
    """cgroup v2: whether the shared partition enables cpu for its children
    (it must not: then all its domains are one scheduling entity)."""
    path = os.path.join(labtest.controller_dir("cpu"), DOMAINS.lstrip("/"),
                        "cgroup.subtree_control")
    with open(path) as fh:
        return "cpu" in fh.read().split()


def shared_threads():
    """Threads scheduled in the shared group: its tasks on v1, every thread
    in its subtree on v2."""
    if not V2:
        return labtest.cgroup_tasks("cpu", SHARED)
    top = os.path.join(labtest.controller_dir("cpu"), SHARED.lstrip("/"))
    out = set()
    for d, _, _ in os.walk(top):
        out |= labtest.cgroup_tasks("cpu", "/" + os.path.relpath(d, labtest.controller_dir("cpu")))
    return out


def vcpu_path(dom, i, controller="cpu"):
    """The domain's own group of vCPU i (below 'libvirt' on cgroup v2)."""
    return f"{labtest.domain_sub(dom, controller)}/vcpu{i}"


def emulator_path(dom):
    return f"{labtest.domain_sub(dom)}/emulator"


def vcpu_groups(name, controller="cpu"):
    """{vcpu index: cgroup path in `controller`'s hierarchy}."""
    pid = guest.qemu_pid(name)
    return {i: labtest.thread_cgroup(pid, tid, controller)
            for i, tid in guest.vcpu_tids(name).items()}


def all_shared(name):
    g = vcpu_groups(name)
    if not V2:
        return bool(g) and all(p == SHARED for p in g.values())
    dom = domain_group(name)
    return (bool(g) and dom is not None and os.path.dirname(dom) == DOMAINS
            and not shared_partition_enables_cpu()
            and all(p == vcpu_path(dom, i) for i, p in g.items()))


def nested_group(name):
    """cgroup v1: the domain's group inside the shared group, where the
    vCPUs of a domain whose only tunables are a vCPU period or quota are
    (named as its own group is); None on v2, where nothing is nested."""
    dom = domain_group(name)
    if V2 or dom is None:
        return None
    return f"{SHARED}/{os.path.basename(dom)}"


def nested_exists(name):
    nested = nested_group(name)
    return nested is not None and os.path.isdir(
        os.path.join(labtest.controller_dir("cpu"), nested.lstrip("/")))


def all_nested(name):
    """cgroup v1: every vCPU thread is in its vcpuN group nested in the
    shared group."""
    nested = nested_group(name)
    g = vcpu_groups(name)
    return (nested is not None and bool(g)
            and all(p == f"{nested}/vcpu{i}" for i, p in g.items()))


def all_own(name):
    dom = domain_group(name)
    g = vcpu_groups(name)
    if V2 and (dom is None or os.path.dirname(dom) == DOMAINS):
        return False
    return bool(g) and dom is not None and all(p == vcpu_path(dom, i) for i, p in g.items())


def domstats(name, group="--cpu-total"):
    p = daemon.virsh(["domstats", group, name], capture=True)
    out = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def schedinfo(name, *settings, live=True, config=False):
    args = ["schedinfo", name]
    if live:
        args.append("--live")
    if config:
        args.append("--config")
    for s in settings:
        args += ["--set", s]
    return daemon.virsh(args, check=False, capture=True)


def machine(name):
    """systemd-machined's name for the domain's machine, or None."""
    listed = subprocess.run(["machinectl", "list", "--no-legend"],
                            capture_output=True, text=True).stdout
    return next((w for w in listed.split() if w.endswith(f"-{name}")), None)


def machine_unit(name):
    """The unit machined has for the domain's machine, or None."""
    m = machine(name)
    if m is None:
        return None
    return subprocess.run(["machinectl", "show", "-p", "Unit", "--value", m],
                          capture_output=True, text=True).stdout.strip()


def placement_report(name):
    return "\n".join(f"vcpu{i}: {p}" for i, p in vcpu_groups(name).items())
