# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench scale: idle steal on a simulated many-CPU NUMA host.

This machine has 2 cores, so the many-CPU host is the Debian 13 test host
(testhost.py) booted under QEMU TCG with the lab kernel and 8 or 16 CPUs
in 2 NUMA nodes (one socket, so one last-level cache, per node; the
memory split evenly), cgroup v1 with cpu,cpuacct co-mounted (the
v1-comounted row, no systemd).  The guest kernel's scheduler makes its
real decisions on that topology; its CPUs are emulated, far slower than
hardware, and time-share the host's cores.

Each boot runs, inside, tests/integration/test_idle_steal_trace.py (the
trace-based idle steal against the kernel's own accounting, on this very
kernel) and then 'tools/lab bench scale --in-guest' with every mix of its
CPU count (tools/lablib/bench/benchscale.py).  Its records (benchscale.RECORDS,
JSON) come back on a disk of their own: the runner writes them as a tar
onto /dev/vdb, an empty raw file on this side (testhost.boot's
results_disk), read when the guest has stopped (read_records).  The
results are written, with a Markdown table, to _build/bench/scale (or
--out).

'--smoke' is the stage of tools/lab test: 4 CPUs, the 'smoke' mix, one
repetition of 2-second windows, on the image tools/lab test just built.
"""

import json
import math
import os
import statistics
import tarfile
import time

from ..common import LabError, build_dir, require_root, step
from ..bench.benchkit import check_args, command_line, publish, republish
from ..bench.benchscale import BOOT_TUNINGS, LAYOUTS, MIXES, RECORDS, SETTLE, check_tunings
from ..bench import benchstats
from ..bench.benchsched import fmt, machine_info
from .testhost import boot, host_lock, machine_args
from .testhostimage import build, built_kernel_image, kernel_image

NODES = 2
VARIANT = "v1-comounted"
BOOT_S = 600            # a 16-CPU TCG boot to the runner, and its first test, at most
SMOKE = {"mixes": ["smoke"], "reps": 1, "seconds": 2}


def read_records(disk):
    """The in-guest run's records from the results disk, where the runner
    wrote them as a tar: {"topology": ..., "results": [...]}, or a string
    that says why there are none."""
    try:
        with tarfile.open(disk) as tar:
            with tar.extractfile(RECORDS) as fh:
                return json.load(fh)
    except (OSError, KeyError, tarfile.TarError) as e:
        return f"no {RECORDS} on the results disk ({e.__class__.__name__}: {e})"
    except ValueError as e:
        return f"{RECORDS} on the results disk is not JSON ({e})"


def memory_mb(cpus):
    return 2048 if cpus <= 4 else 4096


def guest_args(mixes, reps, seconds, balancing, tunings=("none",)):
    """The kernel command line: a boot-time tuning's parameter (idle=poll)
    and unsteal.bench=, the in-guest command's arguments joined by commas."""
    args = []
    for m in mixes:
        args += ["--mix", m]
    for t in tunings:
        args += ["--tuning", t]
    args += ["--reps", str(reps), "--seconds", str(seconds), "--numa-balancing", balancing]
    return " ".join([BOOT_TUNINGS[t] for t in tunings if t in BOOT_TUNINGS]
                    + ["unsteal.bench=" + ",".join(args)])


def boots(mixes, tunings):
    """The boots a run needs: [(CPUs, [mix], [tuning])], one per CPU count,
    and one more for each tuning of the kernel command line."""
    by_cpus = {}
    for m in mixes:
        by_cpus.setdefault(MIXES[m][0], []).append(m)
    runtime = [t for t in tunings if t not in BOOT_TUNINGS]
    out = []
    for cpus in sorted(by_cpus):
        if runtime:
            out.append((cpus, by_cpus[cpus], runtime))
        out += [(cpus, by_cpus[cpus], [t]) for t in tunings if t in BOOT_TUNINGS]
    return out


