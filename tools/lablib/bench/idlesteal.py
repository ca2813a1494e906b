# SPDX-License-Identifier: GPL-2.0-or-later
"""Idle steal measured exactly, from the scheduler's tracepoints.

Idle steal is the time a thread was runnable and waiting for a CPU while
a CPU it may run on was idle.  /proc's schedstat gives each thread's wait
and each CPU's idle time as totals over a window; multiplying their
averages is not the same thing (a thread that waits while both CPUs are
busy, then sleeps while one is idle, would count).  This module replays
a trace of sched_switch and sched_wakeup(_new) events, as tracefs prints
them, and adds up, for each thread of interest, the time in which it was
waiting and at least one CPU of its affinity ran the idle task.

The replay starts once every CPU of the trace has switched tasks at least
once (before that, what a CPU runs is unknown); the events before it are
applied but not counted.  A thread's state is then
known from what the CPUs run and from its own events: it runs while a CPU
runs it, it waits from a wake-up or from being switched out runnable
(prev_state R or R+) until it is switched in, and it sleeps from being
switched out in any other state until its next wake-up.  A thread that is
not running at the start is resolved by its first event: switched in, it
was waiting all along; woken, it was asleep.

Idle steal is split by where the idle CPU was, relative to the runqueue
the thread waits on (the wake-up's target CPU, the CPU it was preempted
on, or where sched_migrate_task moved it): 'own' while that very CPU is
idle (the thread was placed there and the CPU has not switched to it
yet: wake-up latency, including the way out of the idle state), 'near'
while another CPU of its affinity in the same NUMA node is idle (a
placement or balancing miss within a node, one last-level cache here),
'far' while only CPUs of other nodes are (what only balancing across
nodes could use).  Time whose runqueue is unknown (a thread already
waiting when the trace began, never seen switched out) is in none of
the three.

check_window() says whether a replayed window can be trusted at all: a
trace that lost events (seen on a 16-CPU guest: its CPUs switched to the
idle task 2,159 times and away from it 40 times) leaves CPUs idle and
threads waiting in the replay that were neither, and the replay cannot
tell.  The trace's own consistency per CPU, and the kernel's schedstat
run and wait time of each thread where the caller has them, can.
"""

import re

LINE_RE = re.compile(r"\[(\d+)\](?:\s+\S+)?\s+(\d+\.\d+):\s+(sched_\w+):\s(.*)$")
SWITCH_RE = re.compile(r"prev_comm=.* prev_pid=(\d+) prev_prio=-?\d+ prev_state=(\S+) ==> "
                       r"next_comm=.* next_pid=(\d+) next_prio=-?\d+")
WAKEUP_RE = re.compile(r"comm=.* pid=(\d+) prio=-?\d+(?: success=\d+)? target_cpu=(\d+)")
MIGRATE_RE = re.compile(r"comm=.* pid=(\d+) prio=-?\d+ orig_cpu=(\d+) dest_cpu=(\d+)")

RUNNING, WAITING, SLEEPING, UNKNOWN = "running", "waiting", "sleeping", "unknown"


def parse(lines):
    """tracefs text lines -> [(time s, cpu, 'switch', prev, prev_state, next),
    (time s, cpu, 'wakeup', pid, target cpu) or (time s, cpu, 'migrate',
    pid, dest cpu)], in time order.  Other lines are skipped."""
    events = []
    for line in lines:
        m = LINE_RE.search(line)
        if not m:
            continue
        cpu, ts, name, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        if name == "sched_switch":
            s = SWITCH_RE.search(rest)
            if s:
                events.append((ts, cpu, "switch", int(s.group(1)), s.group(2), int(s.group(3))))
        elif name in ("sched_wakeup", "sched_wakeup_new"):
            w = WAKEUP_RE.search(rest)
            if w:
                events.append((ts, cpu, "wakeup", int(w.group(1)), int(w.group(2))))
        elif name == "sched_migrate_task":
            mg = MIGRATE_RE.search(rest)
            if mg:
                events.append((ts, cpu, "migrate", int(mg.group(1)), int(mg.group(3))))
    events.sort(key=lambda e: e[0])
    return events


