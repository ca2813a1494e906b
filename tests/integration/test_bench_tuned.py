# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench tuned, shortened: the layouts, and that the benchmark
measures what it says.

One repetition with 2 s windows.  Checks that noisy's vCPU threads sat in
the groups each placement prescribes (read from /proc), that noisy gets
its share (within SHARE_WITHIN) wherever its vCPUs are while the main
threads sleep, and below the per-host group while they wake, and that the
benchmark removes its cgroups and stops its processes.  What groups of
its own cost with waking main threads (the benchmark's finding: 0.93 of
the share on this 2-CPU host with noisy's vCPUs on two CPUs) is printed,
not compared: it is the kernel's behaviour under study, not ours.
"""


import labtest
from lablib.bench import benchsched, benchtuned

# How far from its share noisy may be.  Readings (how far off): 0.05-0.51 %
# alone on the CPUs (four runs on one development VM, one on another); 5.45 %
# with a few unit-test programs run beside it, and 5.6 % beside a kernel
# build, both of which failed the 5 % this bound was.  25 % lies more than
# three times that spread beyond the farthest reading, and still fails a
# layout that weighs noisy's two vCPUs as one (about 0.6 of its share) or
# a benchmark that reads the wrong threads.
SHARE_WITHIN = 0.25


def main(t):
    mount = labtest.bench_setup()
    res = benchtuned.run_configs(mount, reps=1, seconds=2, settle=1)
    top = f"/{benchsched.BENCH_GROUP}/machine"
    want = {
        "per-host": [f"{top}/vcpus.partition"],
        "own": [f"{top}/noisy.libvirt-qemu/vcpu0", f"{top}/noisy.libvirt-qemu/vcpu1"],
        "nested": [f"{top}/vcpus.partition/noisy.libvirt-qemu/vcpu0",
                   f"{top}/vcpus.partition/noisy.libvirt-qemu/vcpu1"],
    }
    t.eq(len(res), 12, "every placement, main thread and arrangement was measured")
    for (placement, wake, arrangement), reps in sorted(res.items()):
        how = (f"main threads waking every {wake} ms" if wake else "main threads asleep") \
            + f", noisy {arrangement}"
        r = reps[0]
        t.eq(r["cgroups"], want[placement], f"{placement}, {how}: noisy's vCPU threads' groups")
        share = r["noisy"] * 3
        if placement == "own" and wake:
            print(f"# {placement}, {how}: noisy gets {share:.3f} of its share "
                  f"(arrangement held {r['held'] * 100:.0f} %)", flush=True)
        else:
            t.bound(abs(share - 1), SHARE_WITHIN,
                    f"{placement}, {how}: noisy gets its share within "
                    f"{SHARE_WITHIN * 100:.0f} % ({share:.3f})",
                    figure=f"{share:.3f} of its share from 1")
    labtest.check_bench_cleanup(t, mount)


labtest.run(main)
