# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench sched, shortened: the layouts and the effect they must show.

One repetition of the {2,1,1} mix with 3 s windows.  Checks that every vCPU
thread sat in the cgroup the layout prescribes (read from /proc), that the
per-domain layout gives the 2-vCPU domain clearly less per vCPU than the
1-vCPU domains while the shared group does not, and that the benchmark
removes its cgroups and stops its processes.  Thresholds are loose (the
benchmark itself reports the medians): per-domain ratio <= 0.75, per-host
ratio >= 0.8; measured on this 2-CPU host: 0.47-0.56 and 0.96-1.16.  When
a ratio is outside its bound, the mix is measured once more and the second
measurement counts (both are printed with their margins).
"""


import labtest
from lablib.bench import benchsched


PER_DOMAIN_AT_MOST = 0.75
PER_HOST_AT_LEAST = 0.8


def measure(mount):
    rep = benchsched.run_mix(mount, "2-1-1", reps=1, seconds=3, settle=1)["reps"][0]
    return rep["per-domain"], rep["per-host"]


def main(t):
    mount = labtest.bench_setup()
    pd, ph = measure(mount)
    if not (labtest.within(pd["ratio"], PER_DOMAIN_AT_MOST)
            and labtest.within(ph["ratio"], PER_HOST_AT_LEAST, above=True)):
        print(f"# outside a bound in the first measurement: per-domain {pd['ratio']}, "
              f"per-host {ph['ratio']}; measuring once more, the second counts", flush=True)
        pd, ph = measure(mount)
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
    t.bound(pd["ratio"], PER_DOMAIN_AT_MOST,
            f"per-domain: large/small per-vCPU ratio {_fmt(pd['ratio'])} <= {PER_DOMAIN_AT_MOST}")
    t.bound(ph["ratio"], PER_HOST_AT_LEAST,
            f"per-host: large/small per-vCPU ratio {_fmt(ph['ratio'])} >= {PER_HOST_AT_LEAST}",
            above=True)
    labtest.check_bench_cleanup(t, mount)


def _fmt(x):
    return "none" if x is None else f"{x:.2f}"


labtest.run(main)
