# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the per-host vCPU cgroup integration tests.

Placement is read from /proc/PID/task/TID/cgroup and the cgroup files,
never from libvirt.
"""

import glob
import os

import labtest
from labtest import daemon, guest

SHARED = "/machine/vcpus.partition"


def domain_group(name):
    """The domain's own group in the cpu hierarchy (NAME or qemu-ID-NAME)."""
    cpu = labtest.controller_dir("cpu")
    for cand in glob.glob(f"{cpu}/machine/*{glob.escape(name)}.libvirt-qemu"):
        base = os.path.basename(cand)
        if base == f"{name}.libvirt-qemu" or base.endswith(f"-{name}.libvirt-qemu"):
            return "/machine/" + base
    return None


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
    return bool(g) and all(p == SHARED for p in g.values())


def all_own(name):
    dom = domain_group(name)
    g = vcpu_groups(name)
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


def placement_report(name):
    return "\n".join(f"vcpu{i}: {p}" for i, p in vcpu_groups(name).items())
