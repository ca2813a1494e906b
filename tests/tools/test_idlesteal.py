# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lablib/bench/idlesteal.py on constructed traces whose answer is known.

Each case is written as tracefs would print it (sched_switch and
sched_wakeup lines, task names with spaces, with and without the flags
column), parsed and replayed; the expected seconds follow from the
constructed timeline by hand.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

tap.setup("unsteal-idlesteal-")
from lablib.bench import idlesteal  # noqa: E402

ok = tap.ok
A, B, C, OTHER = 101, 102, 103, 200
NAMES = {0: "swapper/0", A: "CPU 0/TCG", B: "CPU 1/TCG", C: "qemu-system-x86", OTHER: "kworker/0:1"}


def switch(ts, cpu, prev, state, nxt, flags=True):
    col = " d..2." if flags else ""
    return (f"  {NAMES[prev]}-{prev}     [{cpu:03d}]{col} {ts:.6f}: sched_switch: "
            f"prev_comm={NAMES[prev]} prev_pid={prev} prev_prio=120 prev_state={state} ==> "
            f"next_comm={NAMES[nxt]} next_pid={nxt} next_prio=120")


def wakeup(ts, cpu, pid, target, new=False):
    name = "sched_wakeup_new" if new else "sched_wakeup"
    return (f"  {NAMES[OTHER]}-{OTHER}     [{cpu:03d}] dN.4. {ts:.6f}: {name}: "
            f"comm={NAMES[pid]} pid={pid} prio=120 target_cpu={target:03d}")


def near(a, b):
    return abs(a - b) < 1e-6


def run(lines, affinity, cpus=(0, 1)):
    window, totals, idle = idlesteal.replay(idlesteal.parse(lines), affinity, cpus)
    return window, {t: v.as_dict() for t, v in totals.items()}, idle


# 1. CPU 1 idle throughout; A runs on CPU 0; B wakes at 1 s and waits on
#    CPU 0 until A is preempted at 4 s; A then waits until 10 s.
idle_cpu1 = [
    switch(0.0, 1, OTHER, "S", 0),
    switch(0.0, 0, OTHER, "S", A),
    wakeup(1.0, 0, B, 0),
    switch(4.0, 0, A, "R+", B, flags=False),
    switch(10.0, 0, B, "R", A),
]
window, t, idle = run(idle_cpu1, {A: {0, 1}, B: {0, 1}})
ok(near(window, 10.0), "the window runs from the first moment both CPUs are known", window)
ok(near(t[B]["wait"], 3.0) and near(t[B]["idle_wait"], 3.0),
   "a thread waiting beside an idle CPU it may use: all of its wait is idle steal", t[B])
ok(near(t[A]["run"], 4.0) and near(t[A]["idle_wait"], 6.0),
   "a preempted thread (R+) waits from its switch-out", t[A])
ok(near(idle[1], 10.0) and near(idle[0], 0.0), "per-CPU idle time", idle)

_, t, _ = run(idle_cpu1, {A: {0}, B: {0}})
ok(near(t[B]["wait"], 3.0) and near(t[B]["idle_wait"], 0.0),
   "the idle CPU is outside the thread's affinity: waiting, but no idle steal", t[B])

# 2. Both CPUs busy: B waits 3 s, none of it idle steal.
busy = [
    switch(0.0, 1, 0, "R", OTHER),
    switch(0.0, 0, OTHER, "S", A),
    wakeup(1.0, 0, B, 0),
    switch(4.0, 0, A, "S", B),
    switch(6.0, 0, B, "S", 0),
    switch(6.0, 1, OTHER, "S", 0),
]
_, t, _ = run(busy, {A: {0, 1}, B: {0, 1}})
ok(near(t[B]["wait"], 3.0) and near(t[B]["idle_wait"], 0.0),
   "every CPU busy: waiting is not idle steal", t[B])
ok(near(t[A]["wait"], 0.0) and near(t[A]["run"], 4.0),
   "a thread switched out asleep (S) does not wait", t[A])

