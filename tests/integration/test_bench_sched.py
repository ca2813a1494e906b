# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench sched, shortened: the layouts and the effect they must show.

One repetition of the {2,1,1} mix with 3 s windows.  Checks that every vCPU
thread sat in the cgroup the layout prescribes (read from /proc), that the
per-domain layout gives the 2-vCPU domain clearly less per vCPU than the
1-vCPU domains while the shared group does not, and that the benchmark
removes its cgroups and stops its processes.  Thresholds are loose (the
benchmark itself reports the medians): per-domain ratio <= 0.75, per-host
ratio >= 0.8; measured on this 2-CPU host: 0.47-0.56 and 0.96-1.16.
"""


import labtest
from lablib.bench import benchsched


def main(t):
    mount = labtest.bench_setup()
    res = benchsched.run_mix(mount, "2-1-1", reps=1, seconds=3, settle=1)
    rep = res["reps"][0]
    pd, ph = rep["per-domain"], rep["per-host"]
    t.eq(sorted(pd["threads"]), ["big/0", "big/1", "small1/0", "small2/0"],
         "every vCPU thread was measured")
    t.ok(all(v["cgroup"] == f"/{benchsched.BENCH_GROUP}/machine/{k.split('/')[0]}"
             f".libvirt-qemu/vcpu{k.split('/')[1]}" for k, v in pd["threads"].items()),
         "per-domain: each vCPU thread in its domain's vcpuN group",
         {k: v["cgroup"] for k, v in pd["threads"].items()})
    t.ok(all(v["cgroup"] == f"/{benchsched.BENCH_GROUP}/machine/vcpus.partition"
             for v in ph["threads"].values()),
         "per-host: every vCPU thread in the shared group",
         {k: v["cgroup"] for k, v in ph["threads"].items()})
    t.bound(pd["ratio"], 0.75, f"per-domain: large/small per-vCPU ratio {pd['ratio']:.2f} <= 0.75")
    t.bound(ph["ratio"], 0.8, f"per-host: large/small per-vCPU ratio {ph['ratio']:.2f} >= 0.8",
            above=True)
    labtest.check_bench_cleanup(t, mount)


labtest.run(main)
