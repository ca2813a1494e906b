# SPDX-License-Identifier: GPL-2.0-or-later
"""Per-thread CPU share and steal from /proc/PID/task/TID/schedstat.

schedstat's first field is the time the thread ran on a CPU, the second the
time it waited on a run queue (both ns).  Over a window of W seconds:
  share = Δrun / W     steal = Δwait / W
This is what a guest would see as its own utilisation and steal per vCPU.
jain() and percentile() sum up such readings.
"""

import math
import time


def schedstat(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
        run_ns, wait_ns, _ = fh.read().split()
    return int(run_ns), int(wait_ns)


def ctxt_switches(pid, tid):
    """(voluntary, involuntary) context switches of a thread so far."""
    vol = invol = 0
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as fh:
            for line in fh:
                if line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol = int(line.split()[1])
    except OSError:
        pass
    return vol, invol


def cpu_cgroup(pid, tid):
    """The thread's cgroup in the cpu controller's hierarchy (v1) or the v2 path."""
    v2 = None
    with open(f"/proc/{pid}/task/{tid}/cgroup") as fh:
        for line in fh:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "cpu" in ctrls.split(","):
                return path
            if ctrls == "":
                v2 = path
    return v2


def cpu_of(pid, tid):
    """The CPU the thread last ran on (field 39 of /proc/PID/task/TID/stat)."""
    with open(f"/proc/{pid}/task/{tid}/stat") as fh:
        stat = fh.read()
    # (the fields after the command name, which may hold spaces, start at 3)
    return int(stat[stat.rindex(")") + 2:].split()[36])


def pelt(pid, tid):
    """The thread's load and utilisation as the scheduler's load balancer
    sees them (se.avg.load_avg, se.avg.util_avg of /proc/PID/task/TID/sched,
    0-1024), or None where the kernel does not show them."""
    out = {}
    try:
        with open(f"/proc/{pid}/task/{tid}/sched") as fh:
            for line in fh:
                key = line.split(":")[0].strip()
                if key in ("se.avg.load_avg", "se.avg.util_avg"):
                    out[key[7:]] = int(line.split()[-1])
    except OSError:
        return None
    return out if len(out) == 2 else None


def sample_placed(threads, seconds, interval=0.1):
    """As sample(), and where the threads ran meanwhile: a list of
    {key: CPU}, one every `interval` seconds."""
    t0 = time.monotonic()
    before = {k: schedstat(*v) for k, v in threads.items()}
    placements = []
    while time.monotonic() - t0 < seconds - interval / 2:
        time.sleep(interval)
        placements.append({k: cpu_of(*v) for k, v in threads.items()})
    return _since(threads, before, t0), placements


def _since(threads, before, t0):
    """{key: (share, steal)} from the schedstat readings 'before', taken at
    monotonic time t0, to now."""
    after = {k: schedstat(*v) for k, v in threads.items()}
    wall = (time.monotonic() - t0) * 1e9
    return {k: ((after[k][0] - before[k][0]) / wall, (after[k][1] - before[k][1]) / wall)
            for k in threads}


def sample(threads, seconds):
    """threads: {key: (pid, tid)} -> {key: (share, steal)} over `seconds`."""
    t0 = time.monotonic()
    before = {k: schedstat(*v) for k, v in threads.items()}
    time.sleep(seconds)
    return _since(threads, before, t0)


def jain(xs):
    xs = list(xs)
    if not xs or not any(xs):
        return 0.0
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def percentile(xs, p):
    """The nearest-rank p-th percentile of xs; None if xs is empty."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)]
