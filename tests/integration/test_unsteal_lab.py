# SPDX-License-Identifier: GPL-2.0-or-later
"""unsteal against real lab guests.

Three guests under vcpu_cgroup = "per-host": a busy 2-vCPU guest, an idle
1-vCPU guest and a busy 1-vCPU guest with a vCPU quota of 20 % of a CPU.
Over one window, unsteal's per-vCPU steal is compared with raw schedstat
and with libvirt's vcpu.N.delay (both sampled around unsteal's window:
tolerance 10 percentage points), and its classification, placement and
throttling are checked against what the lab set up.
"""

import json
import os
import subprocess
import time

import labtest
import vcpucg
from labtest import daemon, guest, measure

UNSTEAL = labtest.CONFIG.unsteal_bin
WINDOW = 4


def vcpu_delays(name):
    """libvirt's vcpu.N.delay counters and the time they were read: the
    middle of the virsh call, which takes long on a loaded host."""
    a = time.monotonic()
    st = vcpucg.domstats(name, "--vcpu")
    at = (a + time.monotonic()) / 2
    return at, {int(k.split(".")[1]): int(v) for k, v in st.items()
                if k.startswith("vcpu.") and k.endswith(".delay")}


def main(t):
    if not os.access(UNSTEAL, os.X_OK):
        t.ok(False, "the unsteal binary is built", UNSTEAL)
        return
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    busy = guest.create("us-busy", vcpus=2, workload="busy")
    idle = guest.create("us-idle", vcpus=1, workload="idle")
    tuned = guest.create("us-tuned", vcpus=1, workload="busy", cputune={"quota": "20000"})
    names = [busy, idle, tuned]
    threads = {(n, i): (guest.qemu_pid(n), tid)
               for n in names for i, tid in guest.vcpu_tids(n).items()}
    time.sleep(2)

    # libvirt's counters are read (one virsh call per guest) just outside
    # the schedstat window, which is just outside unsteal's: each rate is
    # taken over its own window, libvirt's per guest between the middles of
    # its two virsh calls.
    d0 = {n: vcpu_delays(n) for n in names}
    s0 = {k: measure.schedstat(*v) for k, v in threads.items()}
    t0 = time.monotonic()
    p = subprocess.run([UNSTEAL, "report", "--json", "--no-timestamp",
                        "--interval", str(WINDOW), "--count", "1"],
                       capture_output=True, text=True, timeout=60)
    wall = time.monotonic() - t0
    s1 = {k: measure.schedstat(*v) for k, v in threads.items()}
    d1 = {n: vcpu_delays(n) for n in names}

    t.ok(p.returncode == 0, "unsteal report exits 0", p.stderr)
    try:
        rep = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        t.ok(False, "unsteal report prints a JSON line", f"{e}\n{p.stdout}")
        return
    doms = {d["name"]: d for d in rep["domains"]}
    t.ok(set(names) <= set(doms), "every lab guest is found by scanning /proc", sorted(doms))
    if not set(names) <= set(doms):
        return
    t.eq([doms[n]["vcpus"] for n in names], [2, 1, 1], "vCPU counts match the guests")

    for (n, i), (pid, tid) in threads.items():
        v = {x["id"]: x for x in doms[n]["vcpu"]}.get(i)
        if not t.ok(v is not None, f"{n} vCPU {i} is reported"):
            continue
        t.eq(v["tid"], tid, f"{n} vCPU {i}: thread id matches QEMU's 'CPU {i}/TCG'")
        raw = (s1[(n, i)][1] - s0[(n, i)][1]) / (wall * 1e9) * 100
        lwall = d1[n][0] - d0[n][0]
        lv = (d1[n][1][i] - d0[n][1][i]) / (lwall * 1e9) * 100
        t.bound(abs(v["steal_pct"] - raw), 10,
                f"{n} vCPU {i}: steal within 10 points of raw schedstat",
                unit="points", figure=f"unsteal {v['steal_pct']:.1f} %, schedstat {raw:.1f} %")
        t.bound(abs(v["steal_pct"] - lv), 10,
                f"{n} vCPU {i}: steal within 10 points of libvirt's vcpu.{i}.delay",
                unit="points", figure=f"unsteal {v['steal_pct']:.1f} %, libvirt {lv:.1f} %")

    t.eq(doms[busy]["class"], "busy", "the contended busy guest is classified busy")
    t.eq(doms[idle]["class"], "idle", "the idle guest is classified idle")
    t.bound(doms[busy]["busy_steal_pct"], 0, "the contended busy guest shows busy steal",
            above=True, strict=True, unit="%", detail=doms[busy])
    t.eq(doms[busy]["placement"], "shared", "the default guest's vCPUs are in the shared group")
    # a vCPU quota alone: groups of its own nested in the shared group on
    # cgroup v1, its own groups on v2
    t.eq(doms[tuned]["placement"], "own" if vcpucg.V2 else "nested",
         "the guest with a quota is where the rule puts it")
    thr = doms[tuned]["throttle"] or {}
    t.bound(thr.get("throttled", 0), 0, "the quota-limited guest is reported as throttled",
            above=True, strict=True, figure="periods throttled", detail=thr)


labtest.run(main)