class Totals:
    """What one thread did over the replayed window, in seconds."""

    def __init__(self):
        self.run = 0.0
        self.wait = 0.0
        self.idle_wait = 0.0
        self.idle_wait_own = 0.0
        self.idle_wait_near = 0.0
        self.idle_wait_far = 0.0

    def as_dict(self):
        return {"run": self.run, "wait": self.wait, "idle_wait": self.idle_wait,
                "idle_wait_own": self.idle_wait_own, "idle_wait_near": self.idle_wait_near,
                "idle_wait_far": self.idle_wait_far}


def _first_events(events, tids):
    """{tid: kind of its first event in events: 'in', 'out' or 'wakeup'}."""
    first = {}
    for ev in events:
        if ev[2] == "switch":
            for tid, kind in ((ev[3], "out"), (ev[5], "in")):
                if tid in tids and tid not in first:
                    first[tid] = kind
        elif ev[2] == "wakeup" and ev[3] in tids and ev[3] not in first:
            first[ev[3]] = "wakeup"
        if len(first) == len(tids):
            break
    return first


class _Replay:
    """What the CPUs run, and the state and runqueue of each thread of
    interest, event by event."""

    def __init__(self, tids):
        self.current = {}       # cpu -> the pid it runs (0: idle)
        self.state = {}         # tid -> RUNNING, WAITING, SLEEPING (known ones)
        self.queue = {}         # tid -> the CPU whose runqueue holds it
        self.tids = tids

    def apply(self, ev):
        if ev[2] == "switch":
            _, cpu, _, prev, prev_state, nxt = ev
            self.current[cpu] = nxt
            if prev in self.tids:
                self.state[prev] = WAITING if prev_state.startswith("R") else SLEEPING
                self.queue[prev] = cpu
            if nxt in self.tids:
                self.state[nxt] = RUNNING
                self.queue[nxt] = cpu
        elif ev[3] in self.tids:
            if ev[2] == "migrate":
                self.queue[ev[3]] = ev[4]
            elif self.state.get(ev[3]) != RUNNING:
                self.state[ev[3]] = WAITING
                self.queue[ev[3]] = ev[4]


def replay(events, affinity, cpus=None, nodes=None):
    """events: parse()'s list; affinity: {tid: set of CPUs it may run on};
    cpus: the CPUs of the host (default: every CPU seen in the trace);
    nodes: {cpu: NUMA node} (default: one node).

    Returns (window seconds, {tid: Totals}, {cpu: idle seconds}); the window
    starts at the first moment every CPU's task is known.  Events before
    it are applied too (a thread switched out before it is known to wait
    or sleep, on a known runqueue), but not counted."""
    cpus = set(cpus) if cpus is not None else {ev[1] for ev in events}
    rp = _Replay(set(affinity))
    start = None
    for i, ev in enumerate(events):
        rp.apply(ev)
        if ev[2] == "switch" and cpus <= set(rp.current):
            start, rest = ev[0], events[i + 1:]
            break
    totals = {tid: Totals() for tid in affinity}
    idle = {c: 0.0 for c in cpus}
    if start is None:
        return 0.0, totals, idle

    node_of = nodes or {}
    node_cpus = {}
    for c in cpus:
        node_cpus.setdefault(node_of.get(c, 0), set()).add(c)
    running = set(rp.current.values())
    first = _first_events(rest, set(affinity) - set(rp.state) - running)
    for tid in affinity:
        if tid in running:
            rp.state[tid] = RUNNING
        elif tid not in rp.state:
            rp.state[tid] = {"in": WAITING, "wakeup": SLEEPING}.get(first.get(tid), UNKNOWN)
        elif rp.state[tid] == RUNNING:      # its CPU has run others since
            rp.state[tid] = UNKNOWN

    def account(dt):
        idle_cpus = {c for c in cpus if rp.current.get(c) == 0}
        for c in idle_cpus:
            idle[c] += dt
        for tid, st in rp.state.items():
            t = totals[tid]
            if st == RUNNING:
                t.run += dt
            elif st == WAITING:
                t.wait += dt
                usable = idle_cpus & affinity[tid]
                if not usable:
                    continue
                t.idle_wait += dt
                q = rp.queue.get(tid)
                if q is None:
                    continue
                if q in usable:
                    t.idle_wait_own += dt
                elif usable & node_cpus[node_of.get(q, 0)]:
                    t.idle_wait_near += dt
                else:
                    t.idle_wait_far += dt

    now = start
    for ev in rest:
        account(ev[0] - now)
        now = ev[0]
        rp.apply(ev)
    return now - start, totals, idle