# 3. Not the product of two averages: B waits only while both CPUs are
#    busy (1-3 s) and sleeps while CPU 1 is idle (3.5-8 s).  Over the 8 s
#    window B waits a quarter of the time and CPU 1 is idle 0.56 of it,
#    so averages suggest idle steal; exactly, there is none.
apart = [
    switch(0.0, 1, 0, "R", OTHER),
    switch(0.0, 0, OTHER, "S", A),
    wakeup(1.0, 0, B, 0),
    switch(3.0, 1, OTHER, "S", B),
    switch(3.5, 1, B, "S", 0),
    switch(8.0, 0, A, "S", 0),
]
window, t, idle = run(apart, {A: {0, 1}, B: {0, 1}})
ok(near(t[B]["wait"], 2.0) and near(t[B]["idle_wait"], 0.0),
   "waiting and idle at different times give no idle steal", (t[B], idle))
ok(near(idle[1], 4.5), "CPU 1 idle from 3.5 s", idle)

# 4. A thread that is neither running nor seen at the start is resolved by
#    its first event: C switched in at 5 s waited from the start (2 s,
#    when both CPUs are known); D woken at 5 s slept until then.
D = 104
NAMES[D] = "vhost-104"
resolve = [
    switch(1.0, 0, OTHER, "S", A),
    switch(2.0, 1, OTHER, "S", 0),
    wakeup(5.0, 1, D, 0),
    switch(5.0, 0, A, "R", C),
    switch(7.0, 0, C, "S", D),
    switch(9.0, 0, D, "S", A),
]
window, t, _ = run(resolve, {A: {0, 1}, C: {0, 1}, D: {0}})
ok(near(window, 7.0), "the window starts when the last CPU is first seen (2 s)", window)
ok(near(t[C]["wait"], 3.0) and near(t[C]["idle_wait"], 3.0),
   "a thread first switched in waited from the start", t[C])
ok(near(t[D]["wait"], 2.0) and near(t[D]["idle_wait"], 0.0),
   "a thread first woken slept until then; CPU 1 is outside its affinity", t[D])

_, totals, _ = idlesteal.replay(idlesteal.parse(resolve), {C: {0, 1}, D: {0}}, (0, 1))
s = idlesteal.summary(window, totals)
ok(near(s["idle_wait"], 3.0 / 7.0) and near(s["wait"], 5.0 / 7.0),
   "summary in vCPUs: seconds per second of the window", s)

# 5. Near and far: CPUs 0-1 are node 0, 2-3 node 1.  B wakes onto CPU 0's
#    runqueue at 1 s while CPUs 0, 1 and 3 are busy and CPU 2 (node 1) is
#    idle: far idle steal.  CPU 1 is idle from 3 to 3.5 s: near; then far
#    again.  At 4 s the balancer moves B to CPU 2's runqueue, and CPU 2 is
#    idle until it runs B at 4.5 s: 'own' (wake-up latency).
E, F = 105, 201
NAMES[E], NAMES[F] = "kworker/1:0", "kworker/3:0"


def migrate(ts, cpu, pid, orig, dest):
    return (f"  {NAMES[OTHER]}-{OTHER}     [{cpu:03d}] d..2. {ts:.6f}: sched_migrate_task: "
            f"comm={NAMES[pid]} pid={pid} prio=120 orig_cpu={orig} dest_cpu={dest}")


nodes = {0: 0, 1: 0, 2: 1, 3: 1}
near_far = [
    switch(0.0, 0, OTHER, "S", A),
    switch(0.0, 1, OTHER, "S", E),
    switch(0.0, 2, OTHER, "S", 0),
    switch(0.0, 3, OTHER, "S", F),
    wakeup(1.0, 0, B, 0),
    switch(3.0, 1, E, "S", 0),
    switch(3.5, 1, 0, "R", E),
    migrate(4.0, 2, B, 0, 2),
    switch(4.5, 2, 0, "R", B),
    switch(6.0, 0, A, "S", 0),
]
window, totals, _ = idlesteal.replay(idlesteal.parse(near_far), {B: {0, 1, 2, 3}},
                                     (0, 1, 2, 3), nodes)
b = totals[B].as_dict()
ok(near(b["wait"], 3.5) and near(b["idle_wait"], 3.5),
   "B waits 3.5 s, always beside an idle CPU of its affinity", b)