def one_boot(cpus, mixes, reps, seconds, balancing, tcg, kernel_path, tunings=("none",)):
    """Boots the test host with cpus CPUs and the kernel at kernel_path and
    runs mixes inside under each tuning: what it reported (topology,
    results) and what went wrong."""
    runs = (2 if balancing == "both" else 1) * len(tunings)     # of each mix
    measure_s = len(mixes) * runs * reps * len(LAYOUTS) * (SETTLE + seconds)
    # The replay of the traces runs in the emulated guest, after the windows
    timeout = BOOT_S + 3 * measure_s + 60 * cpus
    step(f"bench: scale: {cpus} CPUs in {NODES} nodes, mixes {', '.join(mixes)}, "
         f"tuning {', '.join(tunings)}, NUMA balancing {balancing}: about {math.ceil(measure_s / 60)} min of windows "
         f"(watchdog {timeout} s)")
    t0 = time.monotonic()
    disk = os.path.join(build_dir(), "bench", f"scale-{cpus}-records.tar")
    os.makedirs(os.path.dirname(disk), exist_ok=True)
    with host_lock():
        out = boot(VARIANT, timeout=timeout, tests=["idle_steal_trace"], kernel="ours",
                   kernel_path=kernel_path,
                   machine=machine_args(cpus, NODES, memory_mb(cpus)), tcg=tcg,
                   append_extra=guest_args(mixes, reps, seconds, balancing, tunings),
                   name=f"scale-{cpus}", results_disk=disk)
    records = read_records(disk)
    os.unlink(disk)
    problems = []
    if isinstance(records, str):
        problems.append(records)
        records = {}
    if not out.done:
        problems.append("the test host did not finish ("
                        + ("watchdog expired" if out.timed_out else "it stopped early") + ")")
    for r in out.results:
        if not r.ok or r.skipped:
            problems.append(f"{r.name}: {'skipped' if r.skipped else 'failed'}{r.rest}")
    if out.splats:
        problems.append(f"kernel problem lines: {out.splats[0]}")
    results = records.get("results", [])
    if len(results) != len(mixes) * runs:
        problems.append(f"{len(results)} results came back, {len(mixes) * runs} expected")
    topo = records.get("topology") or {}
    step(f"bench: scale: {cpus} CPUs done in {time.monotonic() - t0:.0f} s "
         f"(nodes {topo.get('nodes')})" + (f"; problems: {'; '.join(problems)}"
                                           if problems else ""))
    return topo, results, [f"{cpus} CPUs: {p}" for p in problems]


def run_bench(mixes=None, reps=6, seconds=10, balancing="both", tcg="single",
              outdir=None, command=None, smoke=False, tunings=None):
    require_root("bench scale")
    if not smoke and reps % len(LAYOUTS):
        raise LabError(f"--reps {reps}: give a multiple of {len(LAYOUTS)}, so that each "
                       "layout is measured equally often in each position")
    mixes = check_args(mixes, {m: v for m, v in MIXES.items() if m != "smoke" or smoke},
                       reps, seconds)
    tunings = check_tunings(tunings)
    outdir = outdir or os.path.join(build_dir(), "bench", "scale-smoke" if smoke else "scale")
    if not smoke:
        build()             # the image carries the benchmark's code
    results = {"command": command, "machine": machine_info(), "seconds": seconds,
               "settle": SETTLE, "reps": reps, "tcg": tcg, "nodes": NODES,
               "variant": VARIANT, "hosts": [], "mixes": []}
    problems = []
    # Built (or checked) once for all the boots; the smoke run takes what
    # tools/lab test has just built
    kernel_path = built_kernel_image() if smoke else kernel_image()
    for cpus, boot_mixes, boot_tunings in boots(mixes, tunings):
        topo, res, bad = one_boot(cpus, boot_mixes, reps, seconds, balancing, tcg, kernel_path,
                                  boot_tunings)
        results["hosts"].append(topo)
        results["mixes"] += res
        problems += bad
    # What came back is written even when a boot failed
    results["problems"] = problems
    publish("scale", results, outdir, markdown, plot)
    if problems:
        raise LabError("bench scale: " + "; ".join(problems))
    return results


def check_smoke(results):
    """tools/lab test's checks of a smoke run: every layout measured, with
    a trace that covers its window."""
    bad = []
    for mix in results["mixes"]:
        for rep in mix["reps"]:
            for lay in LAYOUTS:
                w = rep.get(lay)
                if w is None:
                    bad.append(f"{mix['mix']}: no {lay} window")
                    continue
                if not w["threads"] or any("idle_steal" not in v for v in w["threads"].values()):
                    bad.append(f"{mix['mix']}: {lay}: threads without idle steal")
                if w["trace_s"] < 0.5 * results["seconds"]:
                    bad.append(f"{mix['mix']}: {lay}: the trace covers {w['trace_s']:.2f} s "
                               f"of a {results['seconds']} s window")
    if bad:
        raise LabError("bench scale smoke: " + "; ".join(bad))


def accepted(results):
    """(windows whose trace agreed with the kernel, windows measured)."""
    windows = [w for mix in results["mixes"] for rep in mix["reps"]
               for w in (rep.get(lay) for lay in LAYOUTS) if w is not None]
    return sum(1 for w in windows if not w.get("refused")), len(windows)


