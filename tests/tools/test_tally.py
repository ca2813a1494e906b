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
  (it was once dropped silently behind 'except ImportError'); the other
  stacks' patch checks and the packaging checks run beside the libvirt
  build, at nice 0, the kernel build starts once those that use the kernel
  tree ended, and the packaging checks go on beside it; unsteal's package
  then the test host's image, and beside them the image's build root
  compiled (the image waits for it) and the other libvirt base (its build,
  then its suite only when it built), are made at nice 10 while the tests
  that check function run, and the tests that measure CPU time start only
  after all of them ended; a job that raises fails its own stage.
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
    put(testrun.patchqueue, "check", lambda d: None)
    put(testrun, "_checks", lambda lab: [])
    put(testrun, "_builds", lambda t, before_kernel=None: (before_kernel(), True)[1])
    put(testrun, "_lab_suite", lambda: Counts(1, 0))
    put(testrun, "_other_bases", lambda quick: [])
    put(testrun, "_roots", lambda quick: None)
    put(testrun.patchqueue, "read_series", lambda d: ["0001-x.patch"])
    from lablib.build import unsteal_build
    from lablib.package import unsteal_deb
    from lablib.testing import scalehost, testhost
    put(unsteal_build, "test", lambda **kw: Counts(1, 0))
    put(unsteal_deb, "build_and_check", lambda: Counts(1, 0))
    put(scalehost, "test_smoke", lambda: Counts(1, 0))
    put(testhost, "row_verdict", lambda v, outs: Counts(1, 0))
    put(testhost, "test_build", lambda: None)
    put(testhost, "test_build_root", lambda: None)
    put(testhost, "test_rows", lanes)
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


def full_run(stubs=()):
    """run_all(tier="full") with stub_run_all()'s stand-ins and stubs
    [(object, name, value)] over them; (exit status, output lines)."""
    saved = stub_run_all()
    for obj, name, value in stubs:
        saved.setdefault((obj, name), getattr(obj, name))
        setattr(obj, name, value)
    from lablib import common
    out = io.StringIO()
    saved[(common, "PROGRESS")] = common.PROGRESS
    common.PROGRESS = out       # the stages' progress lines, in the output
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = testrun.run_all(tier="full")
    finally:
        for (obj, name), value in saved.items():
            setattr(obj, name, value)
    return rc, out.getvalue().splitlines()


def broken_selftests_run(image):
    """run_all() with every stage a stand-in that passes, the kselftest
    module unimportable, and the test host image built (image) or not;
    (exit status, output lines)."""
    from lablib.testing import testhost
    sys.modules["lablib.testing.kselftest"] = None  # 'from . import kselftest' raises ImportError
    try:
        return full_run([(testhost, "test_build",
                          (lambda: "testhost.img") if image else (lambda: None)),
                         (testhost, "test_rows", lanes)])
    finally:
        del sys.modules["lablib.testing.kselftest"]


# Without a test host image the selftests run alone (the image stage's
# stand-in passes without an image: its stage counts one); with one they
# run in the matrix's lanes, and their exception fails their own stage.
rc, lines = broken_selftests_run(image=False)
ok(rc == 1 and lines[-1] == "7 passed, 1 failed, 0 skipped"
   and any("kernel selftests" in x and "ModuleNotFoundError" in x for x in lines),
   "a kernel selftest module that cannot be imported fails the run", lines[-4:])
rc, lines = broken_selftests_run(image=True)
ok(rc == 1 and lines[-1] == "14 passed, 1 failed, 0 skipped"
   and any("kernel selftests" in x and "ModuleNotFoundError" in x for x in lines),
   "... also when the selftests ran in the matrix's lanes", lines[-4:])


def stages(lines):
    """The stages a run started, in order ('lab [MM:SS] test: NAME')."""
    return [x.split("] test: ", 1)[1] for x in lines if "] test: " in x
            and not x.split("] test: ", 1)[1].startswith("waited ")]


