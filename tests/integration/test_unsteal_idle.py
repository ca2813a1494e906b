# SPDX-License-Identifier: GPL-2.0-or-later
"""Idle steal and busy steal on the 2-CPU host, through unsteal --connect.

Idle steal (docs/unsteal.md): steal x the idle fraction of the host's
CPUs.  Two busy 1-vCPU guests are pinned to CPU 0 (virsh vcpupin --live)
while CPU 1 has nothing of ours to run: the vCPUs wait although a host
CPU sits idle, a placement problem that software fixes (unpinning).

- each pinned vCPU: allowed CPUs "0", steal >= 30 % (two busy vCPUs share
  one CPU: about 50 % each), idle of its allowed CPUs <= 5 % (CPU 0 is
  saturated, so a definition over the allowed CPUs would find no idle
  steal at all);
- idle_steal_pct = steal_pct x host idle_pct / 100 (within 0.5 points,
  the rounding of the printed figures);
- host idle_pct within 10 points of /proc/stat read by the test around
  unsteal's window;
- idle steal >= 3 % for each pinned vCPU once the host's idle time is at
  least 10 %, and the host summary's idle steal is the sum of the pinned
  vCPUs' (within 0.02 vCPU, the rounding of the printed figures) and at
  least 0.06 vCPU.  The host's idle time here is about 25 % (CPU 1 runs
  the guests' other QEMU threads, libvirt and unsteal about half the
  time): 25.15 % in this stop's clean-clone run, where the checks used to
  ask for 25 % and were skipped below it.  Other load on the host can
  keep CPU 1 busier: the test measures up to 10 windows of 3 s and takes
  the first with 10 % idle; when none had, these checks fail with the
  idle time of each window (a host that leaves no CPU idle cannot show
  idle steal; the checks are not skipped).

Then both are unpinned and a busy 2-vCPU guest joins: four busy vCPUs on
two CPUs (more runnable vCPUs than CPUs).  In three windows of 3 s every
guest must be classified busy in at least two, with a median busy steal
>= 20 %; in the last one the host is idle <= 5 %, and idle steal is at
most a tenth of all steal.  (A TCG guest's busy vCPU also sleeps on
QEMU's big lock, neither running nor waiting for a CPU: in one --tier lab
run of 2026-11-27 one window classified all three guests idle, the two
others busy.)
"""

import json
import os
import subprocess
import time

import labtest
from labtest import daemon, guest

UNSTEAL = labtest.CONFIG.unsteal_bin
IDLE_NEEDED = 10.0
# Idle steal a pinned vCPU must show at IDLE_NEEDED: its steal (>= 30 %,
# about 50 %) times the host's idle time, with room
IDLE_STEAL_AT_LEAST = 3.0
SUMMARY_AT_LEAST = 0.06
WINDOWS = 10


def cpu_times():
    out = {}
    with open("/proc/stat") as fh:
        for line in fh:
            f = line.split()
            if f[0].startswith("cpu"):
                v = [int(x) for x in f[1:9]]
                out[f[0]] = (v[3] + v[4], sum(v))
    return out


def window(seconds=3):
    c0 = cpu_times()
    p = subprocess.run([UNSTEAL, "report", "--json", "--no-timestamp", "--connect",
                        daemon.lab().uri, "--interval", str(seconds), "--count", "1"],
                       capture_output=True, text=True, timeout=60)
    c1 = cpu_times()
    idle = {k: 100.0 * (c1[k][0] - c0[k][0]) / max(1, c1[k][1] - c0[k][1]) for k in c1}
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    return p, (json.loads(lines[-1]) if lines else None), idle