# The smoke run's TCG: one thread for all vCPUs.  There the trace and
# schedstat disagree in nearly every window (three runs: 17 of 18
# refused), so the smoke run's windows are refused, which it reports; with
# one thread per vCPU they agreed (2 of 24 refused), but one boot of five
# ended in an Oops (int3 in ttwu_do_activate, as the tracepoints were
# patched in), so the gate does not boot that way
# (docs/results/2026-11-29-scale-smoke-tcg.md).
SMOKE_TCG = "single"


def smoke(balancing="both", tcg=None, outdir=None,
          command="tools/lab bench scale --smoke"):
    """The smoke run, checked (check_smoke); its results.  How many windows
    the trace check accepted is reported, not judged: a refusal is a
    measurement that could not be trusted, not a breakage."""
    results = run_bench(balancing=balancing, tcg=tcg or SMOKE_TCG, outdir=outdir,
                        command=command, smoke=True, **SMOKE)
    check_smoke(results)
    ok, n = accepted(results)
    step(f"bench scale smoke: {ok} of {n} windows accepted (the trace agreed with schedstat)")
    return results


def test_smoke():
    """tools/lab test: the measurement code end to end on a 4-CPU, 2-node
    test host: (passed, failed)."""
    smoke()
    return 1, 0


def plot(results, outdir):
    from ..bench import plots
    if results["mixes"]:
        plots.scale_idle_steal(results, os.path.join(outdir, "scale-idle-steal.png"), LAYOUTS)


def command(args):
    if args.replot:
        republish("scale", args.out or os.path.join(build_dir(), "bench", "scale"), markdown, plot)
        return 0
    if args.smoke:
        if args.mix or args.reps or args.seconds or args.tuning:
            raise LabError("--smoke runs its own mix, tuning, repetitions and window")
        smoke(args.numa_balancing, args.tcg, args.out, command_line())
        return 0
    kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds)) if v is not None}
    run_bench(mixes=args.mix, balancing=args.numa_balancing, tcg=args.tcg or "single",
              outdir=args.out,
              command=command_line(), tunings=args.tuning, **kw)
    return 0


# ---------------------------------------------------------------- report

def _rng(mix, lay, field, spec=".3f"):
    r = mix["range"][lay].get(field)
    return "n/a" if not r else f"{r[0]:{spec}}–{r[1]:{spec}}"


def domain_idle_steal(mix, lay, dom):
    """The median over the repetitions of a domain's idle steal per vCPU;
    refused windows (benchscale.add_idle_steal) left out, None if all were."""
    names = [f"{dom['name']}/{i}" for i in range(dom["vcpus"])]
    xs = [sum(rep[lay]["threads"][n]["idle_steal"] for n in names) / dom["vcpus"]
          for rep in mix["reps"] if not rep[lay].get("refused")]
    return statistics.median(xs) if xs else None


def _pct(x):
    return fmt(None if x is None else x * 100, ".1f")


# (a, b, field, kind): b against a, per repetition (benchstats.compare)
# Idle steal compares as a difference: a layout that removes it (0) must
# not drop out of a ratio
COMPARISONS = [(a, "per-host", f, k) for a in ("per-domain", "per-domain-scaled")
               for f, k in (("idle_steal", "difference"), ("trace_idle", "difference"),
                            ("ratio", "ratio"))]


def comparisons(results):
    """Markdown lines: each mix's paired per-repetition comparisons with
    their 95 % bootstrap intervals, computed from the repetitions in the
    results (so --replot gives them for earlier results too); whether the
    layouts' order balanced."""
    lines = ["Paired per-repetition comparisons (large/small ratio: geometric mean of "
             "the ratios; idle steal: mean difference in vCPUs; host idle: in percentage "
             "points; 95 % bootstrap interval, expanded for few runs; a size only where "
             "it excludes no difference):", ""]
    for mix in results["mixes"]:
        runs = [{lay: rep[lay] for lay in LAYOUTS if lay in rep} for rep in mix["reps"]]
        balanced = mix.get("balanced")
        head = (f"- {mix['cpus']} CPUs, {mix['mix']}, NUMA balancing "
                f"{'on' if mix['numa_balancing'] else 'off'}"
                + (f", tuning {mix['tuning']}" if mix.get("tuning", "none") != "none" else "")
                + (": order balanced" if balanced else ": order not balanced"
                   if balanced is False else ": order not recorded"))
        lines.append(head)
        for a, b, field, kind in COMPARISONS:
            c = benchstats.compare(runs, a, b, field, kind)
            if c["estimate"] is None and not c["undefined"]:
                continue
            text = (benchstats.describe(c, scale=100, unit=" points", digits=1)
                    if field == "trace_idle" else
                    benchstats.describe(c, unit=" vCPUs", digits=3)
                    if kind == "difference" else benchstats.describe(c))
            lines.append(f"  - {text}")
    lines.append("")
    return lines


