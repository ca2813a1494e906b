# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab testhost: how a row's serial console becomes its verdict.

No QEMU, no root: console transcripts of the shapes the test host prints
(terminal escapes before the runner's first line, nested TAP of each test
program, the runner's summary and 'done') go through the parser and the
verdict that 'tools/lab test' counts.  A row must only pass when the runner
finished and reported at least one test program and none failed; and
'boot --tests matrix' must boot each variant of the release asked for with
the list 'tools/lab test' runs there (a Debian 12 image, which has no
unsteal .deb, without unsteal_service).
"""

import contextlib
import io
import json
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-testhost-verdict-test-")
ok = tap.ok

from lablib import common, config  # noqa: E402
from lablib.testing import qemuboot, testhost, testhostrelease, tally as tallying  # noqa: E402
from lablib.common import LabError  # noqa: E402
from lablib.results import Counts, Skip  # noqa: E402

os.makedirs(testhostrelease.testhost_dir(), exist_ok=True)
SAVED = os.path.join(testhostrelease.testhost_dir(), "result-v1-comounted.json")

UP = "Booting from ROM..\x1bc\x1b[?7l\x1b[2Junsteal-testhost: up 3.71 s, kernel 6.12, 2 CPUs"
GOOD = [UP,
        "# test: lab_guest (started at 4.35 s)",
        "# ok 1 - QEMU runs one thread per vCPU",
        "# ok 2 - busy vCPUs run",
        "ok 1 - lab_guest",
        "# test: vcpu_cgroup_v2 (started at 80.1 s)",
        "ok 2 - vcpu_cgroup_v2 # SKIP the cpu controller is not on cgroup v2 here",
        "unsteal-testhost: 1 passed, 0 failed, 1 skipped",
        "unsteal-testhost: done"]


def run(lines, variant="v1-comounted"):
    out = qemuboot.Outcome()
    for i, line in enumerate(lines):
        testhost._parse(out, line, float(i))
    out.total = float(len(lines))
    with contextlib.redirect_stdout(sys.stderr):  # stdout is TAP
        return out, testhost.verdict(variant, out)


out, res = run(GOOD)
ok(res == (1, 0), "a finished run: one passed, the skipped program not counted", res)
ok(out.up_at == 0.0 and out.guest_uptime == 3.71,
   "the 'up' line is found behind the firmware's terminal escapes",
   (out.up_at, out.guest_uptime))
saved = json.load(open(SAVED))
ok(saved["skipped"] == ["vcpu_cgroup_v2"] and saved["assertions_ok"] == 2
   and saved["problems"] == [], "the result file names the skip and counts assertions",
   saved)

# Every skip reaches tools/lab test's summary with its reason: the
# program that skipped, and a check skipped inside a program that ran.
with contextlib.redirect_stdout(sys.stderr):
    c = testhost.row_verdict("v1-comounted", [run(GOOD[:3] + [
        "# ok 3 - cpuset placement and pinning # SKIP this host has no cpuset controller"]
        + GOOD[3:])[0]])
ok(c.skipped == [Skip("vcpu_cgroup_v2", "the cpu controller is not on cgroup v2 here")]
   and c.skipped_checks == [Skip("lab_guest: cpuset placement and pinning",
                                 "this host has no cpuset controller")]
   and (c.passed, c.failed) == (1, 0),
   "a row's skipped program and skipped check are kept with their reasons", c)

# The row's margin lines are kept in its result file, with their program.
run(GOOD[:3] + ["# # margin: busy vCPUs run: got 0.98, bound >= 0.5, margin 0.48"] + GOOD[3:])
saved = json.load(open(SAVED))
ok(saved["measurements"] == [{"source": "lab_guest", "kind": "margin",
                               "line": "busy vCPUs run: got 0.98, bound >= 0.5, margin 0.48"}],
   "the result file keeps the row's margin lines with their program", saved["measurements"])

bad = GOOD[:3] + ["# not ok 2 - busy vCPUs run", "not ok 1 - lab_guest"] + GOOD[5:]
out, res = run(bad)
ok(res == (0, 1), "a failed program fails the row", res)
saved = json.load(open(SAVED))
ok(saved["assertions_not_ok"] == [[False, "lab_guest", "busy vCPUs run"]],
   "the failed assertion is recorded with its program", saved["assertions_not_ok"])

out, res = run(GOOD[:5])
ok(res == (1, 1), "a run that stopped before 'done' fails the row", res)

out, res = run([UP, "unsteal-testhost: 0 passed, 0 failed, 0 skipped",
                "unsteal-testhost: done"])
ok(res == (0, 1), "a finished run that reported no test program fails the row", res)

out, res = run(["SeaBIOS", "Kernel panic - not syncing: VFS: Unable to mount root fs"])
saved = json.load(open(SAVED))
ok(res == (0, 1) and any("did not boot to the runner" in p for p in saved["problems"])
   and any("Kernel panic" in p for p in saved["problems"]),
   "a kernel that never reached the runner fails the row and names the panic",
   saved["problems"])

# boot --tests matrix: each variant with its own list, with the kernel asked for.
calls = []


def fake_boot(variant, timeout, tests, keep, kernel, rel, kernel_path):
    calls.append((variant, tests, kernel, rel.name))
    kernels.append(kernel_path)
    o = qemuboot.Outcome()
    for i, line in enumerate([UP, "ok 1 - lab_guest", "unsteal-testhost: done"]):
        testhost._parse(o, line, float(i))
    o.total = 3.0
    return o


kernels, builds = [], []
testhost.boot = fake_boot
testhost.kernel_image = lambda: builds.append(1) or "/fake/bzImage-patched"
common.require_root = lambda what: None
args = types.SimpleNamespace(action="boot", variant="all", tests="matrix", timeout=60,
                             keep=False, kernel="ours", release=None)
with contextlib.redirect_stdout(sys.stderr):
    rc = testhost.command(args)
want = [(v, testhost.tests_in_host(v), "ours", "debian-13") for v in testhost.VARIANTS]
ok(rc == 0 and calls == want, "--tests matrix boots every variant with its in-host list",
   calls)
ok(any("unsteal_service" in c[1] for c in calls),
   "Debian 13's rows run unsteal_service (its image has the .deb)", calls)
ok(builds == [1] and kernels == ["/fake/bzImage-patched"] * len(testhost.VARIANTS),
   "our kernel is built once and every row boots that image", (builds, kernels))
ok(any("vcpu_cgroup_machined" in c[1] for c in calls if c[0] == "v2-machined")
   and not any("vcpu_cgroup_machined" in c[1] for c in calls if c[0] != "v2-machined"),
   "only v2-machined runs the machined tests", calls)

calls.clear()
args.release = "debian-12"
with contextlib.redirect_stdout(sys.stderr):
    rc = testhost.command(args)
d12 = testhostrelease.get("debian-12")
ok(rc == 0 and [c[3] for c in calls] == ["debian-12"] * len(testhost.VARIANTS)
   and [c[1] for c in calls] == [testhost.tests_in_host(v, d12) for v in testhost.VARIANTS],
   "--release debian-12 boots the Debian 12 image's rows", calls)
ok(not any("unsteal_service" in c[1] for c in calls)
   and any("vcpu_cgroup_machined" in c[1] for c in calls),
   "Debian 12's rows leave out unsteal_service only", calls)
ok(d12.dir != testhostrelease.testhost_dir() and d12.image.startswith(d12.dir + "/")
   and d12.log("v2-systemd").endswith("testhost-debian-12-v2-systemd.log")
   and testhostrelease.DEFAULT.log("v2-systemd").endswith("/testhost-v2-systemd.log"),
   "the Debian 12 image, results and logs are its own; Debian 13 keeps its paths",
   (d12.dir, d12.image, d12.log("v2-systemd")))

calls.clear()
args.release = None
args.tests = "lab_guest,no_such_test"
try:
    with contextlib.redirect_stdout(sys.stderr):
        testhost.command(args)
    ok(False, "an unknown test name is refused", calls)
except LabError as e:
    ok("no_such_test" in str(e) and "matrix" in str(e) and not calls,
       "an unknown test name is refused before any boot", e)

# tools/lab test: the rows booted two at a time (test_rows), each counted
# by row_verdict() as its own stage.
ok(sorted(testhost.LONGEST_FIRST) == sorted(testhost.VARIANTS),
   "tools/lab test starts every row of the matrix, each once", testhost.LONGEST_FIRST)
spans, shown = {}, []
DIED = [UP, "# test: lab_guest (started at 4.35 s)",
        "int3: 0000 [#1] PREEMPT SMP", "Oops: int3: 0000 [#1] PREEMPT SMP"]


def timed_boot(variant, timeout, tests, kernel, kernel_path, show):
    start = time.monotonic()
    if variant == "v1-systemd":
        raise LabError("the image is missing")
    died = variant == "v2-systemd" and variant not in spans
    lines = DIED if died else [UP, "# test: lab_guest (started at 4.35 s)",
                               "# not ok 2 - busy vCPUs run" if variant == "v2-nosystemd"
                               else "# ok 2 - busy vCPUs run", "ok 1 - lab_guest",
                               "unsteal-testhost: done"]
    o = qemuboot.Outcome()
    for i, line in enumerate(lines):
        if show:
            show(line)
        testhost._parse(o, line, float(i))
    time.sleep(0.3)
    o.total = 0.3
    spans.setdefault(variant, []).append((start, time.monotonic()))
    return o


def overlapping():
    ends = sorted(s for v in spans.values() for s in v)
    return sum(1 for a, b in zip(ends, ends[1:]) if b[0] < a[1])


testhost.boot = timed_boot
testhost.built_kernel_image = lambda: "/fake/bzImage-patched"
testhost.step = shown.append
config.load({k: v for k, v in os.environ.items() if k != "UNSTEAL_TESTHOST_LANES"})
with contextlib.redirect_stdout(sys.stderr):
    done = testhost.test_rows(testhost.LONGEST_FIRST)
ok(testhost.lanes() == min(2, os.cpu_count())
   and (overlapping() >= 1) == (os.cpu_count() >= 2),
   "by default two rows boot at once (one on a 1-CPU host)", spans)
ok(set(done) == set(testhost.VARIANTS) and isinstance(done["v1-systemd"], LabError),
   "every row has its outcome, a row that could not boot its error", done)
with contextlib.redirect_stdout(sys.stderr):
    res = testhost.row_verdict("v2-systemd", done["v2-systemd"])
ok(len(spans["v2-systemd"]) == 2 and res == Counts(1, 0),
   "a row whose guest kernel died is booted once more and the second boot counts",
   (spans["v2-systemd"], res))
with contextlib.redirect_stdout(sys.stderr):
    res = testhost.row_verdict("v2-nosystemd", done["v2-nosystemd"])
ok((res.passed, res.failed) == (1, 0) and "testhost: v2-nosystemd: # not ok 2 - busy vCPUs run" in shown
   and "testhost: v2-machined: ok 1 - lab_guest" in shown
   and not any("unsteal-testhost: done" in s for s in shown),
   "rows side by side show their programs and failed assertions, named by row", shown)
try:
    testhost.row_verdict("v1-systemd", done["v1-systemd"])
    ok(False, "a row that could not boot fails its stage")
except LabError as e:
    ok("image is missing" in str(e), "a row that could not boot fails its stage", e)

# A failed row's assertions end the CI log: tools/lab test's summary
# repeats them after the failed stages' names, before the counts, since the
# kernel selftests' output follows the matrix.
failed_row = qemuboot.Outcome()
for i, line in enumerate([UP, "# test: vcpu_cgroup_weights (started at 4.35 s)",
                          "# ok 1 - defaults: noisy gets 2/6 of the CPU time (0.331)",
                          "# # cpu_shares=50: TCG CPUs, not compared",
                          "# not ok 2 - vcpu_quota=20000 (binds): noisy is held at its cap",
                          "# # got 0.52 CPUs", "# # cap 0.40 CPUs",
                          "# # cpu_shares=400: noisy 0.507",
                          "# ok 3 - cpu_shares=400: noisy gets 0.500",
                          "# # defaults written back: noisy 0.337",
                          "not ok 1 - vcpu_cgroup_weights", "unsteal-testhost: done"]):
    testhost._parse(failed_row, line, float(i))
failed_row.total = 6.0
tally = tallying.Tally()
summary = io.StringIO()
with contextlib.redirect_stdout(summary):
    tally.stage("test host v2-machined", lambda: testhost.row_verdict("v2-machined", [failed_row]))
    tally.stage("test host v1-systemd", lambda: testhost.row_verdict("v1-systemd", done["v1-systemd"]))
    tally.stage("test host v2-systemd", lambda: testhost.row_verdict("v2-systemd", done["v2-systemd"]))
    end = summary.tell()
    rc = tally.summary()
tail = summary.getvalue()[end:].splitlines()
ok(rc == 1 and tail[-1] == "1 passed, 2 failed, 0 skipped"
   and tail[-3].endswith("test host v2-machined: not ok: vcpu_cgroup_weights: "
                         "vcpu_quota=20000 (binds): noisy is held at its cap (got 0.52 "
                         "CPUs; cap 0.40 CPUs; cpu_shares=400: noisy 0.507)")
   and "test host v1-systemd: the image is missing" in tail[-2],
   "the summary ends with why each stage failed: the row's failed assertion with "
   "the lines right after it, the row that could not boot", tail)

spans.clear()
config.load(dict(os.environ, UNSTEAL_TESTHOST_LANES="1"))
with contextlib.redirect_stdout(sys.stderr):
    testhost.test_rows(testhost.LONGEST_FIRST)
ok(overlapping() == 0 and len(spans) == len(testhost.VARIANTS) - 1,
   "UNSTEAL_TESTHOST_LANES=1 boots one row after another", spans)
for bad in ("0", "two", "-1"):
    config.load(dict(os.environ, UNSTEAL_TESTHOST_LANES=bad))
    try:
        testhost.test_rows(testhost.LONGEST_FIRST)
        ok(False, f"UNSTEAL_TESTHOST_LANES={bad} is refused")
    except LabError as e:
        ok("UNSTEAL_TESTHOST_LANES" in str(e), f"UNSTEAL_TESTHOST_LANES={bad} is refused", e)


# A kselftest program that skipped as a whole: the reason its own TAP plan
# gave ('# 1..0 # SKIP ...'), not "no reason given".
from lablib.testing import kselftest  # noqa: E402
kout = qemuboot.Outcome()
for i, line in enumerate(["# selftests: mm: migrate_failsafe_test", "# TAP version 13",
                          "# 1..0 # SKIP needs two memory nodes",
                          "ok 1 selftests: mm: migrate_failsafe_test # SKIP"]):
    qemuboot.parse(kout, line, float(i), kselftest.CONSOLE)
progs, checks = qemuboot.skips(kout)
ok(progs == [Skip("migrate_failsafe_test", "needs two memory nodes")] and checks == [],
   "a program's skip as a whole keeps the reason of its own plan line", (progs, checks))

sys.exit(tap.end())
