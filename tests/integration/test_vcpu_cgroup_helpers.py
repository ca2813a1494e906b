# SPDX-License-Identifier: GPL-2.0-or-later
"""cgroup v2: what a busy helper process of a sharing domain costs (a measurement).

On cgroup v2 a sharing domain's whole group is below the per-host
partition, and the partition weighs the default weight (100) per vCPU in
it.  The processes libvirt adds to a domain's group (virtiofsd, passt,
swtpm; QEMU's I/O threads and vhost workers are in it anyway) are scheduled
there too, but are not counted.  This test measures what that does.

Three domains with one spinning vCPU each: "h" and "s" with default
tunables (sharing the partition in per-host mode), "o" with a vCPU quota
that never binds (two CPUs for its one vCPU), which keeps its own group
weighing what one shared vCPU does (100).  A spinning process stands for
a busy helper: it is put where libvirt puts a helper of h (its domain
group, with systemd-machined the 'libvirt' group in its scope).  Each run measures, in a balanced order:

  per-host         vcpu_cgroup = "per-host", no helper
  per-host+helper  the same with h's helper spinning
  stock+helper     vcpu_cgroup = "per-domain" (stock libvirt's placement),
                   with h's helper spinning

and reports, per layout, the CPU time of s's vCPU and of h's vCPU over
o's (s/o, h/o), with a 95 % interval of the ratio between layouts over the
runs (bench/benchstats.py).  The arithmetic of the weights on 2 CPUs and
four spinning threads: per-host+helper gives the partition (200) three
threads against o's one (100), s/o = 0.67; stock gives each domain 100, so
the helper shares h's group with h's vCPU and s/o = 1, h/o = 0.5.

Only placement is checked (the test is not in the gate: tools/lab testhost
boot --variant v2-nosystemd --tests vcpu_cgroup_helpers); the figures are
printed ('# measured:') and recorded in docs/vcpu-cgroup.md.
"""

import os
import signal
import statistics
import subprocess
import time

import labtest
import vcpucg
from labtest import daemon, guest, measure
from lablib.bench import benchstats

RUNS = 6
LAYOUTS = ["per-host", "per-host+helper", "stock+helper"]
WINDOWS = 3
SECONDS = 3
SETTLE = 3
H, S, O = "vh-h", "vh-s", "vh-o"


def start_guests():
    """{role: domain name} of the three guests."""
    return {"h": guest.create(H, vcpus=1, workload="spin"),
            "s": guest.create(S, vcpus=1, workload="spin"),
            "o": guest.create(O, vcpus=1, workload="spin", cputune={"quota": "200000"})}


def start_helper(h):
    """A spinning process in the group where libvirt puts h's helpers."""
    helper = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    group = vcpucg.limits_group(vcpucg.domain_group(h))
    with open(os.path.join(labtest.CGROOT, group.lstrip("/"), "cgroup.procs"), "w") as fh:
        fh.write(str(helper.pid))
    return helper, group


def stop_helper(helper):
    if helper and helper.poll() is None:
        os.kill(helper.pid, signal.SIGKILL)
        helper.wait()


def measure_layout(t, layout):
    """One layout: start the daemon in its mode, the guests and the helper;
    the median over WINDOWS of s/o and h/o (vCPU run time) and of the
    helper's CPUs."""
    mode = "per-domain" if layout.startswith("stock") else "per-host"
    daemon.start(vcpu_cgroup=mode, quiet=True)
    helper = None
    try:
        dom = start_guests()
        shared = mode == "per-host"
        placed = (vcpucg.all_shared(dom["h"]) == shared and vcpucg.all_shared(dom["s"]) == shared
                  and not vcpucg.all_shared(dom["o"]))
        t.ok(placed, f"{layout}: h and s {'share' if shared else 'do not share'} the "
             f"partition, o has its own group",
             "\n".join(f"{r}: {vcpucg.placement_report(n)}" for r, n in dom.items()))
        threads = {r: (guest.qemu_pid(n), guest.vcpu_tids(n)[0]) for r, n in dom.items()}
        if layout.endswith("+helper"):
            helper, group = start_helper(dom["h"])
            got = labtest.thread_cgroup(helper.pid, helper.pid, "cpu")
            t.ok(got == group, f"{layout}: the helper is in h's group", (got, group))
            threads["helper"] = (helper.pid, helper.pid)
        time.sleep(SETTLE)
        so, ho, hp = [], [], []
        for _ in range(WINDOWS):
            w = measure.sample(threads, SECONDS)
            so.append(w["s"][0] / w["o"][0])
            ho.append(w["h"][0] / w["o"][0])
            hp.append(w["helper"][0] if helper else 0.0)
        return {"s/o": statistics.median(so), "h/o": statistics.median(ho),
                "helper_cpus": statistics.median(hp)}
    finally:
        stop_helper(helper)
        for n in (H, S, O):
            daemon.virsh(["destroy", guest.lab_name(n)], check=False, capture=True)


def main(t):
    if not vcpucg.V2:
        labtest.skip_all("cgroup v1: a sharing domain's helpers stay in its own group, which "
                         "is weighed apart from the shared vCPUs")
    runs = []
    for i, order in enumerate(benchstats.balanced_orders(LAYOUTS, RUNS)):
        run = {}
        for layout in order:
            run[layout] = measure_layout(t, layout)
            print(f"# run {i + 1}/{RUNS}: {layout}: " + ", ".join(
                f"{k} {v:.3f}" for k, v in run[layout].items()), flush=True)
        runs.append(run)
    for layout in LAYOUTS:
        for field in ("s/o", "h/o"):
            xs = [r[layout][field] for r in runs]
            print(f"# measured: {layout}: {field} mean {sum(xs) / len(xs):.3f} "
                  f"(runs: {', '.join(f'{x:.3f}' for x in xs)})", flush=True)
    for a, b in (("per-host", "per-host+helper"), ("stock+helper", "per-host+helper")):
        for field in ("s/o", "h/o"):
            c = benchstats.compare(runs, a, b, field)
            print(f"# measured: {benchstats.describe(c)}", flush=True)


labtest.run(main)
