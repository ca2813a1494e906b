# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench scale without a guest: the three layouts' weights, a
window's idle steal from its trace, the records' way back, the QEMU topology
and the smoke run's checks.

The layouts are written into a scratch directory standing in for the cpu
hierarchy (benchsched.Layout only makes directories and writes files);
the window is a constructed trace whose answer is known by hand: on two
CPUs, thread A runs on CPU 0 the whole 10 s, thread B wakes at 1 s, waits
behind it for 3 s while CPU 1 is idle and then runs on CPU 1 for 6 s.
"""

import io
import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-benchscale-")
ok = tap.ok

from lablib.bench import benchscale, benchsched  # noqa: E402
from lablib.common import LabError  # noqa: E402
from lablib.testing import qemuboot, scalehost, testhost  # noqa: E402


# ---------------------------------------------------------------- layouts

class FakeProc:
    def __init__(self, pid):
        self.pid = pid


class FakeDomain:
    def __init__(self, name, vcpus, first_tid):
        self.name, self.vcpus, self.duty = name, vcpus, 100
        self.proc = FakeProc(first_tid - 1)
        self.tids = list(range(first_tid, first_tid + vcpus))


def read(layout, rel, name):
    with open(os.path.join(layout.root, rel, name)) as fh:
        return fh.read().strip()


class LoggedLayout(benchsched.Layout):
    """Layout, each thread's last group kept (a real tasks file moves it;
    the scratch tree's file would only keep the last write)."""

    def attach(self, rel, tid):
        super().attach(rel, tid)
        self.where[tid] = rel


mount = os.path.join(WORK, "cpu")
os.makedirs(mount)
domains = [FakeDomain("big", 4, 100), FakeDomain("small", 1, 200)]
layout = LoggedLayout(mount)
layout.where = {}
layout.setup(domains)
weights, where = {}, {}
for lay in benchscale.LAYOUTS:
    layout.where = {}
    layout.place(domains, lay)
    where[lay] = layout.where
    weights[lay] = {rel: int(read(layout, rel, "cpu.shares"))
                    for rel in ("machine/big.libvirt-qemu", "machine/small.libvirt-qemu",
                                "machine/vcpus.partition")}
ok(weights["per-domain"] == {"machine/big.libvirt-qemu": 1024,
                             "machine/small.libvirt-qemu": 1024,
                             "machine/vcpus.partition": 1024},
   "per-domain: every domain weighs 1024, as stock libvirt sets it", weights["per-domain"])
ok(weights["per-domain-scaled"]["machine/big.libvirt-qemu"] == 4096
   and weights["per-domain-scaled"]["machine/small.libvirt-qemu"] == 1024,
   "per-domain-scaled: a domain weighs 1024 per vCPU", weights["per-domain-scaled"])
ok(weights["per-host"]["machine/vcpus.partition"] == 5 * 1024
   and weights["per-host"]["machine/big.libvirt-qemu"] == 1024,
   "per-host: the shared group weighs 1024 per vCPU it holds", weights["per-host"])
ok(all(where["per-host"][t] == "machine/vcpus.partition" for d in domains for t in d.tids)
   and where["per-host"][99] == "machine/big.libvirt-qemu/emulator",
   "per-host: every vCPU thread goes to the shared group, the main threads to their "
   "domains", where["per-host"])
for lay in ("per-domain", "per-domain-scaled"):
    ok(all(where[lay][t] == f"machine/{d.name}.libvirt-qemu/vcpu{i}"
           for d in domains for i, t in enumerate(d.tids)),
       f"{lay}: every vCPU thread in its own domain's vcpuN group", where[lay])
layout.where = {}
layout.place(domains, "per-domain")
ok(int(read(layout, "machine/vcpus.partition", "cpu.shares")) == 1024
   and layout.where[103] == "machine/big.libvirt-qemu/vcpu3",
   "back to per-domain after per-host: the threads and the weights are per-domain again")


# ---------------------------------------------------------------- a window

A, B = 11, 12


def switch(ts, cpu, prev, state, nxt):
    return (f"  x-{prev}     [{cpu:03d}] d..2. {ts:.6f}: sched_switch: prev_comm=x "
            f"prev_pid={prev} prev_prio=120 prev_state={state} ==> next_comm=y "
            f"next_pid={nxt} next_prio=120")


def wakeup(ts, cpu, pid):
    return (f"  k-1     [{cpu:03d}] dN.4. {ts:.6f}: sched_wakeup: comm=y pid={pid} "
            f"prio=120 target_cpu={cpu:03d}")


trace = [switch(0.0, 1, 7, "S", 0), switch(0.0, 0, 7, "S", A), wakeup(1.0, 0, B),
         switch(4.0, 1, 0, "R", B), switch(10.0, 0, A, "S", 0), switch(10.0, 1, B, "S", 0)]


def window(affinity_b):
    return {"threads": {"d/0": {"share": 1.0, "steal": 0.0, "tid": A},
                        "d/1": {"share": 0.6, "steal": 0.4, "tid": B}},
            "host_idle": 0.2, "affinity": {str(A): [0, 1], str(B): affinity_b}}


