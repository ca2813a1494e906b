# SPDX-License-Identifier: GPL-2.0-or-later
"""Idle steal from a scheduler trace (tools/lablib/bench/schedtrace.py and
idlesteal.py) agrees with the kernel's own accounting on a real kernel.

Two spinning processes pinned to the last CPU, a 3-second recording of
sched_switch and sched_wakeup in a tracefs instance of our own, replayed:

- the replay's window starts once every CPU has switched and covers the
  traced span (tracing on to off, without the Recorder's set-up and
  read-back);
- each spinner's run and wait time from the replay match its
  /proc/PID/schedstat over the same seconds (within 3 % of the window);
- each is runnable all the time: run + wait is the whole window;
- their waiting is no idle steal with their real affinity (one CPU),
  whatever the other CPUs do;
- the same replay with the affinity widened to every CPU counts as idle
  steal the waiting during which another CPU was idle: one spinner always
  waits, so as a share of the wait the idle steal lies between the
  busiest other CPU's idle time and the sum of the other CPUs' idle times
  (within 0.03), whatever load other programs put on those CPUs.

Skipped on a kernel without tracefs.  The lab kernel has it (lab.config):
'tools/lab bench scale' runs this test in the many-CPU test host before
its windows, and so does the smoke run of tools/lab test.
"""

import os
import subprocess
import time

import labtest
from lablib.bench import idlesteal, schedtrace

SECONDS = 3
# Of the window: how far the replay's figures may be from the kernel's
TOLERANCE = 0.03


def schedstat(pid):
    with open(f"/proc/{pid}/schedstat") as fh:
        run_ns, wait_ns, _ = fh.read().split()
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


def main(t):
    if os.geteuid() != 0:
        labtest.skip_all("needs root (run through tools/lab test)")
    if not schedtrace.available():
        labtest.skip_all("this kernel has no tracefs")
    ncpu = os.cpu_count()
    if ncpu < 2:
        labtest.skip_all("needs two CPUs")
    last = ncpu - 1
    spinners = [subprocess.Popen(["taskset", "-c", str(last), "sh", "-c", "while :; do :; done"])
                for _ in range(2)]
    try:
        time.sleep(0.5)
        pids = [p.pid for p in spinners]
        affinity = {pid: os.sched_getaffinity(pid) for pid in pids}
        with schedtrace.Recorder() as rec:
            before = {pid: schedstat(pid) for pid in pids}
            t0 = time.monotonic()
            rec.start()
            time.sleep(SECONDS)
            lines = rec.stop()
            wall = time.monotonic() - t0
            after = {pid: schedstat(pid) for pid in pids}
    finally:
        for p in spinners:
            p.kill()
            p.wait()

    events = idlesteal.parse(lines)
    t.eq(set(map(frozenset, affinity.values())), {frozenset({last})},
         f"the spinners may run on CPU {last} only")
    t.ok(len(events) > 100, f"the trace holds switch and wake-up events ({len(events)})")
    real = {pid: affinity[pid] for pid in pids}
    window, totals, idle = idlesteal.replay(events, real, range(ncpu))
    # The span the replay can cover runs from the moment every CPU had
    # switched (Recorder.start() makes each switch) to the moment tracing
    # stopped; setting up and reading back the trace are not in it.  On a
    # TCG test host those took 0.2 s each of a 3.4 s recording (CI,
    # 2026-11-28), which a bound on the whole recording took for a
    # replay that had lost time.  Trace clock 'mono' and time.monotonic()
    # are both CLOCK_MONOTONIC, so the two can be compared.
    span = rec.stopped - rec.visited
    first = events[-1][0] - window if events else None
    if events:
        print(f"# the replay's window: {first - t0:+.3f} to {events[-1][0] - t0:+.3f} s; "
              f"every CPU had switched at {rec.visited - t0:+.3f} s, tracing stopped at "
              f"{rec.stopped - t0:+.3f} s, the recording ran 0 to {wall:.3f} s", flush=True)
    t.ok(first is not None and first <= rec.visited,
         "the replay knows every CPU once each has switched")
    t.bound(window, 0.9 * span, f"the replay covers the traced span ({span:.3f} s)",
            above=True, strict=True, unit="s", figure="the replay's window")
    for pid in pids:
        got = totals[pid]
        run = (after[pid][0] - before[pid][0]) / wall
        wait = (after[pid][1] - before[pid][1]) / wall
        print(f"# spinner {pid}: trace run {got.run / window:.3f} wait {got.wait / window:.3f}; "
              f"schedstat run {run:.3f} wait {wait:.3f}", flush=True)
        t.ok(abs(got.run / window - run) <= 0.03,
             f"spinner run time: trace {got.run / window:.3f} vs schedstat {run:.3f} of the window")
        t.ok(abs(got.wait / window - wait) <= 0.03,
             f"spinner wait time: trace {got.wait / window:.3f} vs schedstat {wait:.3f} of the window")
        t.ok((got.run + got.wait) / window >= 0.97,
             f"a spinner is runnable the whole window ({(got.run + got.wait) / window:.3f})")
        t.eq(got.idle_wait, 0.0, "pinned to one CPU: its waiting is no idle steal")

    # With every CPU allowed, one of the two spinners (two, while something
    # else runs on CPU `last`) waits at each moment, so their waiting is
    # idle steal exactly while another CPU is idle: as a share of their
    # wait, the idle steal lies between the busiest other CPU's idle time
    # and the sum of theirs (equal on 2 CPUs).  That holds whatever else
    # keeps those CPUs busy, so a busy host is no reason to skip it.
    wide = {pid: set(range(ncpu)) for pid in pids}
    _, totals, _ = idlesteal.replay(events, wide, range(ncpu))
    others = [idle[c] / window for c in range(ncpu) if c != last]
    wait = sum(v.wait for v in totals.values()) / window
    idle_wait = sum(v.idle_wait for v in totals.values()) / window
    share = idle_wait / wait if wait else 0.0
    lo, hi = max(others) - TOLERANCE, min(1.0, sum(others)) + TOLERANCE
    print(f"# affinity widened: idle steal {idle_wait:.3f} of {wait:.3f} vCPUs waiting; "
          f"the other CPUs idle {', '.join(f'{x:.3f}' for x in others)} of the window",
          flush=True)
    what = "affinity widened: the wait is idle steal exactly while another CPU is idle"
    t.ok(wait > 0.9 and lo <= share <= hi,
         f"{what} ({share:.3f} of the wait; other CPUs idle {max(others):.3f}-"
         f"{min(1.0, sum(others)):.3f})")
    t.margin(share, lo, what, above=True, figure="idle steal's share of the wait")
    t.margin(share, hi, what, figure="idle steal's share of the wait")
    t.ok(all(p.poll() is not None for p in spinners), "the spinners are stopped")


labtest.run(main)
