# SPDX-License-Identifier: GPL-2.0-or-later
"""The cgroup layouts of tools/lab bench host, on cgroup v1 or v2.

bench host places synthetic domains (benchsched.Domain: one process per
domain, one thread per vCPU) as libvirt places a domain's threads, in a
subtree of its own, BENCH_GROUP, below the root of the cpu hierarchy:

  cgroup v1 (the hierarchy with cpu):
    machine/NAME.libvirt-qemu/{emulator,vcpuN}   a domain's own groups
    machine/vcpus.partition                      the shared group, 1024 per vCPU in it
    machine/vcpus.partition/NAME.libvirt-qemu/vcpuN   a capped domain's vCPUs, nested
  cgroup v2 (cpu enabled at the root):
    machine/NAME.libvirt-qemu/{emulator,vcpuN}   threaded groups, cpu enabled
    machine/vcpus.partition/NAME.libvirt-qemu    a sharing domain's whole group,
                                                 below a partition without cpu,
                                                 weighing 100 per vCPU below it

The three layouts (LAYOUTS) differ in where the vCPU threads go and what
the groups weigh:

  per-domain         stock libvirt: each domain in its own groups, weighing
                     the default (1024 on v1, 100 on v2)
  per-domain-scaled  the same groups, each domain weighing the default per vCPU
  per-host           vcpu_cgroup = "per-host": the vCPUs of every domain
                     without tuning share the partition; a domain with a
                     vCPU cap is nested on v1 (its vcpuN groups, holding
                     the cap, in a group of its own inside the partition,
                     weighing the default per vCPU; its emulator stays in
                     its own group) and keeps its own groups on v2,
                     weighing the default per vCPU, a sibling of the
                     partition (as the libvirt series place such a domain)

A domain's cap (Domain.cap, % of a CPU per vCPU) is its vcpu_quota: on
each vcpuN group in every layout.  Nothing outside BENCH_GROUP is written
(but for a task left in it, which teardown() moves to the root);
teardown() removes exactly the groups setup() made.
"""

import os

from ..common import LabError, warn
from ..lab import cgroupfs

BENCH_GROUP = "unsteal-bench-host"
LAYOUTS = ("per-domain", "per-domain-scaled", "per-host")
PERIOD_US = 100000
# The weight of BENCH_GROUP against the rest of the host: high, so that
# other work disturbs the comparison less (recorded in the results)
TOP_WEIGHT = {"v1": 10240, "v2": 1000}
# The kernel's bounds of cpu.shares and cpu.weight
MAX_WEIGHT = {"v1": 262144, "v2": 10000}


def _write(path, value):
    with open(path, "w") as fh:
        fh.write(str(value))


def find():
    """('v1', mount) or ('v2', mount) of the cpu controller; refuses a host
    without one, or a v2 host whose root does not enable cpu for its
    children (bench host does not change the host's own groups)."""
    mount = cgroupfs.v1_hierarchy("cpu")
    if mount:
        return "v1", mount
    v2 = next((m.path for m in cgroupfs.mounts() if m.fstype == "cgroup2"), None)
    if v2 is None:
        raise LabError("bench host: this host mounts no cgroup hierarchy with the cpu "
                       "controller (no v1 cpu hierarchy, no cgroup2 mount)")
    try:
        with open(os.path.join(v2, "cgroup.subtree_control")) as fh:
            enabled = fh.read().split()
    except OSError as e:
        raise LabError(f"bench host: cannot read {v2}/cgroup.subtree_control: {e}")
    if "cpu" not in enabled:
        raise LabError(f"bench host: the cgroup v2 root {v2} does not enable the cpu "
                       "controller for its children (cgroup.subtree_control: "
                       f"{' '.join(enabled) or 'empty'}); libvirt needs it too: enable it "
                       f"(echo +cpu > {v2}/cgroup.subtree_control) and run again")
    return "v2", v2