def summary(window, totals):
    """Host-wide figures in vCPUs (seconds per second of the window)."""
    if window <= 0:
        return {"wait": 0.0, "idle_wait": 0.0, "run": 0.0}
    return {k: sum(getattr(t, k) for t in totals.values()) / window
            for k in ("wait", "idle_wait", "run")}


def _count(n, one, many):
    return f"{n} {one if n == 1 else many}"


def check_window(events, window, totals, cpus=None, schedstat=None, tolerance=0.02):
    """Why the figures replay() found for a window cannot be trusted: a list
    of sentences, each naming the CPU or thread and the figures; empty when
    nothing is wrong.

    events and cpus are what replay() was given, window and totals what it
    returned; schedstat, if known: {tid: (run s, wait s)}, the kernel's own
    deltas (/proc/PID/task/TID/schedstat) over the same window.

    - Every CPU must have switched tasks (else there is no window).
    - On each CPU, switches to the idle task (next pid 0) and away from it
      (prev pid 0) alternate, so their numbers differ by at most one; more
      switches into idle than out of it is a trace that lost idle exits.
    - On each CPU, every switch is out of the task the CPU's previous
      switch ran (reported for a CPU whose idle switches add up).
    - With schedstat, each of its threads' replayed run and wait time is
      within tolerance x window of the kernel's."""
    cpus = set(cpus) if cpus is not None else {ev[1] for ev in events}
    into = dict.fromkeys(cpus, 0)
    out_of = dict.fromkeys(cpus, 0)
    ran = {}            # cpu -> the pid its last switch ran
    unchained = {}      # cpu -> [switches whose prev was not that, the first one]
    for ev in events:
        if ev[2] != "switch" or ev[1] not in cpus:
            continue
        ts, cpu, _, prev, _, nxt = ev
        if nxt == 0:
            into[cpu] += 1
        if prev == 0:
            out_of[cpu] += 1
        if cpu in ran and ran[cpu] != prev:
            unchained.setdefault(cpu, [0, (ts, prev, ran[cpu])])[0] += 1
        ran[cpu] = nxt

    reasons = []
    silent = sorted(cpus - set(ran))
    if silent:
        reasons.append(f"{'CPU' if len(silent) == 1 else 'CPUs'} "
                       f"{', '.join(map(str, silent))}: no switch in the trace, so the "
                       "replay has no window")
    elif window <= 0:
        reasons.append("the replay's window is empty")
    for cpu in sorted(cpus):
        if abs(into[cpu] - out_of[cpu]) > 1:
            lost = "exits" if into[cpu] > out_of[cpu] else "entries"
            reasons.append(f"CPU {cpu}: {_count(into[cpu], 'switch', 'switches')} to idle, "
                           f"{out_of[cpu]} from idle: the trace lost idle {lost}")
        elif cpu in unchained:
            n, (ts, prev, expected) = unchained[cpu]
            reasons.append(f"CPU {cpu}: {_count(n, 'switch', 'switches')} out of a task it "
                           f"was not running (first at {ts:.6f} s: out of pid {prev} after "
                           f"a switch to pid {expected}): the trace lost switches")

    if schedstat and window > 0:
        for tid in sorted(schedstat):
            t = totals.get(tid)
            if t is None:
                reasons.append(f"thread {tid}: in schedstat but not in the replay")
                continue
            for what, traced, kernel in (("run", t.run, schedstat[tid][0]),
                                         ("wait", t.wait, schedstat[tid][1])):
                apart = abs(traced - kernel) / window
                if apart > tolerance:
                    reasons.append(f"thread {tid}: {what} {traced:.3f} s by the trace, "
                                   f"{kernel:.3f} s by schedstat: {apart:.3f} of the "
                                   f"{window:.3f} s window apart (more than {tolerance:.3f})")
    return reasons
