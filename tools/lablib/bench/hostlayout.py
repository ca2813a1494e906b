# SPDX-License-Identifier: GPL-2.0-or-later
"""The cgroup layouts of tools/lab bench host, on cgroup v1 or v2.

bench host places synthetic domains (benchsched.Domain: one process per
domain, one thread per vCPU) as libvirt places a domain's threads, in a
subtree of its own, BENCH_GROUP, below the root of the cpu hierarchy:

  cgroup v1 (the hierarchy with cpu):
    machine/NAME.libvirt-qemu/{emulator,vcpuN}   a domain's own groups
    machine/vcpus.partition                      the shared group, 1024 per vCPU in it
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
                     vCPU cap keeps its own groups, weighing the default
                     per vCPU, a sibling of the partition (as both libvirt
                     series place a tuned domain)

A domain's cap (Domain.cap, % of a CPU per vCPU) is its vcpu_quota: on
each vcpuN group in every layout.  Nothing outside BENCH_GROUP is written;
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

    def setup(self, domains):
        if os.path.isdir(self.root):
            raise LabError(f"bench host: {self.root} exists: a benchmark is running, or an "
                           "earlier one was killed; remove it (rmdir, deepest first) once it "
                           "holds no tasks")
        try:
            self._mkdir("")
            self.weight("", TOP_WEIGHT[self.version])
            self._mkdir("machine")
            if self.version == "v2":
                _write(self.path("cgroup.subtree_control"), "+cpu")
                _write(self.path("machine/cgroup.subtree_control"), "+cpu")
            self._mkdir("machine/vcpus.partition")
            for d in domains:
                own = f"machine/{d.name}.libvirt-qemu"
                self._mkdir(own)
                if self.version == "v2":
                    _write(self.path(f"{own}/cgroup.subtree_control"), "+cpu")
                    self._mkdir(f"machine/vcpus.partition/{d.name}.libvirt-qemu")
                self._mkdir(f"{own}/emulator", threaded=self.version == "v2")
                for i in range(d.vcpus):
                    self._mkdir(f"{own}/vcpu{i}", threaded=self.version == "v2")
                    if d.cap:
                        self.cap(f"{own}/vcpu{i}", d.cap)
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

    def shares_partition(self, d, layout):
        """Whether domain d's vCPUs share the partition in layout."""
        return layout == "per-host" and not d.cap

    def expected(self, d, i, layout):
        """The cgroup of d's vCPU i in layout, as /proc/PID/task/TID/cgroup names it."""
        base = f"/{BENCH_GROUP}/machine"
        if self.shares_partition(d, layout):
            return (f"{base}/vcpus.partition" if self.version == "v1"
                    else f"{base}/vcpus.partition/{d.name}.libvirt-qemu")
        return f"{base}/{d.name}.libvirt-qemu/vcpu{i}"

    def place(self, domains, layout):
        """Moves every domain's threads into layout and sets its weights."""
        if layout not in LAYOUTS:
            raise LabError(f"unknown layout {layout}")
        shared = 0
        for d in domains:
            own = f"machine/{d.name}.libvirt-qemu"
            scaled = layout == "per-domain-scaled" or (layout == "per-host" and d.cap)
            self.weight(own, self.default * d.vcpus if scaled else self.default)
            if self.shares_partition(d, layout):
                shared += d.vcpus
            self._move(d, own, layout)
        self.weight("machine/vcpus.partition", self.default * max(shared, 1))

    def _move(self, d, own, layout):
        if self.version == "v1":
            _write(self.path(f"{own}/emulator/tasks"), d.proc.pid)
            for i, tid in enumerate(d.tids):
                rel = ("machine/vcpus.partition" if self.shares_partition(d, layout)
                       else f"{own}/vcpu{i}")
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
        """Removes the groups setup() made, deepest first; a task still in
        one (its domain should be stopped by now) is moved to the root."""
        tasks = "tasks" if self.version == "v1" else "cgroup.procs"
        for path in reversed(self.made):
            try:
                try:
                    with open(os.path.join(path, tasks)) as fh:
                        left = fh.read().split()
                except OSError:     # a threaded group: cgroup.procs is not readable
                    left = []
                for task in left:
                    try:
                        _write(os.path.join(self.mount, tasks), task)
                    except OSError:
                        pass
                os.rmdir(path)
            except OSError as e:
                warn(f"bench host: could not remove {path}: {e}")
        self.made = []