class Layout:
    """The benchmark's subtree on one hierarchy; version 'v1' or 'v2'."""

    def __init__(self, version, mount):
        self.version, self.mount = version, mount
        self.root = os.path.join(mount, BENCH_GROUP)
        self.made = []
        self.default = 1024 if version == "v1" else 100

    def path(self, rel=""):
        return os.path.join(self.root, rel) if rel else self.root

    def _mkdir(self, rel, threaded=False):
        path = self.path(rel)
        os.mkdir(path)
        self.made.append(path)
        if threaded:
            _write(os.path.join(path, "cgroup.type"), "threaded")
        return path

    def nested(self, d, layout):
        """Whether d's vCPUs sit in a group of d's own inside the partition:
        cgroup v1, per-host, a domain whose only tuning is a vCPU cap (the
        series nests it there, holding the cap)."""
        return layout == "per-host" and bool(d.cap) and self.version == "v1"

    def shares_partition(self, d, layout):
        """Whether domain d's vCPUs are scheduled in the partition in layout."""
        return layout == "per-host" and (not d.cap or self.version == "v1")

    def setup(self, domains):
        if os.path.isdir(self.root):
            raise LabError(f"bench host: {self.root} exists: a benchmark is running, or an "
                           "earlier one was killed; remove it (rmdir, deepest first) once it "
                           "holds no tasks")
        v2 = self.version == "v2"
        try:
            self._mkdir("")
            self.weight("", TOP_WEIGHT[self.version])
            self._mkdir("machine")
            if v2:
                _write(self.path("cgroup.subtree_control"), "+cpu")
                _write(self.path("machine/cgroup.subtree_control"), "+cpu")
            self._mkdir("machine/vcpus.partition")
            for d in domains:
                own = f"machine/{d.name}.libvirt-qemu"
                inner = f"machine/vcpus.partition/{d.name}.libvirt-qemu"
                self._mkdir(own)
                if v2:
                    _write(self.path(f"{own}/cgroup.subtree_control"), "+cpu")
                    self._mkdir(inner)
                elif d.cap:
                    self._mkdir(inner)
                self._mkdir(f"{own}/emulator", threaded=v2)
                for i in range(d.vcpus):
                    self._mkdir(f"{own}/vcpu{i}", threaded=v2)
                    if d.cap:
                        self.cap(f"{own}/vcpu{i}", d.cap)
                        if not v2:
                            self._mkdir(f"{inner}/vcpu{i}")
                            self.cap(f"{inner}/vcpu{i}", d.cap)
        except OSError as e:
            self.teardown()
            raise LabError(f"bench host: cannot build its groups in {self.root}: {e}")

    def weight(self, rel, value):
        name = "cpu.shares" if self.version == "v1" else "cpu.weight"
        _write(os.path.join(self.path(rel), name), value)

    def cap(self, rel, pct):
        quota = int(PERIOD_US * pct / 100)
        if self.version == "v1":
            _write(os.path.join(self.path(rel), "cpu.cfs_period_us"), PERIOD_US)
            _write(os.path.join(self.path(rel), "cpu.cfs_quota_us"), quota)
        else:
            _write(os.path.join(self.path(rel), "cpu.max"), f"{quota} {PERIOD_US}")

    def expected(self, d, i, layout):
        """The cgroup of d's vCPU i in layout, as /proc/PID/task/TID/cgroup names it."""
        base = f"/{BENCH_GROUP}/machine"
        if self.nested(d, layout):
            return f"{base}/vcpus.partition/{d.name}.libvirt-qemu/vcpu{i}"
        if self.shares_partition(d, layout):
            return (f"{base}/vcpus.partition" if self.version == "v1"
                    else f"{base}/vcpus.partition/{d.name}.libvirt-qemu")
        return f"{base}/{d.name}.libvirt-qemu/vcpu{i}"

    def weights(self, domains, layout):
        """{group: weight} of layout, as the series sets them: a default
        domain the default, per vCPU when scaled; the partition the default
        per vCPU scheduled in it; a capped domain per vCPU, in its own group
        beside the partition (v2) or in its group inside it (v1).  Past the
        kernel's maximum every weight is scaled down alike, as the series
        does (at least 2 on v1, 1 on v2)."""
        w = {}
        in_partition = 0
        for d in domains:
            own = f"machine/{d.name}.libvirt-qemu"
            scaled = layout == "per-domain-scaled" or (layout == "per-host" and d.cap
                                                       and not self.nested(d, layout))
            w[own] = self.default * d.vcpus if scaled else self.default
            if self.nested(d, layout):
                w[f"machine/vcpus.partition/{d.name}.libvirt-qemu"] = self.default * d.vcpus
            if self.shares_partition(d, layout):
                in_partition += d.vcpus
        w["machine/vcpus.partition"] = self.default * max(in_partition, 1)
        top = max(w.values())
        if top > MAX_WEIGHT[self.version]:
            floor = 2 if self.version == "v1" else 1
            w = {g: max(floor, x * MAX_WEIGHT[self.version] // top) for g, x in w.items()}
        return w

    def place(self, domains, layout):
        """Moves every domain's threads into layout and sets its weights."""
        if layout not in LAYOUTS:
            raise LabError(f"unknown layout {layout}")
        try:
            for group, value in self.weights(domains, layout).items():
                self.weight(group, value)
            for d in domains:
                self._move(d, f"machine/{d.name}.libvirt-qemu", layout)
        except OSError as e:
            raise LabError(f"bench host: cannot place the domains in the {layout} layout: {e}")

    def _move(self, d, own, layout):
        if self.version == "v1":
            _write(self.path(f"{own}/emulator/tasks"), d.proc.pid)
            for i, tid in enumerate(d.tids):
                if self.nested(d, layout):
                    rel = f"machine/vcpus.partition/{d.name}.libvirt-qemu/vcpu{i}"
                elif self.shares_partition(d, layout):
                    rel = "machine/vcpus.partition"
                else:
                    rel = f"{own}/vcpu{i}"
                _write(self.path(f"{rel}/tasks"), tid)
            return
        # v2: a process moves whole; its threads then go to the threaded
        # groups of its own domain group
        if self.shares_partition(d, layout):
            _write(self.path(f"machine/vcpus.partition/{d.name}.libvirt-qemu/cgroup.procs"),
                   d.proc.pid)
            return
        _write(self.path(f"{own}/cgroup.procs"), d.proc.pid)
        _write(self.path(f"{own}/emulator/cgroup.threads"), d.proc.pid)
        for i, tid in enumerate(d.tids):
            _write(self.path(f"{own}/vcpu{i}/cgroup.threads"), tid)

    def teardown(self):
        """Removes the groups setup() made.  First every task still in one
        (its domain should be stopped by now) moves to the root, top down
        (on v2 a threaded subtree's processes are listed by its domain
        root; its threaded groups cannot list them); then the groups go,
        deepest first."""
        tasks = "tasks" if self.version == "v1" else "cgroup.procs"
        for path in self.made:
            try:
                with open(os.path.join(path, tasks)) as fh:
                    left = fh.read().split()
            except OSError:     # a threaded group
                left = []
            for task in left:
                try:
                    _write(os.path.join(self.mount, tasks), task)
                except OSError:
                    pass
        for path in reversed(self.made):
            try:
                os.rmdir(path)
            except OSError as e:
                warn(f"bench host: could not remove {path}: {e}")
        self.made = []
