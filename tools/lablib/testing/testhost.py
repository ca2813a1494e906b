# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab testhost: a booted Debian host with our libvirt, for the cgroup matrix.

'build' makes the image of a release (testhostrelease.py: Debian 13 with
the 11.3.0 series, or with --release debian-12 Debian 12 with the 9.0.0
port; testhostimage.py, from the cached roots of testhostroot.py).  'boot --variant V' boots it with the lab kernel
(lab.config) or Debian's under QEMU TCG, on a fresh copy-on-write overlay.
Each VARIANT is one row of the matrix: cgroup v1 or v2, with or without
systemd and machined.  Inside, the runner starts the integration tests of
tests/integration/ (the lab daemon runs in the test host; with
UNSTEAL_TESTHOST=1 tests/integration/labtest.py passes guest.TEST_HOST to
the lab) and prints TAP, then
'unsteal-testhost: N passed, N failed'.  qemuboot.py streams the serial
console, logs it to the release's log (_build/logs/testhost-VARIANT.log for
Debian 13) and parses it into an Outcome; verdict() counts it and writes
result-VARIANT.json in the release's directory.  tools/lab test builds the
Debian 13 image with test_build() and boots the rows with test_rows(), two
at a time.
"""

import concurrent.futures
import json
import os
import re
import threading

from .. import config
from ..common import LabError, ROOT, dir_lock, mkdirs, run, step
from ..results import Counts
from . import qemuboot
from .qemuboot import Console, parse
from .qemuboot import boot as boot_qemu
from . import testhostrelease
from .testhostimage import (build, build_root, built_kernel_image, integration_tests,
                            kernel_image)
from .testhostrelease import DEFAULT, testhost_dir

# What tools/lab test runs inside the test host, on every variant: the
# libvirt integration tests.  The analyser's tests (unsteal_*) and the
# scheduler benchmark do not depend on the host's cgroup layout and run on
# the development host only.
TESTS_IN_HOST = ["vcpu_cgroup_start", "vcpu_cgroup_daemon"]
# cgroup v1 moves vCPUs on live changes; v2 keeps placement while a domain
# runs (each test skips on the other).  With machined also the test that
# needs machined, the weights measured with CPU time (the one test that
# runs minutes) and the daemon killed during placement changes: the
# development host runs those two on v1; the other v2 rows by hand
# (docs/testhost.md).
# The memory limits of a guest that balloons down and up (vcpu_cgroup_memory),
# where a v2 domain's whole group moves below the shared partition: on the
# v2 row without systemd (libvirt's own groups) and the one with machined
# (scopes); systemd without machined places groups as the row without
# systemd does.  The development host runs them on v1.
# lab_guest (the lab's guests run a thread per vCPU, busy vCPUs run) does
# not depend on the cgroup layout and runs on the development host only:
# every test of a row runs guests, and fails when they do not.
TESTS_V1 = TESTS_IN_HOST + ["vcpu_cgroup_live"]
TESTS_V2_PLACEMENT = TESTS_IN_HOST + ["vcpu_cgroup_v2"]
TESTS_V2 = TESTS_V2_PLACEMENT + ["vcpu_cgroup_memory"]
TESTS_WITH_MACHINED = TESTS_V2 + ["vcpu_cgroup_machined", "vcpu_cgroup_weights",
                                  "vcpu_cgroup_crash"]

# On an image built from our .debs (testhost build --libvirt packages), the
# rows with systemd also run the libvirt source package's autopkgtests that
# need a whole machine (tests/integration/test_libvirt_autopkgtest.py; not
# in tests/meson.build: the development host has no packages to test).
PACKAGE_TESTS = ["libvirt_autopkgtest"]
# Measurements run by hand on a row, never by the matrix (not in
# tests/meson.build either): what a sharing domain's busy helper process
# costs on cgroup v2 (docs/vcpu-cgroup.md).
MEASUREMENT_TESTS = ["vcpu_cgroup_helpers"]

VARIANTS = {
    "v2-systemd": {
        "desc": "cgroup v2 (unified), systemd as PID 1 without machined; the tests run "
                "as a service",
        "append": "systemd.unified_cgroup_hierarchy=1 systemd.show_status=error "
                  "unsteal.machined=0",
        # and unsteal's package: its exporter service under systemd
        "tests": TESTS_V2_PLACEMENT + ["unsteal_service"],
    },
    "v2-machined": {
        "desc": "cgroup v2 (unified), systemd with systemd-machined: domains are "
                "machines in scopes, the per-host partition is a slice",
        "append": "systemd.unified_cgroup_hierarchy=1 systemd.show_status=error",
        "tests": TESTS_WITH_MACHINED,
    },
    "v2-nosystemd": {
        "desc": "cgroup v2 mounted by a small init (no systemd); the tests run from it",
        "append": "init=/usr/local/sbin/unsteal-init unsteal.cgroup=v2",
        # and bench host's quick run on v2 (the development host runs it on v1)
        "tests": TESTS_V2 + ["bench_host"],
    },
    "v1-systemd": {
        "desc": "cgroup v1 under systemd (systemd 257 forced back to v1; Debian 12's 252 "
                "boots it with systemd.unified_cgroup_hierarchy=0 alone): cpu,cpuacct "
                "co-mounted plus systemd's empty v2 hierarchy",
        "append": "systemd.unified_cgroup_hierarchy=0 SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1 "
                  "systemd.show_status=error unsteal.machined=0",
        "tests": TESTS_V1,
    },
    "v1-comounted": {
        "desc": "cgroup v1, cpu and cpuacct co-mounted, every other controller on its own "
                "(no v2 hierarchy, no systemd)",
        "append": "init=/usr/local/sbin/unsteal-init unsteal.cgroup=v1-comounted",
        "tests": TESTS_V1,
    },
}
MEMORY_MB = 2048
# boot(results_disk=): the guest's /dev/vdb, for what it writes back (a tar)
RESULTS_DISK_MB = 16
# Rows booted at once by tools/lab test (lanes())
LANES = 2
# The order tools/lab test starts the rows in, the longest first, so that
# two lanes end close together: in two lanes of a clean-clone run they
# took 1261, 584, 457, 208 and 161 s
# (docs/results/2026-11-28-gate-trim.md).
LONGEST_FIRST = ["v2-machined", "v2-nosystemd", "v2-systemd", "v1-systemd", "v1-comounted"]


# ---------------------------------------------------------------- boot

# The runner's TAP (qemuboot.py parses it): '# test: NAME' starts a test,
# 'ok N - NAME' is its result, '# ok N - ...' one of its assertions, and
# '# # ...' lines right after a '# not ok' what the program said about it.
CONSOLE = Console("unsteal-testhost: ", re.compile(r"^(not ok|ok) (\d+) - (\S+)(.*)$"),
                  re.compile(r"^# (not ok|ok) \d+ - (.*)$"), re.compile(r"^# test: (\S+)"),
                  detail_re=re.compile(r"^# # (.*)$"))


def _parse(out, line, t_rel):
    parse(out, line, t_rel, CONSOLE)


def machine_args(cpus=2, nodes=1, memory_mb=MEMORY_MB):
    """QEMU's CPUs and memory: cpus CPUs, in nodes NUMA nodes (one socket,
    and so one last-level cache, per node) with the memory split evenly."""
    if nodes <= 1:
        return ["-smp", str(cpus), "-m", f"{memory_mb}M"]
    if cpus % nodes or memory_mb % nodes:
        raise LabError(f"{cpus} CPUs and {memory_mb} MiB do not split into {nodes} nodes")
    per = cpus // nodes
    args = ["-smp", f"{cpus},sockets={nodes},cores={per},threads=1", "-m", f"{memory_mb}M"]
    for n in range(nodes):
        args += ["-object", f"memory-backend-ram,id=mem{n},size={memory_mb // nodes}M",
                 "-numa", f"node,nodeid={n},cpus={n * per}-{(n + 1) * per - 1},memdev=mem{n}"]
    return args


def boot(variant, timeout=3600, tests=None, keep=False, kernel="ours", rel=DEFAULT,
         kernel_path=None, machine=None, tcg="single", append_extra="", name=None,
         show=None, results_disk=None):
    """Boots one row; with kernel 'ours' the lab kernel at kernel_path, or
    built first when None.  machine: machine_args() (default 2 CPUs, one
    node); tcg: 'single' or 'multi' TCG threads; append_extra: more of the
    kernel command line; name: of the run's overlay and log (default
    the variant's); show: what gets each console line instead of stdout
    (qemuboot.boot); results_disk: a file made into an empty raw disk of
    RESULTS_DISK_MB, the guest's /dev/vdb, for what it writes back."""
    if variant not in VARIANTS:
        raise LabError(f"unknown variant {variant!r}; one of {', '.join(VARIANTS)}")
    if not os.path.exists(rel.image):
        opt = "" if rel.default else f" --release {rel.name}"
        raise LabError(f"{rel.image} is missing: run tools/lab testhost build{opt} first")
    if kernel == "ours":
        boot_files = ["-kernel", kernel_path or kernel_image()]
    else:
        boot_files = ["-kernel", rel.debian_kernel, "-initrd", rel.debian_initrd]
    name = name or variant
    overlay = os.path.join(rel.dir, f"run-{name}.qcow2")
    if os.path.exists(overlay):
        os.unlink(overlay)
    run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", rel.image, overlay])
    append = ("root=/dev/vda rw console=ttyS0 loglevel=4 panic=-1 unsteal.run=1 "
              + VARIANTS[variant]["append"])
    if tests:
        append += " unsteal.tests=" + ",".join(tests)
    if append_extra:
        append += " " + append_extra
    # One TCG thread for all vCPUs by default: with multi-threaded TCG the
    # guest kernel's live code patching (static keys, e.g. the CFS bandwidth
    # key that vCPU quotas flip) raced with the other vCPU and ended in an
    # "int3" oops in 3 of 10 boots on 2026-11-23; in one thread it cannot.
    if tcg not in ("single", "multi"):
        raise LabError(f"tcg {tcg!r}: 'single' or 'multi'")
    drives = ["-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe"]
    if results_disk:
        with open(results_disk, "wb") as fh:
            fh.truncate(RESULTS_DISK_MB << 20)
        drives += ["-drive", f"file={results_disk},if=virtio,format=raw"]
    cmd = ["nice", "-n", "19", "qemu-system-x86_64", "-accel", f"tcg,thread={tcg}",
           "-nographic", "-no-reboot"] + (machine or machine_args()) + [
           "-cpu", "max", "-nic", "none"] + drives + ["-append", append] + boot_files
    log = rel.log(name)
    which = "our kernel" if kernel == "ours" else "Debian's kernel"
    step(f"testhost: booting {variant} of {rel.describe()} ({which}): "
         f"{VARIANTS[variant]['desc']} "
         f"(watchdog {timeout} s; "
         f"console in {os.path.relpath(log, ROOT)})")
    try:
        return boot_qemu(cmd, log, timeout, CONSOLE, timestamps=True, show=show)
    finally:
        if not keep and os.path.exists(overlay):
            os.unlink(overlay)


