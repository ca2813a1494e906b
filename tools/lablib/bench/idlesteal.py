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
once (before that, what a CPU runs is unknown).  A thread's state is then
known from what the CPUs run and from its own events: it runs while a CPU
runs it, it waits from a wake-up or from being switched out runnable
(prev_state R or R+) until it is switched in, and it sleeps from being
switched out in any other state until its next wake-up.  A thread that is
not running at the start is resolved by its first event: switched in, it
was waiting all along; woken, it was asleep.

With the CPUs' NUMA nodes given, idle steal is split by where the idle
CPU was: 'near' when a CPU of the thread's affinity in the node of the
runqueue it waits on was idle (the runqueue is the wake-up's target CPU,
the CPU it was preempted on, or where sched_migrate_task moved it), 'far'
when only CPUs of other nodes were.  Near idle steal is a wake-up or
balancing miss within a node (one last-level cache here); far idle steal
is what only balancing across nodes could have used.
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
        self.idle_wait_near = 0.0
        self.idle_wait_far = 0.0

    def as_dict(self):
        return {"run": self.run, "wait": self.wait, "idle_wait": self.idle_wait,
                "idle_wait_near": self.idle_wait_near, "idle_wait_far": self.idle_wait_far}


def _first_events(events, start, tids):
    """{tid: kind of its first event at or after start: 'in', 'out' or 'wakeup'}."""
    first = {}
    for ev in events:
        if ev[0] < start:
            continue
        if ev[2] == "switch":
            for tid, kind in ((ev[3], "out"), (ev[5], "in")):
                if tid in tids and tid not in first:
                    first[tid] = kind
        elif ev[2] == "wakeup" and ev[3] in tids and ev[3] not in first:
            first[ev[3]] = "wakeup"
        if len(first) == len(tids):
            break
    return first


def replay(events, affinity, cpus=None, nodes=None):
    """events: parse()'s list; affinity: {tid: set of CPUs it may run on};
    cpus: the CPUs of the host (default: every CPU seen in the trace);
    nodes: {cpu: NUMA node} (default: one node).

    Returns (window seconds, {tid: Totals}, {cpu: idle seconds}); the window
    starts at the first moment every CPU's task is known."""
    cpus = set(cpus) if cpus is not None else {ev[1] for ev in events}
    current, start = {}, None
    for ev in events:
        if ev[2] == "switch":
            current[ev[1]] = ev[5]
            if start is None and cpus <= set(current):
                start = ev[0]
                break
    totals = {tid: Totals() for tid in affinity}
    idle = {c: 0.0 for c in cpus}
    if start is None:
        return 0.0, totals, idle

    nodes = nodes or {}
    node_cpus = {}
    for c in cpus:
        node_cpus.setdefault(nodes.get(c, 0), set()).add(c)
    state, queue = {}, {}
    first = _first_events(events, start, set(affinity))
    running = set(current.values())
    for tid in affinity:
        if tid in running:
            state[tid] = RUNNING
        else:
            state[tid] = {"in": WAITING, "wakeup": SLEEPING}.get(first.get(tid), UNKNOWN)

    def account(dt):
        idle_cpus = {c for c in cpus if current.get(c) == 0}
        for c in idle_cpus:
            idle[c] += dt
        for tid, st in state.items():
            if st == RUNNING:
                totals[tid].run += dt
            elif st == WAITING:
                totals[tid].wait += dt
                usable = idle_cpus & affinity[tid]
                if usable:
                    totals[tid].idle_wait += dt
                    q = queue.get(tid)
                    if q is not None:
                        if usable & node_cpus[nodes.get(q, 0)]:
                            totals[tid].idle_wait_near += dt
                        else:
                            totals[tid].idle_wait_far += dt

    now = start
    for ev in events:
        if ev[0] <= start:
            continue
        account(ev[0] - now)
        now = ev[0]
        if ev[2] == "switch":
            _, cpu, _, prev, prev_state, nxt = ev
            current[cpu] = nxt
            if prev in state:
                state[prev] = WAITING if prev_state.startswith("R") else SLEEPING
                queue[prev] = cpu
            if nxt in state:
                state[nxt] = RUNNING
        elif ev[2] == "migrate":
            if ev[3] in state:
                queue[ev[3]] = ev[4]
        elif ev[3] in state and state[ev[3]] != RUNNING:
            state[ev[3]] = WAITING
            queue[ev[3]] = ev[4]
    return now - start, totals, idle


def summary(window, totals):
    """Host-wide figures in vCPUs (seconds per second of the window)."""
    if window <= 0:
        return {"wait": 0.0, "idle_wait": 0.0, "run": 0.0}
    return {k: sum(getattr(t, k) for t in totals.values()) / window
            for k in ("wait", "idle_wait", "run")}