def markdown(results):
    tuned = any(m.get("tuning", "none") != "none" for m in results["mixes"])
    hosts = dict.fromkeys(f"{h.get('cpus')} CPUs, nodes {h.get('nodes')}"
                          for h in results["hosts"])
    lines = [f"Simulated hosts (QEMU TCG, {results['tcg']}-threaded, on "
             f"{results['machine']['cpus']} host CPUs): " + "; ".join(hosts)
             + f". {results['reps']} repetitions of {results['seconds']} s windows "
               "per layout, medians (ranges). Command: `" + (results["command"] or "") + "`.",
             "",
             "| CPUs | mix | NUMA bal. | " + ("tuning | " if tuned else "")
             + "layout | large/small per vCPU | Jain (busy) "
             "| steal (vCPUs) | idle steal, exact (vCPUs), median (range) | own / near / far "
             "| estimate | host idle (trace) |",
             "|---|---|---|" + ("---|" if tuned else "") + "---|---|---|---|---|---|---|---|"]
    for mix in results["mixes"]:
        for lay in LAYOUTS:
            m = mix["median"][lay]
            lines.append(f"| {mix['cpus']} | {mix['mix']} | "
                         f"{'on' if mix['numa_balancing'] else 'off'} | "
                         + (f"{mix.get('tuning', 'none')} | " if tuned else "") + f"{lay} | "
                         f"{fmt(m['ratio'])} | {fmt(m['jain'], '.3f')} | {fmt(m['steal'])} | "
                         f"{fmt(m['idle_steal'], '.3f')} ({_rng(mix, lay, 'idle_steal')}) | "
                         f"{fmt(m.get('idle_steal_own'), '.3f')} / "
                         f"{fmt(m.get('idle_steal_near'), '.3f')} / "
                         f"{fmt(m.get('idle_steal_far'), '.3f')} | "
                         f"{fmt(m['est_idle_steal'], '.3f')} | "
                         f"{_pct(m['trace_idle'])} % |")
    lines.append("")
    lines.append("Own / near / far: the idle steal during which the thread's own runqueue's "
                 "CPU was idle (wake-up latency), another CPU of its node was, or only CPUs "
                 "of the other node were; medians of each, so they need not add up to the "
                 "median of the whole (which also holds waits whose runqueue the trace did "
                 "not show).")
    lines.append("Estimate: steal x host idle of /proc/stat, the analyser's definition. Host "
                 "idle: the CPUs' idle time in the trace (/proc/stat's tick-sampled busy time "
                 "misses the ticks of emulated CPUs that QEMU has not run).")
    lines.append("")
    for p in results.get("problems", []):
        lines.append(f"**Problem:** {p}")
    for mix in results["mixes"]:
        for r, rep in enumerate(mix["reps"]):
            for lay in LAYOUTS:
                why = rep.get(lay, {}).get("refused")
                if why:
                    lines.append(f"**Refused** (the trace cannot be trusted, left out of the "
                                 f"medians): {mix['mix']}, {mix.get('tuning', 'none')}, NUMA "
                                 f"balancing {'on' if mix['numa_balancing'] else 'off'}, "
                                 f"repetition {r + 1}, {lay}: " + "; ".join(why[:3])
                                 + (f"; and {len(why) - 3} more" if len(why) > 3 else ""))
    lines += comparisons(results)
    for mix in results["mixes"]:
        lines.append(f"**{mix['mix']}**, NUMA balancing "
                     f"{'on' if mix['numa_balancing'] else 'off'}"
                     + (f", tuning {mix.get('tuning', 'none')}" if tuned else "")
                     + f" ({mix['description']}): "
                     "median CPU share per vCPU of each domain, % of one CPU (in brackets "
                     "its idle steal per vCPU, % of the time)")
        lines.append("")
        lines.append("| domain | vCPUs | duty | " + " | ".join(LAYOUTS) + " |")
        lines.append("|---|---|---|" + "---|" * len(LAYOUTS))
        for d in mix["domains"]:
            duty = f"{d['duty']} % of {d['period_ms']} ms" if d["duty"] < 100 else "busy"
            if d.get("mem_mb"):
                duty += f", {d['mem_mb']} MiB"
            lines.append(f"| {d['name']} | {d['vcpus']} | {duty} | "
                         + " | ".join(f"{mix['median'][lay]['per_vcpu'][d['name']] * 100:.1f} "
                                      f"({_pct(domain_idle_steal(mix, lay, d))})"
                                      for lay in LAYOUTS) + " |")
        lines.append("")
    return "\n".join(lines)
