# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench host without measuring: the mixes for a CPU count, the
layouts' files on cgroup v1 and v2 (written into a scratch directory
standing in for the hierarchy), the refusals, a window's figures and the
report.  Its statistics are tests/tools/test_benchstats.py.

The real run, on this host's v1 hierarchy and inside a v2 test-host row,
is tests/integration/test_bench_host.py.
"""

import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-benchhost-")
ok = tap.ok
raises = tap.raises

from lablib.bench import benchhost, hostlayout  # noqa: E402


LAY = hostlayout.LAYOUTS

# ---------------------------------------------------------------- mixes

for n in (2, 4, 16):
    m = benchhost.mixes(n)
    total = {k: sum(d[1] for d in spec) for k, (_, spec) in m.items()}
    names_unique = all(len({d[0] for d in spec}) == len(spec) for _, spec in m.values())
    ok(names_unique and set(m) == {"2-1-1", "seed-4-2-2", "over", "many-small", "capped",
                                   "seed-like"},
       f"{n} CPUs: six mixes, each domain named once", sorted(m))
    ok(total["2-1-1"] >= 2 * n and [d[1] for d in m["2-1-1"][1][:3]] == [2, 1, 1],
       f"{n} CPUs: '2-1-1' overcommits about 2x with domains of 2, 1 and 1 vCPUs", total)
    ok(total["over"] == -(-3 * n // 2) and total["many-small"] == 2 * n,
       f"{n} CPUs: 'over' has 1.5x as many busy vCPUs, 'many-small' 2x as many domains",
       total)
    capped = [d for d in m["capped"][1] if d[4]]
    ok(len(capped) == max(1, n // 2) and all(d[1] == 2 and d[4] == benchhost.CAP_PCT
                                             for d in capped)
       and len(m["capped"][1]) - len(capped) == 2 * n,
       f"{n} CPUs: 'capped' has {2 * n} default domains and capped 2-vCPU domains",
       m["capped"][1])
ok(benchhost.mixes(16)["seed-4-2-2"][1] == [("big", 8, 100, 100, None),
                                             ("mid1", 4, 100, 100, None),
                                             ("mid2", 4, 100, 100, None)],
   "16 CPUs: the seed talk's 4-2-2 scaled to 8-4-4", benchhost.mixes(16)["seed-4-2-2"])

# ---------------------------------------------------------------- layouts


class FakeProc:
    def __init__(self, pid):
        self.pid = pid


class FakeDomain:
    def __init__(self, name, vcpus, first_tid, cap=None):
        self.name, self.vcpus, self.duty, self.cap = name, vcpus, 100, cap
        self.proc = FakeProc(first_tid - 1)
        self.tids = list(range(first_tid, first_tid + vcpus))


writes = []
real_write = hostlayout._write


def logged_write(path, value):
    writes.append((path, str(value)))
    real_write(path, value)


hostlayout._write = logged_write


def files(layout, name):
    """{group (relative): last value written to its file name}."""
    out = {}
    for path, value in writes:
        if os.path.basename(path) == name:
            out[os.path.relpath(os.path.dirname(path), layout.root)] = value
    return out


domains = [FakeDomain("big", 2, 100), FakeDomain("small", 1, 200),
           FakeDomain("noisy", 2, 300, cap=20)]
for version in ("v1", "v2"):
    mount = os.path.join(WORK, version)
    os.makedirs(mount)
    layout = hostlayout.Layout(version, mount)
    writes.clear()
    layout.setup(domains)
    unit = 1024 if version == "v1" else 100
    weight = "cpu.shares" if version == "v1" else "cpu.weight"
    setup_writes = list(writes)
    if version == "v1":
        nest = "machine/vcpus.partition/noisy.libvirt-qemu"
        ok(files(layout, "cpu.cfs_quota_us") == {"machine/noisy.libvirt-qemu/vcpu0": "20000",
                                                  "machine/noisy.libvirt-qemu/vcpu1": "20000",
                                                  f"{nest}/vcpu0": "20000",
                                                  f"{nest}/vcpu1": "20000"}
           and set(files(layout, "cpu.cfs_period_us").values()) == {"100000"},
           "v1: the capped domain's vcpuN groups, its own and those nested in the "
           "partition, get its quota; nothing else does", setup_writes)
        ok(not os.path.isdir(os.path.join(layout.root, "machine/vcpus.partition/big.libvirt-qemu")),
           "v1: only a capped domain has a group inside the partition")
    else:
        ok(files(layout, "cpu.max") == {"machine/noisy.libvirt-qemu/vcpu0": "20000 100000",
                                         "machine/noisy.libvirt-qemu/vcpu1": "20000 100000"},
           "v2: the capped domain's vcpuN groups get cpu.max, nothing else does", setup_writes)
        sub = files(layout, "cgroup.subtree_control")
        ok(set(sub) == {".", "machine", "machine/big.libvirt-qemu",
                        "machine/small.libvirt-qemu", "machine/noisy.libvirt-qemu"}
           and set(sub.values()) == {"+cpu"},
           "v2: cpu enabled below the top, machine and each domain's own group; not below "
           "the partition", sub)
        threaded = files(layout, "cgroup.type")
        ok(sorted(threaded) == sorted(["machine/big.libvirt-qemu/emulator",
                                       "machine/big.libvirt-qemu/vcpu0",
                                       "machine/big.libvirt-qemu/vcpu1",
                                       "machine/small.libvirt-qemu/emulator",
                                       "machine/small.libvirt-qemu/vcpu0",
                                       "machine/noisy.libvirt-qemu/emulator",
                                       "machine/noisy.libvirt-qemu/vcpu0",
                                       "machine/noisy.libvirt-qemu/vcpu1"])
           and set(threaded.values()) == {"threaded"},
           "v2: the emulator and vcpuN groups are threaded", threaded)
        ok(os.path.isdir(os.path.join(layout.root,
                                      "machine/vcpus.partition/big.libvirt-qemu")),
           "v2: each domain has a group below the partition too")
    ok(files(layout, weight)["."] == str(hostlayout.TOP_WEIGHT[version]),
       f"{version}: the benchmark's top group weighs {hostlayout.TOP_WEIGHT[version]}")
    for lay in LAY:
        writes.clear()
        layout.place(domains, lay)
        w = files(layout, weight)
        want = {"per-domain": (unit, unit, unit, unit),
                "per-domain-scaled": (2 * unit, unit, 2 * unit, unit),
                "per-host": ((unit, unit, unit, 5 * unit) if version == "v1"
                             else (unit, unit, 2 * unit, 3 * unit))}[lay]
        got = tuple(int(w[g]) for g in ("machine/big.libvirt-qemu", "machine/small.libvirt-qemu",
                                        "machine/noisy.libvirt-qemu",
                                        "machine/vcpus.partition"))
        ok(got == want, f"{version} {lay}: big, small, capped, partition weigh {want}", w)
        if version == "v1" and lay == "per-host":
            ok(w.get("machine/vcpus.partition/noisy.libvirt-qemu") == str(2 * unit),
               "v1 per-host: the nested capped domain's group weighs 1024 per vCPU, and its "
               "vCPUs count in the partition's weight", w)
        ok(all(layout.expected(d, i, lay) == ("/" + hostlayout.BENCH_GROUP + "/machine/"
                                              + ("vcpus.partition" if lay == "per-host"
                                                 and not d.cap and version == "v1" else
                                                 f"vcpus.partition/{d.name}.libvirt-qemu"
                                                 if lay == "per-host" and not d.cap else
                                                 f"{d.name}.libvirt-qemu/vcpu{i}"))
               if not (version == "v1" and lay == "per-host" and d.cap)
               else layout.expected(d, i, lay) == (f"/{hostlayout.BENCH_GROUP}/machine/"
                                                   f"vcpus.partition/{d.name}.libvirt-qemu/"
                                                   f"vcpu{i}")
               for d in domains for i in range(d.vcpus)),
           f"{version} {lay}: where each vCPU belongs (what the integration test checks)")
        moved = [(os.path.relpath(p, layout.root), v) for p, v in writes
                 if os.path.basename(p) in ("tasks", "cgroup.procs", "cgroup.threads")]
        if version == "v1":
            vcpu_moves = {v: p for p, v in moved if not p.endswith("emulator/tasks")}
            want = {"per-host": {"100": "machine/vcpus.partition/tasks",
                                 "101": "machine/vcpus.partition/tasks",
                                 "200": "machine/vcpus.partition/tasks",
                                 "300": f"{nest}/vcpu0/tasks",
                                 "301": f"{nest}/vcpu1/tasks"}}.get(
                lay, {"100": "machine/big.libvirt-qemu/vcpu0/tasks",
                      "101": "machine/big.libvirt-qemu/vcpu1/tasks",
                      "200": "machine/small.libvirt-qemu/vcpu0/tasks",
                      "300": "machine/noisy.libvirt-qemu/vcpu0/tasks",
                      "301": "machine/noisy.libvirt-qemu/vcpu1/tasks"})
            ok(vcpu_moves == want, f"v1 {lay}: each vCPU thread written to its group",
               vcpu_moves)
        elif lay == "per-host":
            ok(("machine/vcpus.partition/big.libvirt-qemu/cgroup.procs", "99") in moved
               and ("machine/noisy.libvirt-qemu/vcpu1/cgroup.threads", "301") in moved
               and not any(p.startswith("machine/big.libvirt-qemu") for p, _ in moved),
               "v2 per-host: a sharing domain moves whole below the partition, a capped "
               "one's threads to its own groups", moved)
        else:
            ok(moved[:4] == [("machine/big.libvirt-qemu/cgroup.procs", "99"),
                             ("machine/big.libvirt-qemu/emulator/cgroup.threads", "99"),
                             ("machine/big.libvirt-qemu/vcpu0/cgroup.threads", "100"),
                             ("machine/big.libvirt-qemu/vcpu1/cgroup.threads", "101")],
               f"v2 {lay}: the process into its own group, then each thread to its "
               "threaded group", moved)
    msg = raises(hostlayout.Layout(version, mount).setup, domains)
    ok(msg is not None and "exists" in msg, f"{version}: an existing subtree is refused", msg)

# Weights past the kernel's bound are scaled down alike (v2: 10000)
many = [FakeDomain(f"d{i}", 1, 1000 + i) for i in range(150)]
w = hostlayout.Layout("v2", os.path.join(WORK, "v2")).weights(many, "per-host")
ok(w["machine/vcpus.partition"] == 10000 and w["machine/d0.libvirt-qemu"] == 66,
   "v2: 150 shared vCPUs weigh the maximum 10000, every other weight scaled alike",
   {k: w[k] for k in ("machine/vcpus.partition", "machine/d0.libvirt-qemu")})
w = hostlayout.Layout("v1", os.path.join(WORK, "v1")).weights(many, "per-domain-scaled")
ok(max(w.values()) == 1024, "within the bound nothing is scaled", max(w.values()))

# Setup that fails half-way removes what it made; teardown moves a task
# left in a group to the root before removing it
mount = os.path.join(WORK, "half")
os.makedirs(mount)
layout = hostlayout.Layout("v1", mount)
bad = [FakeDomain("ok", 1, 500), FakeDomain("bad/name", 1, 600)]
removed = []
real_rmdir = os.rmdir


def scratch_rmdir(path):
    """A cgroup directory goes with its files; a scratch one needs them gone."""
    removed.append(os.path.relpath(path, mount))
    for name in os.listdir(path):
        if os.path.isfile(os.path.join(path, name)):
            os.unlink(os.path.join(path, name))
    real_rmdir(path)


os.rmdir = scratch_rmdir
try:
    msg = raises(layout.setup, bad)
finally:
    os.rmdir = real_rmdir
ok(msg is not None and "cannot build its groups" in msg, "a failing setup is refused", msg)
ok(sorted(os.listdir(mount)) == [] and removed[-1] == hostlayout.BENCH_GROUP
   and removed[0].startswith(f"{hostlayout.BENCH_GROUP}/machine/ok.libvirt-qemu/"),
   "... and removes every group it made, deepest first", removed)

hostlayout._write = real_write

# ---------------------------------------------------------------- refusals

msg = raises(benchhost.check_host, 2)
ok(msg is not None and "2 CPUs" in msg and "--few-cpus" in msg,
   "fewer than 4 CPUs refused, naming the option that allows it", msg)
ok(raises(benchhost.check_host, 2, few_cpus=True, beside_vms=True) is None,
   "--few-cpus allows it")
fake = os.path.join(WORK, "qemu-system-x86_64")
shutil.copy("/bin/sleep", fake)
proc = subprocess.Popen([fake, "30"])
# Until the child has exec'd, its name is still python's (seen under load)
for _ in range(100):
    if proc.pid in benchhost.qemu_processes():
        break
    time.sleep(0.05)
try:
    msg = raises(benchhost.check_host, 8)
    ok(msg is not None and "QEMU processes run" in msg and "--beside-vms" in msg
       and proc.pid in benchhost.qemu_processes(),
       "a running QEMU process is refused, by PID, naming --beside-vms", msg)
    vms = benchhost.check_host(8, beside_vms=True)
    ok(proc.pid in vms, "--beside-vms runs and records the QEMU PIDs", vms)
finally:
    proc.kill()
    proc.wait()

# ---------------------------------------------------------------- figures

fdoms = [FakeDomain("big", 2, 100), FakeDomain("small", 1, 200),
         FakeDomain("noisy", 2, 300, cap=20)]
fdoms.append(FakeDomain("light", 1, 400))
fdoms[-1].duty = 30
shares = {"big/0": 0.5, "big/1": 0.4, "small/0": 0.8, "noisy/0": 0.2, "noisy/1": 0.19,
          "light/0": 0.1}
win = {"threads": {k: {"share": s, "steal": 0.1} for k, s in shares.items()},
       "host_idle": 0.05}
s = benchhost.summarise(fdoms, win)
ok(abs(s["delivered"] - 2.19) < 1e-9 and abs(s["wait"] - 0.6) < 1e-9
   and abs(s["maxmin"] - 2.0) < 1e-9 and abs(s["capped"] - 0.195) < 1e-9
   and abs(s["est_idle_steal"] - 0.03) < 1e-9 and s["idle_steal"] is None,
   "a window: delivered, wait, max/min over busy default vCPUs only, the capped mean, "
   "no exact idle steal without a trace", s)
win["trace_idle"] = 0.05
for v in win["threads"].values():
    v["idle_steal"] = 0.01
ok(abs(benchhost.summarise(fdoms, win)["idle_steal"] - 0.06) < 1e-9,
   "a trace that validated gives the exact idle steal")
win["refused"] = ["CPU 1: 4 switches to idle, 0 from idle"]
s = benchhost.summarise(fdoms, win)
ok(s["idle_steal"] is None and s["refused"] == win["refused"],
   "a refused trace gives none, and keeps why", s)

runs = [{lay: {"delivered": 1.9, "wait": 1.0 + (0.1 if lay == "per-host" else 0),
               "host_idle": 0.01 * i, "maxmin": 2.0 if lay == "per-domain" else 1.0 + 0.01 * i,
               "capped": None, "est_idle_steal": 0.0, "idle_steal": None}
         for lay in LAY} for i in range(6)]
comps = benchhost.statistics_of(runs)
kinds = {(c["a"], c["b"], c["field"]): c["kind"] for c in comps}
ok(len(comps) == 12 and kinds[("per-domain", "per-host", "host_idle")] == "difference"
   and kinds[("per-domain", "per-host", "maxmin")] == "ratio"
   and not any(c["field"] == "idle_steal" for c in comps),
   "3 comparisons x 4 figures; host idle as a difference; no idle steal without a trace",
   sorted(kinds))
result = {"command": "tools/lab bench host", "cgroup": "v1", "runs": 6, "seconds": 10,
          "machine": {"cpus": 2, "cpu_model": "test CPU", "kernel": "6.12"},
          "mixes": [{"mix": "seed-4-2-2", "description": "d", "balanced": True,
                     "median": {lay: runs[0][lay] for lay in LAY}, "comparisons": comps,
                     "runs": [{lay: dict(r[lay], **({"refused": ["CPU 1: lost idle exits"]}
                                                    if i == 2 and lay == "per-host" else {}))
                               for lay in LAY} for i, r in enumerate(runs)]}]}
md = benchhost.markdown(result)
ok("| per-host | 1.90 | 1.10 | 0.0 % | 1.00 | n/a | n/a |" in md
   and "per-host/per-domain maxmin 0.51 (95 % CI " in md
   and "per-host - per-domain host_idle 0.0 points (95 % CI " in md
   and "command: `tools/lab bench host`" in md
   and "Idle steal refused in 1 window (the trace cannot be trusted), e.g. run 3, per-host: "
       "CPU 1: lost idle exits" in md,
   "the report: a row per layout, each comparison with its interval, the command, "
   "refused windows", md)

sys.exit(tap.end())