def verdict(variant, out, rel=DEFAULT):
    """(passed, failed) test programs of one boot, printed with each failed
    assertion and problem, and saved in result-VARIANT.json."""
    c = _judge(variant, out, rel)
    return c.passed, c.failed


def _judge(variant, out, rel):
    """verdict() as Counts: with every skip, and the lines that say why
    the row failed."""
    passed = sum(1 for r in out.results if r.ok and not r.skipped)
    skipped_programs, skipped_checks = qemuboot.skips(out)
    skipped = [r.name for r in out.results if r.skipped]
    failed = sum(1 for r in out.results if not r.ok)
    sp = sum(1 for s in out.subresults if s.ok)
    sf = {i: s for i, s in enumerate(out.subresults) if not s.ok}
    problems = []
    if not out.done:
        failed += 1
        problems.append("the test host did not finish its run ("
                        + ("watchdog expired" if out.timed_out else
                           "no 'up' line: it did not boot to the runner" if out.up_at is None
                           else "it stopped early") + ")")
    elif not out.results:
        failed += 1
        problems.append("the test host finished without reporting a test program")
    if out.splats:
        problems.append(f"kernel problem lines: {out.splats[0]}")
    up = f"{out.up_at:.1f} s" if out.up_at is not None else "never"
    step(f"testhost: {variant}: runner up after {up} (guest uptime "
         f"{out.guest_uptime} s), whole run {out.total:.0f} s")
    step(f"testhost: {variant}: test programs {passed} passed, {failed} failed"
         + (f", {len(skipped)} skipped ({', '.join(skipped)})" if skipped else "")
         + f"; assertions {sp} ok, {len(sf)} not ok")
    why = [f"not ok: {s.program}: {s.description}"
           + (f" ({'; '.join(out.details[i])})" if out.details.get(i) else "")
           for i, s in sf.items()] + problems
    for line in why:
        print(f"lab: testhost: {variant}: {line}", flush=True)
    res = {"variant": variant, "release": rel.name, "up_s": out.up_at, "guest_uptime_s": out.guest_uptime,
           "total_s": out.total, "programs": [[r.ok, r.name, r.skipped] for r in out.results],
           "skipped": skipped,
           "assertions_ok": sp, "assertions_not_ok": [list(s) for s in sf.values()],
           "problems": problems, "measurements": out.measured}
    mkdirs(rel.dir)
    with open(os.path.join(rel.dir, f"result-{variant}.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    return Counts(passed, failed, skipped_programs, skipped_checks, why)


# The test host directory's lock (dir_lock) while this process holds it,
# and how many holders of the process share it
_LOCK = {"file": None, "holders": 0}
_LOCK_GUARD = threading.Lock()


class _HostLock:
    """One holder's share of the test host's lock; close() (or the end of a
    with block) gives it back, the last one releases the lock."""

    def __init__(self):
        self.closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with _LOCK_GUARD:
            if self.closed:
                return
            self.closed = True
            _LOCK["holders"] -= 1
            if not _LOCK["holders"]:
                _LOCK["file"].close()
                _LOCK["file"] = None


def host_lock():
    """The test host directory's lock: another lab command that holds it
    is refused at once (dir_lock); the threads of this one share it, as
    the scale smoke run does in the matrix's lanes (test_rows())."""
    with _LOCK_GUARD:
        if _LOCK["file"] is None:
            _LOCK["file"] = dir_lock(testhost_dir(), "tools/lab testhost")
        _LOCK["holders"] += 1
        return _HostLock()


def test_build_root():
    """tools/lab test: the image's build root compiled ahead of test_build(),
    beside other work."""
    lock = host_lock()
    try:
        build_root()
    finally:
        lock.close()


def test_build():
    """tools/lab test: the image (our libvirt built from the work tree) and the
    lab kernel that every row boots (its "build kernel" stage built it)."""
    lock = host_lock()
    try:
        image = build()
        built_kernel_image()
        return image
    finally:
        lock.close()


def image_libvirt(rel=DEFAULT):
    """Where the release's built image has its libvirt from ('tree' or
    'packages'; None before a build)."""
    try:
        with open(os.path.join(rel.dir, "image.json")) as fh:
            return json.load(fh).get("libvirt")
    except (OSError, ValueError):
        return None


def has_systemd(variant):
    return "init=" not in VARIANTS[variant]["append"]


def tests_in_host(variant, rel=DEFAULT):
    """What a matrix run runs on a row; an image without unsteal's .deb
    leaves out the test of its service, one from our .debs adds
    PACKAGE_TESTS on the rows with systemd."""
    tests = VARIANTS[variant].get("tests", TESTS_IN_HOST)
    tests = tests if rel.unsteal_deb else [t for t in tests if t != "unsteal_service"]
    if image_libvirt(rel) == "packages" and has_systemd(variant):
        tests = tests + PACKAGE_TESTS
    return tests


def lanes():
    """How many rows tools/lab test boots at once: QEMU runs a row's guest in
    one TCG thread, which keeps one host CPU busy, so two rows on a 2-CPU
    host use the CPU that one row leaves idle.  UNSTEAL_TESTHOST_LANES sets
    it (1: one row after another)."""
    value = config.get().testhost_lanes
    if value is None:
        return max(1, min(LANES, os.cpu_count() or 1))
    if not value.isdigit() or int(value) < 1:
        raise LabError(f"UNSTEAL_TESTHOST_LANES={value!r}: a number of rows, 1 or more")
    return int(value)


def _progress(variant):
    """show() for a row that boots beside others: its test programs as they
    start and end, failed assertions and kernel problem lines, as progress
    lines named by the row (the whole console is in the row's log)."""
    def show(line):
        line = line.strip()
        if (CONSOLE.program_re.match(line) or CONSOLE.result_re.match(line)
                or line.startswith("# not ok") or CONSOLE.splat_re.search(line)):
            step(f"testhost: {variant}: {line}")
    return show


def _row(variant, kpath, timeout, show):
    """One row's boots: one, or two when the guest kernel died before the
    run ended (nested TCG has shown an int3 oops while the kernel patched
    its own code)."""
    def once():
        return boot(variant, timeout=timeout, tests=tests_in_host(variant), kernel="ours",
                    kernel_path=kpath, show=show)

    first = once()
    if first.done or not first.splats or first.timed_out:
        return [first]
    step(f"testhost: {variant}: the guest kernel failed before the run ended "
         f"({first.splats[0]}); booting it once more")
    return [first, once()]


def test_rows(variants, timeout=3600, then=()):
    """tools/lab test: tests_in_host() on each row of the matrix, booted with
    our kernel (test_build built it), lanes() rows at a time, the rows in
    the order given (the longest first keeps the lanes even).  timeout:
    each boot's watchdog, a guard against a hung guest (v2-machined took
    1266 s alone on CI's machine, and rows side by side share memory
    bandwidth and the host's caches).  then: [(name, function)], more
    guests' work that the lanes take once every row has started (the scale
    smoke run and the kernel selftests: each keeps one CPU busy, as a row
    does, and so fills the lane that ends first).  Returns
    {variant: [Outcome, ...] or the LabError that stopped it, name: the
    function's value or the exception it raised}; row_verdict() counts a
    row, job_result() a function's."""
    n = lanes()
    lock = host_lock()
    try:
        kpath = built_kernel_image()
        step(f"testhost: {len(variants)} rows, {n} at a time "
             f"(consoles in {os.path.relpath(DEFAULT.log('ROW'), ROOT)})"
             + (f", then {', '.join(name for name, _ in then)}" if then else ""))

        def one(v):
            try:
                return _row(v, kpath, timeout, _progress(v) if n > 1 else None)
            except LabError as e:
                return e
            finally:
                step(f"testhost: {v}: finished")

        def job(name, fn):
            try:
                return fn()
            except Exception as e:      # counted by job_result() in its own stage
                return e
            finally:
                step(f"testhost: {name}: finished")

        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            futures = {v: pool.submit(one, v) for v in variants}
            futures.update({name: pool.submit(job, name, fn) for name, fn in then})
        return {k: f.result() for k, f in futures.items()}
    finally:
        lock.close()


def job_result(value):
    """What test_rows() kept of a function it ran: its value, or the
    exception it raised, raised again (so that the stage counting it fails
    as it would have alone)."""
    if isinstance(value, Exception):
        raise value
    return value


def row_verdict(variant, outs):
    """Counts of a row that test_rows() booted: its test
    programs, and the lines that say why it failed, which tools/lab test
    repeats in its summary (kselftest output follows the matrix, so these
    lines are far from the end of a CI log).  A failed first boot is
    printed and the second one counts."""
    if isinstance(outs, LabError):
        raise outs
    for out in outs[:-1]:
        verdict(variant, out)
    return _judge(variant, outs[-1], DEFAULT)


def command(args):
    from ..common import require_root
    require_root("tools/lab testhost")
    with host_lock():
        return _command(args)


def _command(args):
    rel = testhostrelease.get(args.release)
    if args.action == "build":
        build(args.libvirt, rel, stock=args.stock)
        if args.kernel == "ours":
            kernel_image()
        return 0
    if args.action == "kernel":
        kernel_image()
        return 0
    variants = list(VARIANTS) if args.variant == "all" else [args.variant]
    matrix = args.tests == "matrix"
    tests = args.tests.split(",") if args.tests and not matrix else None
    known = integration_tests() + PACKAGE_TESTS + MEASUREMENT_TESTS
    for t in tests or []:
        if t not in known:
            raise LabError(f"unknown test {t!r}; 'matrix' or one of {', '.join(known)}")
    # Our kernel built (incrementally) once for all the boots
    kpath = kernel_image() if args.kernel == "ours" else None
    total_p = total_f = 0
    for v in variants:
        out = boot(v, timeout=args.timeout, tests=tests_in_host(v, rel) if matrix else tests,
                   keep=args.keep, kernel=args.kernel, rel=rel, kernel_path=kpath)
        p, f = verdict(v, out, rel)
        total_p += p
        total_f += f
    print(f"{total_p} passed, {total_f} failed", flush=True)
    return 1 if total_f else 0