# run_all(): the checks made beside the builds.  The stand-ins of the
# checks wait until the libvirt build has started (so they can only pass by
# running beside it) and note their nice and thread; the packaging checks
# also wait until the kernel build has started; the kernel build notes which
# checks had ended.
def checks_run(failing=None):
    import threading
    from lablib.build import kcheck, kernel, libvirt
    from lablib.lab import guest
    from lablib.package import kernel_deb, libvirt_deb
    events, lock = [], threading.Lock()
    started, kernel_started = threading.Event(), threading.Event()

    def note(what, **kw):
        with lock:
            events.append((what, kw))

    def check(what, beside=None):
        def fn(*args):
            kw = {"beside_build": started.wait(5)}
            if beside:
                kw["beside_kernel"] = beside.wait(5)
            note(what, nice=os.getpriority(os.PRIO_PROCESS, 0), thread=threading.get_ident(),
                 **kw)
            if what == failing:
                raise LabError(f"{what} broke")
        return fn

    def series(d):
        check("series " + os.path.basename(d))()

    def build_libvirt(install=True, stack=None):
        started.set()
        note("build libvirt", thread=threading.get_ident())
        return "src"

    def build_kernel(patched):
        with lock:
            note_done = [w for w, kw in events if "beside_build" in kw]
        kernel_started.set()
        note("build kernel", done=note_done)

    stubs = [(testrun, name, getattr(testrun, name)) for name in ("_checks", "_builds")]
    stubs += [(testrun.patchqueue, "check", series),
              (kcheck, "checkpatch", check("checkpatch")),
              (kcheck, "configure_matrix", check("config matrix")),
              (libvirt_deb, "check_prepare", check("libvirt package", kernel_started)),
              (kernel_deb, "quick_check", check("kernel package", kernel_started)),
              (libvirt, "build", build_libvirt), (libvirt, "build_stock", lambda: "pfx"),
              (kernel, "build", build_kernel), (guest, "build_initramfs", lambda: None),
              (testrun, "kernel_selftests", lambda: Counts(1, 0))]
    rc, lines = full_run(stubs)
    return rc, lines, events


rc, lines, events = checks_run()
runs = stages(lines)
main_thread = dict(events)["build libvirt"]["thread"]
beside = [(w, kw) for w, kw in events[1:] if "beside_build" in kw]
ok(rc == 0 and events[0][0] == "series debian-13" and events[0][1]["thread"] == main_thread
   and len(beside) == 7 and all(kw["beside_build"] and kw["nice"] == 0
                                and kw["thread"] != main_thread for w, kw in beside),
   "the daemon's series is checked first; the other checks run beside the libvirt build, "
   "at nice 0", events)
done = dict(events)["build kernel"]["done"]
packages = [kw for w, kw in beside if w.endswith("package")]
ok({"series kernel-patches", "checkpatch", "config matrix"} <= set(done)
   and len(packages) == 3 and all(kw["beside_kernel"] for kw in packages),
   "the kernel build starts once the checks that use the kernel tree ended; the packaging "
   "checks run beside it", events)
counted = [i for i, x in enumerate(runs) if x.endswith("apply in order") or "checkpatch" in x
           or "config matrix" in x or (" package: " in x and not x.startswith("unsteal"))]
ok(len(counted) == 8 and runs.index("build kernel") < counted[1]
   and counted[-1] < runs.index("libvirt's own test suite and syntax-check"),
   "every check is counted, those beside the builds after them", runs)
rc, lines, events = checks_run(failing="checkpatch")
ok(rc == 1 and any("FAIL: kernel series: checkpatch" in x and "checkpatch broke" in x
                   for x in lines) and "build kernel" in dict(events),
   "a check that raised beside the builds fails its own stage, and the run goes on",
   [x for x in lines if "FAIL" in x])


# run_all(): what is made beside the function tests, and when the tests
# that measure CPU time start.  Each stand-in notes when it ran; the
# package's, the image's and the other libvirt base's note their nice and
# their commands' nice.
def nice_of_command():
    import subprocess
    return int(subprocess.run(["sh", "-c", "cut -d' ' -f19 /proc/self/stat"],
                              capture_output=True, text=True).stdout)