ok(near(b["idle_wait_far"], 2.5) and near(b["idle_wait_near"], 0.5)
   and near(b["idle_wait_own"], 0.5),
   "far while only the other node had an idle CPU (1-3, 3.5-4 s), near while its own "
   "node had one (3-3.5 s), own after the migration onto an idle CPU (4-4.5 s)", b)
_, totals, _ = idlesteal.replay(idlesteal.parse(near_far), {B: {0, 1, 2, 3}}, (0, 1, 2, 3))
b = totals[B].as_dict()
ok(near(b["idle_wait_near"], 3.0) and near(b["idle_wait_far"], 0.0),
   "without nodes every other CPU is near", b)

# 6. The event that completes the start, and events at the same moment:
#    A is preempted (R+) by the switch that makes CPU 1 known at 1 s, and
#    C is woken in that same microsecond; both wait until switched in.
#    The CPUs are never idle.
start_events = [
    switch(0.0, 0, OTHER, "S", B),
    switch(1.0, 1, A, "R+", OTHER),
    wakeup(1.0, 0, C, 0),
    switch(3.0, 0, B, "S", A),
    switch(4.0, 1, OTHER, "S", C),
    switch(6.0, 0, A, "S", B),
    switch(6.0, 1, C, "S", OTHER),
]
window, t, _ = run(start_events, {A: {0, 1}, C: {0, 1}})
ok(near(window, 5.0) and near(t[A]["wait"], 2.0) and near(t[A]["run"], 3.0),
   "the thread switched out by the starting switch waits from the start", (window, t[A]))
ok(near(t[C]["wait"], 3.0) and near(t[C]["idle_wait"], 0.0),
   "a wake-up in the starting microsecond is not lost", t[C])

# 7. A thread waiting from before the trace (first seen switched in) has
#    no known runqueue: its idle steal is counted, in none of the parts.
_, t, _ = run(resolve, {C: {0, 1}})
ok(near(t[C]["idle_wait"], 3.0) and t[C]["idle_wait_own"] + t[C]["idle_wait_near"]
   + t[C]["idle_wait_far"] == 0.0, "unknown runqueue: idle steal, not placed", t[C])

# 8. What parse keeps and skips
lines = [
    "# tracer: nop",
    "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
    wakeup(1.5, 0, C, 1, new=True),
    "  bash-1   [000] ..... 2.000000: sched_process_exit: comm=bash pid=1 prio=120",
    switch(2.5, 1, C, "D", 0),
]
ev = idlesteal.parse(lines)
ok(ev == [(1.5, 0, "wakeup", C, 1), (2.5, 1, "switch", C, "D", 0)],
   "sched_wakeup_new and sched_switch kept (names with spaces), other lines skipped", ev)
window, _, _ = idlesteal.replay([], {A: {0}}, (0,))
ok(window == 0.0, "an empty trace gives an empty window", window)

# 9. check_window: a trace that lost events is refused, naming the CPU.
#    A runs on CPU 0 for the whole 10 s; B runs on CPU 1 for half a second
#    after each of three wake-ups (1, 3 and 5 s), CPU 1 idle otherwise.
#    The lossy trace lacks CPU 1's switches away from idle (as on a 16-CPU
#    guest, whose CPUs other than 0 left idle without a trace): its
#    replay has B waiting beside idle CPU 1 while it actually ran.


def check(lines, cpus=(0, 1), schedstat=None, tolerance=0.02):
    events = idlesteal.parse(lines)
    window, totals, _ = idlesteal.replay(events, {A: {0, 1}, B: {0, 1}}, cpus)
    return idlesteal.check_window(events, window, totals, cpus, schedstat, tolerance)


whole = [switch(0.0, 0, OTHER, "S", A), switch(0.0, 1, OTHER, "S", 0)]
lossy = list(whole)
for t0 in (1.0, 3.0, 5.0):
    whole += [wakeup(t0, 1, B, 1), switch(t0, 1, 0, "R", B), switch(t0 + 0.5, 1, B, "S", 0)]
    lossy += [wakeup(t0, 1, B, 1), switch(t0 + 0.5, 1, B, "S", 0)]