def main(t):
    if not os.access(UNSTEAL, os.X_OK):
        t.ok(False, "the unsteal binary is built", UNSTEAL)
        return
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("ui-a", vcpus=1, workload="busy")
    b = guest.create("ui-b", vcpus=1, workload="busy")
    for n in (a, b):
        daemon.virsh(["vcpupin", n, "0", "0", "--live"], capture=True)
    time.sleep(1)

    rep, idle, seen = None, {}, []
    for _ in range(WINDOWS):
        p, rep, idle = window()
        if p.returncode != 0 or not rep:
            break
        seen.append(rep["host"]["idle_pct"])
        if rep["host"]["idle_pct"] >= IDLE_NEEDED:
            break
    print(f"# host idle in the windows measured: {seen} % (needed {IDLE_NEEDED} %)", flush=True)
    if not t.ok(p.returncode == 0 and rep, "unsteal report --connect prints a report",
                p.stderr):
        return
    host_idle = rep["host"]["idle_pct"]
    doms = {d["name"]: d for d in rep["domains"]}
    if not t.ok({a, b} <= set(doms), "both pinned guests are reported", sorted(doms)):
        return
    t.ok(abs(host_idle - idle["cpu"]) <= 10,
         "host idle % within 10 points of /proc/stat around the window",
         f"unsteal {host_idle}, test {idle['cpu']:.1f} (cpu0 {idle.get('cpu0', 0):.1f}, "
         f"cpu1 {idle.get('cpu1', 0):.1f})")
    for n in (a, b):
        v = doms[n]["vcpu"][0]
        t.eq(v["cpus"], "0", f"{n}: the vCPU may only run on CPU 0")
        t.ok(v["steal_pct"] >= 30, f"{n}: the pinned busy vCPU waits >= 30 %", v)
        t.ok(v["allowed_idle_pct"] <= 5, f"{n}: its allowed CPU 0 is (nearly) never idle", v)
        t.ok(abs(v["idle_steal_pct"] - v["steal_pct"] * host_idle / 100) <= 0.5,
             f"{n}: idle steal = steal x host idle", v)
        what = f"{n}: pinned next to an idle CPU, it shows idle steal >= {IDLE_STEAL_AT_LEAST} %"
        t.ok(host_idle >= IDLE_NEEDED and v["idle_steal_pct"] >= IDLE_STEAL_AT_LEAST, what,
             f"{v}; host idle {host_idle} % (cpu1 idle {idle.get('cpu1', 0):.0f} %); "
             f"idle in the {len(seen)} windows measured: {seen} %, {IDLE_NEEDED} % needed")
        t.margin(v["idle_steal_pct"], IDLE_STEAL_AT_LEAST, what, above=True, unit="%")
    summary = rep["host"]["idle_steal_vcpus"]
    pinned = sum(doms[n]["vcpu"][0]["idle_steal_pct"] for n in (a, b)) / 100
    t.ok(abs(summary - pinned) <= 0.02,
         "the host summary's idle steal is the pinned vCPUs' idle steal",
         f"summary {summary} vCPUs, pinned vCPUs {pinned:.3f}")
    what = f"the host summary has >= {SUMMARY_AT_LEAST} vCPU of idle steal"
    t.ok(host_idle >= IDLE_NEEDED and summary >= SUMMARY_AT_LEAST, what,
         f"{rep['host']}; idle in the windows measured: {seen} %")
    t.margin(summary, SUMMARY_AT_LEAST, what, above=True, unit="vCPUs")
    t.margin(host_idle, IDLE_NEEDED, "the window's host idle time", above=True, unit="%")

    # Contention: unpin, then four busy vCPUs on two CPUs.
    for n in (a, b):
        daemon.virsh(["vcpupin", n, "0", "0-1", "--live"], capture=True)
    c = guest.create("ui-c", vcpus=2, workload="busy")
    time.sleep(1)
    # Which vCPU a CPU runs next depends on migrations, so one 3 s window
    # can give a guest 85 % of a CPU: each guest's median of three counts.
    reps = []
    for _ in range(3):
        p, rep, idle = window()
        if not t.ok(p.returncode == 0 and rep, "unsteal report under contention", p.stderr):
            return
        reps.append({d["name"]: d for d in rep["domains"]})
    for n in (a, b, c):
        seen = [doms[n] for doms in reps if n in doms]
        if not t.ok(len(seen) == len(reps), f"{n} is reported under contention",
                    [sorted(doms) for doms in reps]):
            continue
        classes = [d["class"] for d in seen]
        t.ok(classes.count("busy") >= 2,
             f"{n}: classified busy (utilisation + steal near 100 %) in two windows "
             f"of three or more", f"classes by window: {classes}")
        steal = sorted(d["busy_steal_pct"] for d in seen)
        t.ok(steal[1] >= 20, f"{n}: busy steal >= 20 % (median of three windows)",
             f"busy steal {steal} %; last window {seen[-1]}")
    h = rep["host"]
    t.ok(h["idle_pct"] <= 5, "four busy vCPUs leave the 2-CPU host no idle time", h)
    t.ok(h["idle_steal_vcpus"] <= 0.1 * h["steal_vcpus"],
         "host steal is busy steal: idle steal at most a tenth of all steal", h)


labtest.run(main)