win = window([0, 1])
benchscale.add_idle_steal(win, trace, 2)
b = win["threads"]["d/1"]
ok(abs(win["trace_s"] - 10.0) < 1e-6, "the trace spans the window", win["trace_s"])
ok(abs(b["idle_steal"] - 0.3) < 1e-6 and abs(b["trace_wait"] - 0.3) < 1e-6,
   "B waited 3 of 10 s beside an idle CPU it may use: idle steal 0.3", b)
ok(abs(b["est_idle_steal"] - 0.08) < 1e-6,
   "the estimate (steal x host idle) is kept beside it: 0.4 x 0.2", b)
ok(win["threads"]["d/0"]["idle_steal"] == 0.0, "A never waited: no idle steal")
ok(abs(win["trace_idle"] - 0.2) < 1e-6, "CPU 1 idle 4 of 10 s: the host idle 0.2 by the trace",
   win["trace_idle"])
ok(abs(b["idle_steal_near"] - 0.3) < 1e-6 and b["idle_steal_far"] == 0.0
   and b["idle_steal_own"] == 0.0, "one node: all of it near (B's runqueue is CPU 0's)", b)
win = window([0, 1])
benchscale.add_idle_steal(win, trace, 2, {0: 0, 1: 1})
b = win["threads"]["d/1"]
ok(abs(b["idle_steal_far"] - 0.3) < 1e-6 and b["idle_steal_near"] == 0.0,
   "CPU 1 in the other node: all of it far", b)
ok(benchscale.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11},
   "a cpulist of ranges and single CPUs")
win = window([0])
benchscale.add_idle_steal(win, trace, 2)
ok(win["threads"]["d/1"]["idle_steal"] == 0.0,
   "the same wait with B allowed on CPU 0 only is no idle steal", win["threads"]["d/1"])


# ---------------------------------------------------------------- tunings

spec = benchscale.MIXES["exact-16"][2]
nodes = {0: list(range(0, 8)), 1: list(range(8, 16))}
ok(benchscale.pin_plan(spec, nodes, "none") is None
   and benchscale.pin_plan(spec, nodes, "idle-poll") is None,
   "no pinning without a pinning tuning")
plan = benchscale.pin_plan(spec, nodes, "pin-nodes")
ok(plan["mixed8"] == [nodes[0]] * 8
   and all(plan[d] == [nodes[1]] * v for d, v in (("busy4", 4), ("busy2", 2), ("light2", 2))),
   "pin-nodes, exact-16: the 8-vCPU domain on node 0, the 4, 2 and 2 on node 1", plan)
plan = benchscale.pin_plan(spec, nodes, "pin-cpus")
cpus = sorted(c for d in plan.values() for one in d for c in one)
ok(cpus == list(range(16)) and all(len(one) == 1 for d in plan.values() for one in d)
   and plan["mixed8"] == [[c] for c in range(8)],
   "pin-cpus, exact-16: every vCPU on a CPU of its own, within its domain's node", plan)
plan = benchscale.pin_plan(benchscale.MIXES["seed-like"][2], {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]},
                           "pin-cpus")
ok(plan["mixed6"] == [[0], [1], [2], [3], [0], [1]] and plan["idle4"] == [[4], [5], [6], [7]]
   and plan["vm2"] == [[4], [5]],
   "pin-cpus, seed-like (14 vCPUs on 8 CPUs): a node's CPUs taken in turn, shared past its "
   "size", plan)
try:
    benchscale.check_tunings(["pin-nodes", "pin-nodes"])
    ok(False, "a tuning given twice is refused")
except LabError as e:
    ok("twice" in str(e), "a tuning given twice is refused", e)
try:
    benchscale.check_tunings(["pin-numa"])
    ok(False, "an unknown tuning is refused")
except LabError as e:
    ok("unknown tuning pin-numa" in str(e), "an unknown tuning is refused, naming it", e)
ok(benchscale.check_tunings(None) == ["none"], "no tuning asked for: none")


# ---------------------------------------------------------------- the host side

args = scalehost.machine_args(16, 2, 4096)
ok(args[:4] == ["-smp", "16,sockets=2,cores=8,threads=1", "-m", "4096M"]
   and "node,nodeid=0,cpus=0-7,memdev=mem0" in args
   and "node,nodeid=1,cpus=8-15,memdev=mem1" in args
   and "memory-backend-ram,id=mem1,size=2048M" in args,
   "16 CPUs in 2 nodes: a socket and half the memory per node", args)
ok(scalehost.machine_args(2, 1, 2048) == ["-smp", "2", "-m", "2048M"],
   "one node: the test host's usual 2 CPUs")
try:
    scalehost.machine_args(6, 4, 4096)
    ok(False, "6 CPUs do not split into 4 nodes")
except LabError as e:
    ok("do not split" in str(e), "6 CPUs do not split into 4 nodes: refused", e)
