# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-host" keeps the meaning of every CPU tunable.

Four 1-vCPU guests and one 2-vCPU guest ("noisy") whose vCPUs spin, all
busy on the host's CPUs.  With every domain weighed per vCPU, noisy gets
2/6 of the CPU time; a tuned noisy gets what stock libvirt gives it
relative to four default 1-vCPU domains:

- a cap that does not bind (vcpu_quota 50000: 2 x 0.5 CPUs) leaves its
  CPU time near its share (printed, not compared): on cgroup v1 its vCPUs
  are nested in the per-host group, in vcpuN groups holding the quota
  whose group weighs 1024 per vCPU ('tools/lab bench tuned' shows why: in
  groups of its own beside the per-host group, QEMU's main thread waking
  in the domain's group cost its vCPUs up to 7 %); on v2 it has its own
  group; a cap that binds (half the CPUs noisy's vCPUs ran with the
  defaults: about 0.33 CPUs on an idle 2-CPU host, less on a busy one,
  where a fixed cap would no longer bind) holds its vCPUs at that cap
  (within 12 %, and at most 0.75 of its share before, so that a host busy
  with other work cannot pass an uncapped noisy off as capped); no cap
  ever raises its CPU time (by more than 12 %, 15 % on TCG CPUs);
- cpu_shares=S gives it S / (4 x D + S) of the CPU time (D = 1024 on
  cgroup v1, 100 on v2; within 12 %), for S = 4 D and S = D / 2 where the
  host's CPUs are real; halving the default lowers its CPU time by at
  least a quarter, four times the default raises it by at least a quarter.
  On the test host, whose CPUs are QEMU TCG CPUs with coarse ticks, a
  domain weighing an eighth of its competitors gets more than its share
  with either placement (0.120 stock, 0.133-0.143 per-host, against
  0.111), and four times its competitors' 0.504-0.539 against 0.500, so
  there both figures are printed ('# measured:'), not compared;
- the four default guests keep equal CPU time per vCPU (max/min at most
  1.45, 1.75 on TCG CPUs), except under the binding cap, where no fairness
  claim is made;
- writing the defaults back brings it back to its share (on v1, where
  they are written live; on v2 that is a start without <cputune>, which
  the first measurement is).

A setting whose measured checks fail is measured once more before they
count; every measured check prints its margin ('# margin:').

CPU time is each vCPU thread's run time from /proc/PID/task/TID/schedstat,
the median of three windows, as a fraction of the run
time of all the guests' vCPUs (the host's busy CPUs); the cap is checked
in CPUs, run time per second, as CFS bandwidth control enforces it (as a
fraction of the guests' run time it reads high where other threads take
some of the CPUs: 0.213 against 0.200 on the test host).  On cgroup v1 the settings are
applied live (schedinfo --live); on cgroup v2, where placement is chosen at
start, noisy is started again with them in its <cputune>.
"""

import statistics
import time

import labtest
import vcpucg
from labtest import daemon, guest, measure

# The test host's CPUs are QEMU TCG CPUs (tools/lablib/testing/testhost.py)
TCG_CPUS = labtest.CONFIG.testhost
# TCG CPUs are noisier: more windows, and wider bounds where CPU time is
# compared between guests.  Each bound sits at least three times the
# spread of the figure's recorded readings beyond their worst, so that
# noise cannot cross it (ci/README.md lists the margins seen):
# - the small guests' max/min: 1.01-1.20 on TCG CPUs (three clean-clone
#   runs, two rows by hand and the row of 2026-11-27), 1.01-1.12 on the
#   development host (1.12 twice in one run of 2026-11-27);
# - noisy after a cap that does not bind: 1.009-1.045 of its share before
#   on TCG CPUs (its own group gets a little more than the per-host group
#   there, as a light domain does, see docs/performance.md), 0.96-1.03 on
#   the development host.  How close it stays to its share is printed
#   ('# measured:'), not compared; that no cap raises it is the gate.
# A setting whose measured checks fail is measured once more, and the
# second measurement counts (judge()).  Three windows everywhere: five on
# TCG CPUs made the test take over 15 minutes in a test host row on a
# slow machine, past the runner's limit then.
WINDOWS = 3
EQUAL = 1.75 if TCG_CPUS else 1.45
NEVER_MORE = 1.15 if TCG_CPUS else 1.12
# A binding cap: noisy's vCPUs in CPUs, within this of the cap, and its
# fraction of the guests' CPU time at most BINDS of its share before (a
# fixed cap of 0.4 of 2 CPUs, 0.6 of noisy's uncapped CPUs, read 0.60-0.61
# on the development host and 0.62-0.68 on the test host; the cap at half
# noisy's uncapped CPUs reads lower; an uncapped noisy reads 1.02)
CAP_WITHIN = 0.12
BINDS = 0.85 if TCG_CPUS else 0.75
# Four times the default weight raises noisy by at least this much (the
# rule gives 0.500 from 0.333); on TCG CPUs the rule's figure itself is
# printed, not compared: 0.504-0.539 read there, against 0.500
RAISES = 1.25
SECONDS = 3
# After a move the scheduler's load averages take a few seconds to settle
SETTLE = 3
SMALL = ["vw-small1", "vw-small2", "vw-small3", "vw-small4"]
NOISY = "vw-noisy"
D = int(vcpucg.DEFAULT_SHARES)
PERIOD = 100000


def threads(names):
    out = {}
    for name in names:
        pid = guest.qemu_pid(name)
        for i, tid in guest.vcpu_tids(name).items():
            out[(name, i)] = (pid, tid)
    return out


def measure_shares(names, noisy):
    """{name: median fraction of the guests' CPU time}, the median ratio
    max/min of the small guests' per-vCPU CPU time, and the median CPUs
    noisy's vCPUs used (run time per second)."""
    fractions = {n: [] for n in names}
    spreads = []
    noisy_cpus = []
    th = threads(names)
    time.sleep(SETTLE)
    for _ in range(WINDOWS):
        s = measure.sample(th, SECONDS)
        per = {n: sum(v[0] for k, v in s.items() if k[0] == n) for n in names}
        total = sum(per.values())
        for n in names:
            fractions[n].append(per[n] / total)
        small = [per[n] for n in names if n != noisy]
        spreads.append(max(small) / min(small))
        noisy_cpus.append(per[noisy])
    return ({n: statistics.median(v) for n, v in fractions.items()},
            statistics.median(spreads), statistics.median(noisy_cpus))


def judge(t, measure_bounds):
    """The measured checks of one setting, with one re-measurement: when
    any is outside its bound, the setting is measured once more and the
    second measurement counts (both are printed).  measure_bounds()
    measures and returns [(value, limit, description, t.bound() options)]."""
    bounds = measure_bounds()
    if not all(labtest.within(v, limit, **kw) for v, limit, _, kw in bounds):
        outside = [d for v, limit, d, kw in bounds if not labtest.within(v, limit, **kw)]
        print(f"# outside its bound in the first measurement: {'; '.join(outside)}; "
              f"measuring once more, the second measurement counts", flush=True)
        bounds = measure_bounds()
    for v, limit, what, kw in bounds:
        t.bound(v, limit, what, **kw)


def case_bounds(what, check, want, cputune, before, frac, spread, cpus):
    """The measured checks of one setting of noisy (see the docstring)."""
    out = []
    if check != "capped":
        # (No fairness claim under a binding cap: the load balancer can
        # leave both of noisy's capped vCPUs on one CPU for seconds, beside
        # one small guest, and the three others on the other CPU: 0.57
        # against 0.33 each.  Each capped vCPU shows a load of 1023, as a
        # spinning one does, though it runs a fifth of the time.  'tools/lab
        # bench mixed' records where they ran; docs/performance.md "Mixed
        # hosts".)
        out.append((spread, EQUAL, f"{what}: the small guests get equal CPU time "
                    f"({spread:.2f})", {"figure": "max/min"}))
    if check in ("unchanged", "capped"):
        out.append((frac, before * NEVER_MORE, f"{what}: a cap never raises noisy's CPU time "
                    f"({before:.3f} -> {frac:.3f})", {}))
    if check == "capped":
        # The cap in CPUs: each of the 2 vCPUs runs quota per period; and it
        # binds: an uncapped noisy on a host busy with other work could read
        # near the cap in CPUs, but not at a fraction of its share
        cap = 2 * int(cputune["quota"]) / PERIOD
        out.append((abs(cpus - cap), cap * CAP_WITHIN,
                    f"{what}: noisy is held at its cap, in CPUs ({cap:.2f} CPUs, got "
                    f"{cpus:.3f})", {"unit": "CPUs"}))
        out.append((frac, before * BINDS,
                    f"{what}: the cap binds: noisy at most {BINDS} of its share before "
                    f"({frac / before:.2f})", {}))
    if check == "lower":
        out.append((frac, before * 0.75, f"{what}: half the default weight lowers noisy by a "
                    f"quarter or more ({before:.3f} -> {frac:.3f})", {}))
    if check == "higher":
        out.append((frac, before * RAISES, f"{what}: four times the default weight raises "
                    f"noisy by a quarter or more ({before:.3f} -> {frac:.3f})", {"above": True}))
    if want is not None and (not TCG_CPUS or check == "back"):
        out.append((abs(frac - want), want * 0.12,
                    f"{what}: noisy gets {want:.3f} of the CPU time, as stock libvirt gives it "
                    f"(got {frac:.3f})", {"figure": f"noisy {frac:.3f} from {want:.3f}"}))
    elif want is not None:
        print(f"# measured: {what}: TCG CPUs, not compared: noisy {frac:.3f}, the rule "
              f"{want:.3f}", flush=True)
    return out


def start_noisy(cputune=None):
    return guest.create(NOISY, vcpus=2, workload="spin", cputune=cputune)


def apply(noisy, settings, cputune):
    """schedinfo --live on cgroup v1; on v2 start noisy again with the
    values in its definition.  Returns noisy's (new) name."""
    if not vcpucg.V2:
        p = vcpucg.schedinfo(noisy, *settings)
        if p.returncode != 0:
            raise labtest.LabError(f"schedinfo {settings}: {p.stderr.strip()}")
        return noisy
    daemon.virsh(["destroy", noisy], capture=True)
    return start_noisy(cputune)


def main(t):
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    small = [guest.create(n, vcpus=1, workload="spin") for n in SMALL]
    noisy = start_noisy()
    names = small + [noisy]

    base = {}
    base_cpus = []

    def defaults():
        got, spread, cpus = measure_shares(names, noisy)
        base.update(got)
        base_cpus[:] = [cpus]
        return [(abs(got[noisy] - 2 / 6), 2 / 6 * 0.12,
                 f"defaults: noisy gets 2/6 of the CPU time ({got[noisy]:.3f})",
                 {"figure": f"noisy {got[noisy]:.3f} from 0.333"}),
                (spread, EQUAL, f"defaults: the small guests get equal CPU time ({spread:.2f})",
                 {"figure": "max/min"})]

    judge(t, defaults)

    half = D // 2
    # A cap at half of what noisy's vCPUs ran uncapped binds on any host:
    # a fixed 0.4 CPUs did not bind where other work left the guests one
    # CPU of two (noisy then ran 0.33 CPUs uncapped; two runs of
    # 2026-11-27 beside a kernel build)
    binds = max(1000, int(base_cpus[0] / 2 / 2 * PERIOD) // 1000 * 1000)
    cases = [
        # name, schedinfo settings, <cputune>, expected fraction, extra check
        ("vcpu_quota=50000 (does not bind)", ["vcpu_quota=50000"], {"quota": "50000"},
         None, "unchanged"),
        (f"vcpu_quota={binds} (binds)", [f"vcpu_quota={binds}"], {"quota": str(binds)},
         None, "capped"),
        (f"cpu_shares={half}", [f"cpu_shares={half}", "vcpu_quota=-1"], {"shares": str(half)},
         half / (4 * D + half), "lower"),
        (f"cpu_shares={4 * D}", [f"cpu_shares={4 * D}"], {"shares": str(4 * D)},
         4 * D / (4 * D + 4 * D), "higher"),
    ]
    if not vcpucg.V2:
        # On v2 writing the defaults back is a start without <cputune>, as
        # the first measurement was: measured there already
        cases.append(("defaults written back", [f"cpu_shares={D}", "vcpu_quota=-1"], None,
                      base[noisy], "back"))
    for what, settings, cputune, want, check in cases:
        noisy = apply(noisy, settings, cputune)
        names = small + [noisy]

        def measured(what=what, check=check, want=want, cputune=cputune, noisy=noisy,
                     names=names):
            got, spread, cpus = measure_shares(names, noisy)
            frac = got[noisy]
            print(f"# {what}: noisy {frac:.3f} of the guests' CPU time ({cpus:.3f} CPUs), "
                  f"small guests max/min {spread:.2f}", flush=True)
            if check == "unchanged":
                # A figure, not a gate: its own group gets a little more
                # than the per-host group on TCG CPUs (1.009-1.045)
                print(f"# measured: {what}: noisy's CPU time {frac / base[noisy]:.3f} of its "
                      f"share before ({base[noisy]:.3f} -> {frac:.3f})", flush=True)
            return case_bounds(what, check, want, cputune, base[noisy], frac, spread, cpus)

        judge(t, measured)
        if cputune and "shares" in cputune:
            dom = vcpucg.domain_group(noisy)
            t.eq(labtest.cgroup_value("cpu", dom, "cpu.shares"), cputune["shares"],
                 f"{what}: noisy's own group weighs its cpu_shares")
        if check == "unchanged":
            # The weight written is the mode's (per vCPU), on the group
            # nested in the per-host group on v1, on its own group on v2;
            # what is reported is what was set (nothing: the default)
            if vcpucg.V2:
                weighed = vcpucg.domain_group(noisy)
            else:
                t.ok(vcpucg.all_nested(noisy), f"{what}: noisy's vCPUs are nested in the "
                     "per-host group", vcpucg.placement_report(noisy))
                weighed = vcpucg.nested_group(noisy)
            t.eq(labtest.cgroup_value("cpu", weighed, "cpu.shares"), str(2 * D),
                 f"{what}: {weighed} weighs {2 * D}, the default per vCPU")
            t.eq(reported_shares(noisy), str(D),
                 f"{what}: schedinfo reports the cpu_shares that was set ({D})")


def reported_shares(name):
    p = vcpucg.schedinfo(name, live=True)
    for line in p.stdout.splitlines():
        if line.startswith("cpu_shares"):
            return line.split(":", 1)[1].strip()
    return None


labtest.run(main)
