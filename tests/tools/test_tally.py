# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab test's counting: nothing it runs can be dropped or hidden.

No root, no build: meson test's testlog.json is written here by hand in the
shapes meson 1.0 writes (one JSON object per test, TAP output in 'stdout'),
and tools/lab test's stages are replaced by stand-ins.

- mesonlog.measured(): the '# margin:' and '# measured:' lines each test
  printed, with its name (kept as JSON under _build/measurements/);
- mesonlog.results(): OK and EXPECTEDFAIL pass; SKIP is counted as skipped
  with the reason of its TAP plan ('1..0 # SKIP ...'); FAIL, TIMEOUT, ERROR
  and a result meson did not have before fail; a passing TAP test's skipped
  checks are listed with their reasons; a missing testlog.json is an error;
- Tally: the last line is 'N passed, N failed, N skipped'; every skip is
  printed by name with its reason before it, skipped checks of one reason
  grouped; a stage that raises is one failure;
- run_all(): a kernel selftest module that cannot be imported fails the run
  (it was once dropped silently behind 'except ImportError'); unsteal's
  package and the test host's image are made at nice 10 while the tests
  that check function run, and the tests that measure CPU time start only
  after both ended; a job that raises fails its own stage.
"""

import contextlib
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-tally-test-")
ok = tap.ok

from lablib.build import mesonlog  # noqa: E402
from lablib.common import LabError  # noqa: E402
from lablib.results import Counts, Skip, tap_skips  # noqa: E402
from lablib.testing import tally, testrun  # noqa: E402


def testlog(entries):
    d = os.path.join(WORK, "builddir")
    os.makedirs(os.path.join(d, "meson-logs"), exist_ok=True)
    with open(mesonlog.testlog(d), "w") as fh:
        for name, result, stdout in entries:
            fh.write(json.dumps({"name": name, "result": result, "stdout": stdout,
                                 "returncode": 0, "duration": 0.1}) + "\n")
    return d


# tap_skips: the shapes of our harnesses, GLib's and the kselftest harness
whole, checks = tap_skips("1..0 # SKIP needs root (run through tools/lab test)\n")
ok(whole == "needs root (run through tools/lab test)" and checks == [],
   "a TAP plan that skips the program gives its reason", (whole, checks))
whole, checks = tap_skips("ok 1 - placed\nok 2 - cpuset pinning # SKIP no cpuset controller\n"
                          "ok 3 /cli/valgrind # SKIP by request (-s option)\n"
                          "ok 4 hugetlb # SKIP: no huge pages\nnot ok 5 - bad\n1..5\n")
ok(whole is None and checks == [Skip("cpuset pinning", "no cpuset controller"),
                                Skip("/cli/valgrind", "by request (-s option)"),
                                Skip("hugetlb", "no huge pages")],
   "skipped checks are found with their reasons, passed and failed ones are not", checks)

d = testlog([
    ("unsteal:unit / a", "OK", "ok 1 - x\n# margin: x: got 1.03, bound <= 1.25, margin 0.22\n"
                               "# measured: noisy 0.985 of its share\n"
                               "ok 2 - y # SKIP no tracefs\n1..2\n"),
    ("unsteal:unit / b", "EXPECTEDFAIL", ""),
    ("unsteal:integration / c", "SKIP", "1..0 # SKIP needs systemd-machined\n"),
    ("unsteal:integration / d", "FAIL", "not ok 1 - z\n1..1\n"),
    ("unsteal:integration / e", "TIMEOUT", ""),
    ("unsteal:integration / f", "SOMETHINGNEW", ""),
    ("unsteal:unit / g", "SKIP", "exit status 77\n"),
])
c = mesonlog.results(d)
ok((c.passed, c.failed, len(c.skipped)) == (2, 3, 2),
   "OK and EXPECTEDFAIL pass; SKIP is skipped; FAIL, TIMEOUT and an unknown result fail",
   c)
ok(c.skipped == [Skip("unsteal:integration / c", "needs systemd-machined"),
                 Skip("unsteal:unit / g", "exit status 77")]
   and c.skipped_checks == [Skip("unsteal:unit / a: y", "no tracefs")],
   "every skip keeps its name and reason", c)
ok(any("SOMETHINGNEW" in w and "did not have" in w for w in c.why)
   and any(w.startswith("unsteal:integration / d: FAIL") for w in c.why),
   "each failed test says why", c.why)
ok(mesonlog.measured(d) == [
    {"source": "unsteal:unit / a", "kind": "margin",
     "line": "x: got 1.03, bound <= 1.25, margin 0.22"},
    {"source": "unsteal:unit / a", "kind": "measured", "line": "noisy 0.985 of its share"}],
   "margin and measured lines are kept with their test's name", mesonlog.measured(d))
try:
    mesonlog.results(os.path.join(WORK, "nothing-here"))
    ok(False, "no testlog.json is an error, not an empty pass")
except LabError as e:
    ok("testlog.json" in str(e), "no testlog.json is an error, not an empty pass", e)


def summary(t):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = t.summary()
    return rc, out.getvalue().splitlines()


t = tally.Tally()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    t.stage("meson", lambda: c)
    t.stage("a tuple", lambda: (3, 0))
    t.stage("one check", lambda: "anything")
    t.stage("kselftest", lambda: Counts(
        5, 0, [Skip("hugetlb_madv", "no hugetlbfs")],
        [Skip(f"prog: case {i}", "no huge pages") for i in range(10)]))
    t.stage("raises", lambda: 1 / 0)
    t.stage("lab error", lambda: (_ for _ in ()).throw(LabError("the image is missing")))
rc, lines = summary(t)
ok(rc == 1 and lines[-1] == "11 passed, 5 failed, 3 skipped",
   "the last line has passed, failed and skipped", lines[-1:])
ok("lab: skipped: meson: unsteal:integration / c: needs systemd-machined" in lines
   and "lab: skipped: kselftest: hugetlb_madv: no hugetlbfs" in lines
   and "lab: skipped check: meson: unsteal:unit / a: y: no tracefs" in lines,
   "every skipped unit and check is printed with its reason", lines)
grouped = [x for x in lines if x.startswith("lab: skipped checks (10): kselftest: no huge pages:")]
ok(len(grouped) == 1 and "and 4 more" in grouped[0],
   "many skipped checks of one reason are one line with their count", grouped)
ok(any("raises: ZeroDivisionError" in x for x in lines)
   and any("lab error: the image is missing" in x for x in lines),
   "a stage that raises fails with its error", lines)

t = tally.Tally()
with contextlib.redirect_stdout(io.StringIO()):
    t.stage("fine", lambda: Counts(2, 0))
rc, lines = summary(t)
ok(rc == 0 and lines == ["2 passed, 0 failed, 0 skipped"], "a clean run says so", lines)


# run_all(): a broken kselftest module fails the run.  Every other stage
# is a stand-in that passes.
def stub_run_all():
    saved = {}

    def put(obj, name, value):
        saved[(obj, name)] = getattr(obj, name)
        setattr(obj, name, value)

    put(testrun.os, "geteuid", lambda: 0)
    put(testrun.sources, "setup", lambda: None)
    put(testrun, "_patch_and_package_checks", lambda t: None)
    put(testrun, "_builds", lambda t, tier: True)
    put(testrun, "_libvirt_suites", lambda t, built, quick: None)
    put(testrun, "_roots", lambda quick: None)
    put(testrun.patchqueue, "read_series", lambda d: ["0001-x.patch"])
    from lablib.build import unsteal_build
    from lablib.package import unsteal_deb
    from lablib.testing import scalehost, testhost
    put(unsteal_build, "test", lambda **kw: Counts(1, 0))
    put(unsteal_deb, "build_and_check", lambda: Counts(1, 0))
    put(scalehost, "test_smoke", lambda: Counts(1, 0))
    put(testhost, "row_verdict", lambda v, outs: Counts(1, 0))
    return saved


def lanes(variants, then=()):
    """testhost.test_rows() without guests: the rows pass, each function
    of then runs and what it returned or raised is kept, as the lanes
    keep it."""
    out = {v: [] for v in variants}
    for name, fn in then:
        try:
            out[name] = fn()
        except Exception as e:  # noqa: BLE001 - kept, as test_rows() keeps it
            out[name] = e
    return out


def broken_selftests_run(image):
    """run_all() with every stage a stand-in that passes, the kselftest
    module unimportable, and the test host image built (image) or not;
    (exit status, output lines)."""
    from lablib.testing import testhost
    saved = stub_run_all()
    saved[(testhost, "test_build")] = testhost.test_build
    saved[(testhost, "test_rows")] = testhost.test_rows
    testhost.test_build = (lambda: "testhost.img") if image else (lambda: None)
    testhost.test_rows = lanes
    sys.modules["lablib.testing.kselftest"] = None  # 'from . import kselftest' raises ImportError
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = testrun.run_all(tier="full")
    finally:
        del sys.modules["lablib.testing.kselftest"]
        for (obj, name), value in saved.items():
            setattr(obj, name, value)
    return rc, out.getvalue().splitlines()


# Without a test host image the selftests run alone (the image stage's
# stand-in passes without an image: its stage counts one); with one they
# run in the matrix's lanes, and their exception fails their own stage.
rc, lines = broken_selftests_run(image=False)
ok(rc == 1 and lines[-1] == "5 passed, 1 failed, 0 skipped"
   and any("kernel selftests" in x and "ModuleNotFoundError" in x for x in lines),
   "a kernel selftest module that cannot be imported fails the run", lines[-4:])
rc, lines = broken_selftests_run(image=True)
ok(rc == 1 and lines[-1] == "12 passed, 1 failed, 0 skipped"
   and any("kernel selftests" in x and "ModuleNotFoundError" in x for x in lines),
   "... also when the selftests ran in the matrix's lanes", lines[-4:])


# run_all(): what is made beside the function tests, and when the tests
# that measure CPU time start.  Each stand-in notes when it ran; the
# package's and the image's note their nice and their commands' nice.
def nice_of_command():
    import subprocess
    return int(subprocess.run(["sh", "-c", "cut -d' ' -f19 /proc/self/stat"],
                              capture_output=True, text=True).stdout)


def beside_run(package_raises=False):
    import threading
    import time
    from lablib.build import unsteal_build
    from lablib.package import unsteal_deb
    from lablib.testing import testhost
    events, lock = [], threading.Lock()

    def note(what, **kw):
        with lock:
            events.append((what, kw))

    def tests(**kw):
        note("tests start", **kw)
        if kw.get("part") == "function":
            time.sleep(0.3)     # the package and the image start meanwhile
        note("tests end", **kw)
        return Counts(1, 0)

    def package():
        note("package", nice=os.getpriority(os.PRIO_PROCESS, 0), command=nice_of_command())
        time.sleep(0.5)         # still running when the function tests end
        if package_raises:
            raise LabError("lintian found an error")
        return Counts(1, 0)

    def image():
        note("image", nice=os.getpriority(os.PRIO_PROCESS, 0))
        return "testhost.img"

    saved = stub_run_all()
    for obj, name, value in ((unsteal_build, "test", tests),
                             (unsteal_deb, "build_and_check", package),
                             (testhost, "test_build", image),
                             (testhost, "test_rows", lanes),
                             (testrun, "kernel_selftests", lambda: Counts(1, 0))):
        saved[(obj, name)] = getattr(obj, name)
        setattr(obj, name, value)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = testrun.run_all(tier="full")
    finally:
        for (obj, name), value in saved.items():
            setattr(obj, name, value)
    return rc, out.getvalue().splitlines(), events


rc, lines, events = beside_run()
order = [(w, kw.get("part")) for w, kw in events]
ok(rc == 0 and order == [("tests start", "function"), ("package", None),
                         ("tests end", "function"), ("image", None),
                         ("tests start", "cpu-time"), ("tests end", "cpu-time")],
   "the package and the image are made while the function tests run; the CPU-time "
   "tests start after both", order)
ok(events[0][1] == {"no_suites": ["cpu-time"], "part": "function"}
   and events[4][1] == {"suites": ["cpu-time"], "part": "cpu-time"},
   "the two parts of meson test are the two sides of suite cpu-time", events)
ok(dict(events)["package"] == {"nice": 10, "command": 10} and dict(events)["image"]["nice"] == 10
   and os.getpriority(os.PRIO_PROCESS, 0) == 0,
   "the jobs beside the tests and their commands run at nice 10, the tests at 0", events)
rc, lines, events = beside_run(package_raises=True)
ok(rc == 1 and lines[-1] == "12 passed, 1 failed, 0 skipped"
   and any("unsteal package" in x and "lintian found an error" in x for x in lines),
   "a job that raised beside the tests fails its own stage", lines[-4:])

sys.exit(tap.end())