ok(scalehost.guest_args(["seed-4-2-2", "seed-like"], 5, 10, "both")
   == "unsteal.bench=--mix,seed-4-2-2,--mix,seed-like,--tuning,none,--reps,5,--seconds,10,"
      "--numa-balancing,both", "the in-guest command on the kernel command line")
ok(scalehost.guest_args(["exact-16"], 5, 10, "off", ["idle-poll"])
   == "idle=poll unsteal.bench=--mix,exact-16,--tuning,idle-poll,--reps,5,--seconds,10,"
      "--numa-balancing,off", "idle-poll: idle=poll on the kernel command line as well")
ok(scalehost.boots(["seed-like", "exact-16"], ["none", "idle-poll", "pin-cpus"])
   == [(8, ["seed-like"], ["none", "pin-cpus"]), (8, ["seed-like"], ["idle-poll"]),
       (16, ["exact-16"], ["none", "pin-cpus"]), (16, ["exact-16"], ["idle-poll"])],
   "a boot per CPU count for the pinning tunings, and one more for idle=poll",
   scalehost.boots(["seed-like", "exact-16"], ["none", "idle-poll", "pin-cpus"]))
ok(scalehost.boots(["exact-16"], ["idle-poll"]) == [(16, ["exact-16"], ["idle-poll"])],
   "idle-poll alone: its boot only")

# The records' way back: benchscale.save_records() in the guest, the runner's
# tar of it written over the empty raw disk (as onto /dev/vdb: the zeros
# after it stay), scalehost.read_records() on this side.
result = {"mix": "smoke", "reps": []}
guest_out = os.path.join(WORK, "guest-records")
benchscale.save_records(guest_out, {"topology": {"cpus": 4}, "results": [result]})
ok(sorted(os.listdir(guest_out)) == [benchscale.RECORDS], "the records are one file, no "
   "temporary left", os.listdir(guest_out))


def results_disk(name, members):
    """An empty results disk of 1 MiB with a tar of members ({name: bytes})
    written over its start."""
    tar_path = os.path.join(WORK, name + ".tar")
    with tarfile.open(tar_path, "w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    disk = os.path.join(WORK, name + ".disk")
    with open(disk, "wb") as fh:
        fh.truncate(1 << 20)
    with open(disk, "r+b") as fh, open(tar_path, "rb") as src:
        fh.write(src.read())
    return disk


with open(os.path.join(guest_out, benchscale.RECORDS), "rb") as fh:
    saved = fh.read()
got = scalehost.read_records(results_disk("good", {benchscale.RECORDS: saved}))
ok(got == {"topology": {"cpus": 4}, "results": [result]},
   "the records come back from the results disk", got)
empty = os.path.join(WORK, "empty.disk")
with open(empty, "wb") as fh:
    fh.truncate(1 << 20)
got = scalehost.read_records(empty)
ok(isinstance(got, str) and "no bench.json" in got,
   "a disk the guest never wrote says that no records came back", got)
got = scalehost.read_records(results_disk("other", {"other.json": b"{}"}))
ok(isinstance(got, str) and "no bench.json" in got, "a tar without the records says so", got)
got = scalehost.read_records(results_disk("cut", {benchscale.RECORDS: saved[:20]}))
ok(isinstance(got, str) and "not JSON" in got, "cut-off records are not taken", got)

out = qemuboot.Outcome()
lines = ["# unsteal-bench: progress smoke: repetition 1/1 measured",
         "ok 1 - idle_steal_trace"]
for i, line in enumerate(lines):
    qemuboot.parse(out, line, float(i), testhost.CONSOLE)
ok(len(out.results) == 1 and out.results[0].name == "idle_steal_trace",
   "the runner's TAP is read beside the benchmark's progress lines", out.results)


def smoke(drop=None, span=2.0):
    reps = [{lay: {"trace_s": span, "threads": {"d/0": {"idle_steal": 0.0}}}
             for lay in benchscale.LAYOUTS if lay != drop}]
    return {"seconds": 2, "mixes": [{"mix": "smoke", "reps": reps}]}


def smoke_error(results):
    try:
        scalehost.check_smoke(results)
        return None
    except LabError as e:
        return str(e)


ok(smoke_error(smoke()) is None, "a complete smoke run passes its checks")
ok("no per-host window" in (smoke_error(smoke(drop="per-host")) or ""),
   "a smoke run without one layout fails", smoke_error(smoke(drop="per-host")))
ok("covers 0.20 s" in (smoke_error(smoke(span=0.2)) or ""),
   "a smoke run whose trace misses most of the window fails", smoke_error(smoke(span=0.2)))

for name, (cpus, desc, spec) in benchscale.MIXES.items():
    vcpus = sum(d[1] for d in spec)
    ok(cpus % 2 == 0 and desc and all(0 < d[2] <= 100 and d[3] > 0 for d in spec)
       and len({d[0] for d in spec}) == len(spec),
       f"mix {name}: {vcpus} vCPUs on {cpus} CPUs, each domain named once, duties in range")

sys.exit(tap.end())