whole.append(switch(10.0, 0, A, "S", 0))
lossy.append(switch(10.0, 0, A, "S", 0))
truth = {A: (10.0, 0.0), B: (1.5, 0.0)}

_, t, _ = run(lossy, {A: {0, 1}, B: {0, 1}})
ok(near(t[B]["wait"], 1.5) and near(t[B]["idle_wait"], 1.5),
   "the lossy trace's replay: B's 1.5 s of running count as idle steal", t[B])
reasons = check(lossy)
ok(len(reasons) == 1 and reasons[0].startswith("CPU 1: 4 switches to idle, 0 from idle")
   and "lost idle exits" in reasons[0],
   "a CPU with switches into idle and none out of it is refused, named, with its counts",
   reasons)
reasons = check(lossy, schedstat=truth)
ok(any(r.startswith("CPU 1:") for r in reasons)
   and any(r.startswith(f"thread {B}: wait 1.500 s by the trace, 0.000 s by schedstat")
           for r in reasons)
   and not any(r.startswith(f"thread {A}") for r in reasons),
   "with schedstat, the thread whose wait the trace invented is refused too", reasons)

_, t, _ = run(whole, {A: {0, 1}, B: {0, 1}})
ok(near(t[B]["run"], 1.5) and near(t[B]["wait"], 0.0),
   "the whole trace's replay: B runs 1.5 s and never waits", t[B])
ok(check(whole) == [], "the whole trace passes", check(whole))
ok(check(whole, schedstat=truth) == [], "the whole trace agrees with schedstat: it passes",
   check(whole, schedstat=truth))
traces = {"idle_cpu1": (idle_cpu1, (0, 1)), "busy": (busy, (0, 1)), "apart": (apart, (0, 1)),
          "resolve": (resolve, (0, 1)), "near_far": (near_far, (0, 1, 2, 3)),
          "start_events": (start_events, (0, 1))}
bad = {name: check(lines, cpus) for name, (lines, cpus) in traces.items() if check(lines, cpus)}
ok(not bad, "every other constructed trace of this file passes", bad)

# 10. Schedstat: the replay's run and wait must be within 2 % of the
#     window of the kernel's (10 s window: 0.2 s).
reasons = check(whole, schedstat={A: (10.0, 0.0), B: (1.5, 0.3)})
ok(len(reasons) == 1 and reasons[0].startswith(f"thread {B}: wait 0.000 s by the trace, "
                                               "0.300 s by schedstat: 0.030 of the 10.000 s "
                                               "window apart (more than 0.020)"),
   "a wait 3 % of the window away from schedstat is refused, naming the thread", reasons)
reasons = check(whole, schedstat={A: (9.7, 0.0), B: (1.5, 0.0)})
ok(len(reasons) == 1 and reasons[0].startswith(f"thread {A}: run 10.000 s by the trace"),
   "so is a run time 3 % away", reasons)
reasons = check(whole, schedstat={A: (9.85, 0.1), B: (1.6, 0.15)})
ok(reasons == [], "run and wait within 2 % of the window pass", reasons)
ok(check(whole, schedstat={A: (9.7, 0.0), B: (1.5, 0.3)}, tolerance=0.05) == [],
   "the tolerance is the caller's")

# 11. Other losses: a CPU that never switched (no window), and a lost
#     switch between two threads (the next switch is out of a task the
#     CPU no longer ran).
reasons = check(whole, cpus=(0, 1, 2))
ok(len(reasons) == 1 and reasons[0].startswith("CPU 2: no switch in the trace"),
   "a CPU without a switch is refused: the replay has no window", reasons)
gap = [line for line in idle_cpu1 if "4.000000" not in line]
reasons = check(gap)
ok(len(reasons) == 1 and reasons[0].startswith(f"CPU 0: 1 switch out of a task it was not "
                                               f"running (first at 10.000000 s: out of pid {B} "
                                               f"after a switch to pid {A})"),
   "a lost switch between threads is refused, naming the CPU and where", reasons)

sys.exit(tap.end())