def beside_run(package_raises=False, other_build_raises=False, build_root_raises=False):
    import threading
    import time
    from lablib.build import libvirt, unsteal_build
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

    package_ended = threading.Event()

    def package():
        note("package", nice=os.getpriority(os.PRIO_PROCESS, 0), command=nice_of_command())
        time.sleep(0.5)         # still running when the function tests end
        package_ended.set()
        if package_raises:
            raise LabError("lintian found an error")
        return Counts(1, 0)

    build_root_ended = threading.Event()

    def build_root():
        note("build root", nice=os.getpriority(os.PRIO_PROCESS, 0),
             package_ended=package_ended.is_set())
        time.sleep(0.7)         # still running when the package ends
        build_root_ended.set()
        if build_root_raises:
            raise LabError("ninja failed in the build root")

    def image():
        note("image", nice=os.getpriority(os.PRIO_PROCESS, 0),
             after_build_root=build_root_ended.is_set())
        return "testhost.img"

    def other_build(install=True, stack=None):
        note("other build", nice=os.getpriority(os.PRIO_PROCESS, 0), install=install)
        if other_build_raises:
            raise LabError("libvirt-9.0 does not compile")
        return "src"

    def other_suite(syntax_check=True, stack=None):
        note("other suite", nice=os.getpriority(os.PRIO_PROCESS, 0))
        return Counts(1, 0)

    rc, lines = full_run([(unsteal_build, "test", tests),
                          (unsteal_deb, "build_and_check", package),
                          (testhost, "test_build", image),
                          (testhost, "test_build_root", build_root),
                          (testhost, "test_rows", lanes),
                          (testrun, "kernel_selftests", lambda: Counts(1, 0)),
                          (testrun, "_other_bases", testrun._other_bases),
                          (libvirt, "build", other_build),
                          (libvirt, "test_suite", other_suite)])
    return rc, lines, events


rc, lines, events = beside_run()
order = [(w, kw.get("part")) for w, kw in events]
cpu_time = order.index(("tests start", "cpu-time"))
function = order.index(("tests start", "function"))
ok(rc == 0 and sorted(order[:cpu_time]) == [("build root", None), ("image", None),
                                            ("other build", None), ("other suite", None),
                                            ("package", None), ("tests end", "function"),
                                            ("tests start", "function")]
   and order.index(("build root", None)) < order.index(("other build", None))
   and order.index(("package", None)) < order.index(("tests end", "function"))
   and order.index(("package", None)) < order.index(("image", None))
   and order.index(("other build", None)) < order.index(("other suite", None))
   and order[cpu_time:] == [("tests start", "cpu-time"), ("tests end", "cpu-time")],
   "the package, then the image, and the other libvirt base are made while the function "
   "tests run; the CPU-time tests start after all of them", order)
ok(events[function][1] == {"no_suites": ["cpu-time"], "part": "function"}
   and events[cpu_time][1] == {"suites": ["cpu-time"], "part": "cpu-time"},
   "the two parts of meson test are the two sides of suite cpu-time", events)
ok(dict(events)["build root"]["package_ended"] is False,
   "the build root and the other base are built beside the package, not after it", events)
ok(dict(events)["image"]["after_build_root"] is True,
   "the image waits for the build root compiled beside it", events)
ok(dict(events)["package"] == {"nice": 10, "command": 10} and dict(events)["image"]["nice"] == 10
   and dict(events)["build root"] == {"nice": 10, "package_ended": False}
   and dict(events)["other build"] == {"nice": 10, "install": False}
   and dict(events)["other suite"]["nice"] == 10 and os.getpriority(os.PRIO_PROCESS, 0) == 0,
   "the jobs beside the tests and their commands run at nice 10, the tests at 0", events)
runs = stages(lines)
ok(runs.index("build libvirt-9.0") < runs.index("libvirt-9.0: libvirt's own test suite and "
                                                "syntax-check")
   < [i for i, x in enumerate(runs) if "measure CPU time" in x][0],
   "the other base's build and suite are counted before the CPU-time tests", runs)
rc, lines, events = beside_run(package_raises=True)
ok(rc == 1 and lines[-1] == "16 passed, 1 failed, 0 skipped"
   and any("unsteal package" in x and "lintian found an error" in x for x in lines),
   "a job that raised beside the tests fails its own stage", lines[-4:])
rc, lines, events = beside_run(build_root_raises=True)
ok(rc == 0 and lines[-1] == "17 passed, 0 failed, 0 skipped"
   and any("build root compiled beside the tests failed" in x and "ninja failed" in x
           for x in lines) and "image" in dict(events),
   "a build root that failed beside the tests is said, and the image's stage compiles it",
   [x for x in lines if "build root" in x or "passed" in x])
rc, lines, events = beside_run(other_build_raises=True)
ok(rc == 1 and lines[-1] == "15 passed, 1 failed, 0 skipped"
   and any("FAIL: build libvirt-9.0" in x and "does not compile" in x for x in lines)
   and "other suite" not in dict(events)
   and not any("libvirt-9.0: libvirt's own test suite" in x for x in stages(lines)),
   "an other base that does not build fails its build stage; its suite neither runs "
   "nor counts", [x for x in lines if "FAIL" in x or "passed" in x])

sys.exit(tap.end())
