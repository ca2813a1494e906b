# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab test: every test the project has, ending with 'N passed, N failed,
N skipped' (tally.py); --tier unit and --tier lab run a part of it (TIERS).

The full tier's stages, in order (lab: setup, the builds and our meson
tests; unit: only the unit suite, without root): setup; the daemon's libvirt
series (every patch lints clean and applies in order); the libvirt builds
(patched, then stock) and the kernel's, which starts after the kernel series'
checks that use its work tree; beside the builds, the other stacks' series
checks, the kernel series' checkpatch --strict and its config matrix resolved
(built by 'tools/lab check kernel --config-matrix'), and the packaging checks
(each libvirt stack's Debian source package assembles with the series on
Debian's own patches; the kernel series applies on Debian's patched linux
tree and the flavour's config has what it needs; the full package builds are
'tools/lab package', not tests), counted after the builds; libvirt's own
test suite and syntax-check on the patched tree; our meson tests (unit tests
of src/ and the integration tests that drive real guests through the lab
daemon), those that check function while unsteal's own Debian package
(built, its autopkgtests run), the test host's image (its build root
compiled in another thread first) and every other libvirt base (libvirt-9.0,
the Debian 12 port: its build and libvirt's own suite, which holds our
qemuvcpucgrouptest) are made beside them, then those that
measure CPU time alone; the libvirt integration tests again inside the test
host, on each row of the host matrix (tools/lablib/testing/testhost.py), then
the scale benchmark's smoke run in it (scalehost.py) and the kernel selftests
in QEMU (once the kernel series has patches) in the lane of the matrix that
ends first.  The Debian roots the package and the image start from are made
beside the builds.

UNSTEAL_LIBVIRT_STACK=libvirt-9.0 runs the daemon and integration tests
against the Debian 12 port instead (the 11.3.0 stack then gets the short
stage).
"""

import os
import threading
import time

from ..common import step
from ..stack import patchqueue, sources, stacks
from .tally import Tally

# What 'tools/lab test --tier' runs (HACKING.md): unit, the tests of src/ and
# tools/ (seconds, no root, nothing of libvirt or the kernel built); lab, the
# development host's tests (setup, the builds, every meson test of ours);
# full, everything (the README's command, what CI runs).
TIERS = ("unit", "lab", "full")


def _one(result):
    """A stage that is one check, whatever its function returns (a tuple
    return value means (passed, failed) counts to Tally.stage)."""
    return True


def run_all(tier="full", quick=False):
    """tools/lab test: the stages of the tier; prints the summary and
    returns the exit status."""
    t = Tally()
    if tier == "unit":
        from ..build import unsteal_build
        t.stage("our unit tests (meson test --suite unit, no root)", unsteal_build.test_unit)
        return t.summary()
    root = os.geteuid() == 0
    if root:
        t.stage("setup (deb-src entries, packages, pinned sources)", sources.setup)
    else:
        # Without root nothing of the lab can run: that is a failed stage,
        # not a skip (--tier unit is the run that needs no root).
        t.stage("root (the lab daemon, the guests and the setup need it; "
                "--tier unit does not)", _need_root)
        return t.summary()
    from ..build import unsteal_build
    if tier != "full":
        _builds(t)
        t.stage("our tests (meson test)", unsteal_build.test)
        return t.summary()
    lab = stacks.lab_libvirt()
    # The daemon's libvirt series first: the libvirt builds start from its
    # base.  The other checks of the patches and the packaging checks, one
    # process at a time that waits on git, tar and the disk more than it
    # computes, run beside the builds; the kernel build waits for those that
    # use the kernel's work tree.
    t.stage(_series_stage(lab), lambda: patchqueue.check(lab.dir))
    checks = _Beside(_checks(lab), nice=0)
    roots = _Beside([(ROOTS, lambda: _roots(quick))])
    built = _builds(t, before_kernel=lambda: checks.wait_for(CONFIG_MATRIX))
    _count(t, checks.jobs, checks.wait())
    if built and not quick:
        t.stage(f"libvirt's own test suite and syntax-check{_which(lab)}",
                _lab_suite)
    error = roots.wait()[ROOTS]
    if error:
        step(f"test: making {ROOTS} beside the builds failed ({error}); the stages "
             f"that need them make them")
    # unsteal's package and the test host's image (one thread: the image
    # installs the package), and the image's build root compiled, then the
    # other libvirt bases' builds (another) are made beside the tests that
    # check function (daemons, cgroup files, placement); the tests that
    # measure CPU time (suite cpu-time, tests/meson.build) run after them,
    # alone on the CPUs.
    others = _other_bases(quick)
    bases = _Beside(_build_root(built, quick) + others)
    made = _Beside(_package_and_image(built, quick, bases))
    t.stage("our tests that check function (meson test --no-suite cpu-time), beside "
            "the unsteal package, the test host image and the other libvirt bases",
            lambda: unsteal_build.test(no_suites=["cpu-time"], part="function"))
    outcomes = {name: value for m in (made, bases) for name, value in m.wait().items()}
    _count(t, others, outcomes)
    t.stage("our tests that measure CPU time (meson test --suite cpu-time), alone",
            lambda: unsteal_build.test(suites=["cpu-time"], part="cpu-time"))
    _package_and_hosts(t, outcomes)
    return t.summary()


ROOTS = "the Debian roots"


class _Beside:
    """Work run in a thread beside the stages, at nice 10 unless told (Linux
    keeps nice per thread, and the thread's commands inherit it), so that
    what runs in the foreground keeps the CPUs it needs.  jobs: [(name,
    function)] or [(name, function, after)], run in order; a job with after
    runs only when the job named after returned.  wait() joins the thread
    and returns {name: the function's value or the exception it raised}
    (testhost.job_result() turns one into a stage's result; a job that did
    not run has no entry)."""

    def __init__(self, jobs, nice=10):
        self.jobs, self.nice, self.outcomes, self.done = jobs, nice, {}, False
        self.ended = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True, name="beside")
        self.thread.start()

    def _run(self):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        for name, fn, *after in self.jobs:
            if after and (after[0] not in self.outcomes
                          or isinstance(self.outcomes[after[0]], Exception)):
                continue
            try:
                outcome = fn()
            except Exception as e:      # counted where wait()'s caller wants it
                outcome = e
            with self.ended:
                self.outcomes[name] = outcome
                self.ended.notify_all()
        with self.ended:
            self.done = True
            self.ended.notify_all()

    def wait_for(self, name):
        """Until the job named has ended (or the thread, when the job did not run)."""
        t0 = time.monotonic()
        with self.ended:
            self.ended.wait_for(lambda: name in self.outcomes or self.done)
        waited = time.monotonic() - t0
        if waited >= 1:
            step(f"test: waited {waited:.0f} s for {name}")

    def wait(self):
        t0 = time.monotonic()
        self.thread.join()
        waited = time.monotonic() - t0
        if waited >= 1:
            names = [job[0] for job in self.jobs]
            step(f"test: waited {waited:.0f} s for {names[0]}"
                 + (f" and {len(names) - 1} more job(s) beside it" if len(names) > 1 else ""))
        return self.outcomes


def _count(t, jobs, outcomes):
    """Each job of a _Beside that ran, as a stage of its own, in the jobs'
    order: its value, or the exception it raised, which fails the stage."""
    from .testhost import job_result
    for name, *_ in jobs:
        if name in outcomes:
            t.stage(name, lambda name=name: job_result(outcomes[name]))


def _roots(quick):
    """The Debian roots of the later stages, made beside the builds: the
    trixie buildd root that unsteal's package builds in and its
    autopkgtests' testbed comes from, and the test host's base and build
    roots.  Cached tarballs (package/chroot.py), two to three minutes of
    mmdebstrap and dpkg from cold when nothing else runs, which wait on
    the disk more than they use a CPU.  A root this could not make is made again, and its error
    reported, by the stage that needs it."""
    from ..package import chroot, unsteal_deb
    t0 = time.monotonic()
    chroot.base_tarball(unsteal_deb.SUITE)
    if not quick:
        from . import testhostroot
        testhostroot.build_tarball()
    step(f"test: the Debian roots are ready ({time.monotonic() - t0:.0f} s, beside the builds)")


def _need_root():
    from ..common import LabError
    raise LabError("not root")


def kernel_selftests():
    """The kernel selftests stage.  Its module is imported here, inside the
    stage: a module that cannot be imported fails the stage (and the run),
    it does not drop it."""
    from . import kselftest
    return kselftest.run("patched")


def _series_stage(stack):
    return f"{stack.key} series: lint and apply in order"


CONFIG_MATRIX = "kernel config matrix: each configuration resolves as its fragment asks"


def _checks(lab):
    """The checks made beside the builds, in order: the kernel series' patch
    check (lint and apply in order), its checkpatch --strict and its config
    matrix resolved (the matrix builds are 'tools/lab check kernel
    --config-matrix'), the last that uses the kernel's work tree; then every
    other stack's patch check, and the packaging checks of each stack."""
    from ..build import kcheck
    from ..package import kernel_deb, libvirt_deb
    kernel = stacks.get("kernel")
    jobs = [(_series_stage(kernel), lambda: patchqueue.check(kernel.dir)),
            ("kernel series: checkpatch --strict (kernel-patches/checkpatch.accepted)",
             lambda: _one(kcheck.checkpatch())),
            (CONFIG_MATRIX, lambda: _one(kcheck.configure_matrix()))]
    jobs += [(_series_stage(s), lambda d=s.dir: patchqueue.check(d))
             for s in stacks.known() if s.key not in (lab.key, kernel.key)]
    for s in sorted(stacks.known(), key=lambda s: s.key):
        if s.package == "libvirt":
            jobs.append((f"{s.key} package: Debian source package with the series "
                         f"(dpkg-source, fuzz 0, changelog)",
                         lambda d=s.dir: _one(libvirt_deb.check_prepare(d))))
        elif s.package == "linux":
            jobs.append((f"{s.key} package: series on Debian's patched linux tree, flavour "
                         f"config", lambda d=s.dir: _one(kernel_deb.quick_check(d))))
    return jobs


def _builds(t, before_kernel=None):
    """The builds every tier but unit needs; before_kernel() runs before
    the kernel's.  Returns whether libvirt built."""
    from ..build import libvirt, kernel
    from ..lab import guest
    lab = stacks.lab_libvirt()
    built = t.stage(f"build libvirt{_which(lab)}", lambda: libvirt.build()) is not None
    if lab.default:
        # vcpu_cgroup_inert compares the default mode with stock libvirt
        t.stage("build stock libvirt (the base without the series)", libvirt.build_stock)
    if before_kernel:
        before_kernel()
    t.stage("build kernel", lambda: kernel.build(patched=True))
    t.stage("build guest initramfs", guest.build_initramfs)
    return built


def _which(lab):
    """The daemon's stack keeps the historical stage names when it is
    libvirt's default stack; another one is named."""
    return "" if lab.default else f" ({lab.key})"


def _lab_suite():
    from ..build import libvirt
    return libvirt.test_suite(syntax_check=True)


def _other_bases(quick):
    """The jobs that keep the other libvirt bases building and passing
    libvirt's own suite, which holds our qemuvcpucgrouptest (under a minute
    once built; their syntax-check only in a full run): each base's build,
    then its suite when it built."""
    from ..build import libvirt
    lab = stacks.lab_libvirt()
    jobs = []
    for other in stacks.of_package("libvirt"):
        if other.key == lab.key:
            continue
        build = f"build {other.key}"
        jobs += [(build, lambda s=other: libvirt.build(install=False, stack=s)),
                 (f"{other.key}: libvirt's own test suite" + ("" if quick else " and syntax-check"),
                  lambda s=other: libvirt.test_suite(syntax_check=not quick, stack=s), build)]
    return jobs


PACKAGE = "unsteal package: build with its tests, lintian, autopkgtests (Debian 13)"
IMAGE = "test host: Debian 13 image with our libvirt, our kernel"
BUILD_ROOT = "the test host's build root compiled"


def _build_root(built, quick):
    """The job that compiles our libvirt and unsteal in the test host
    image's build root, ahead of the image (none when there is no image).
    Not a stage: the image's stage compiles what it left undone, and counts
    its error."""
    if not built or quick:
        return []
    from . import testhost
    return [(BUILD_ROOT, testhost.test_build_root)]


def _image(bases):
    """The test host's image, once the build root's job ended in the thread
    bases (both use the build root)."""
    from . import testhost
    bases.wait_for(BUILD_ROOT)
    error = bases.outcomes.get(BUILD_ROOT)
    if isinstance(error, Exception):
        step(f"test: {BUILD_ROOT} beside the tests failed ({error}); the image compiles it")
    return testhost.test_build()


def _package_and_image(built, quick, bases):
    """The jobs made beside our function tests: unsteal's own Debian package
    (small enough to build in full: its tests, lintian clean, its
    autopkgtests in a fresh Debian 13 testbed), then the test host's image,
    which installs that package (none when libvirt did not build, or with
    --quick)."""
    from ..package import unsteal_deb
    jobs = [(PACKAGE, unsteal_deb.build_and_check)]
    if not built:
        step("test: no test host: libvirt did not build (its stage failed above)")
    elif not quick:
        jobs.append((IMAGE, lambda: _image(bases)))
    return jobs


def _package_and_hosts(t, made):
    """The package and the image as stages (made: _package_and_image()'s
    outcomes), then the test host's matrix on the image."""
    from . import testhost
    t.stage(PACKAGE, lambda: testhost.job_result(made[PACKAGE]))
    # The kernel selftests need no test host: without one they run alone.
    selftests = [("kernel selftests in QEMU (patched)", kernel_selftests)] \
        if patchqueue.read_series(stacks.get("kernel").dir) else []
    # The same libvirt integration tests on the hosts of the matrix: a
    # Debian 13 host booted under QEMU with cgroup v2 and systemd (with and
    # without machined), v2 without systemd, v1 under systemd and v1 with
    # cpu,cpuacct co-mounted (docs/testhost.md).
    if IMAGE not in made:
        return _alone(t, selftests)
    image = t.stage(IMAGE, lambda: testhost.job_result(made[IMAGE]))
    if image is None:
        return _alone(t, selftests)
    from . import scalehost
    # The scale benchmark's smoke run ('tools/lab bench scale' is the
    # benchmark): 4 CPUs in 2 nodes, the trace-based idle steal checked
    # against the kernel, every layout measured once.
    after = [("bench scale: smoke run on a 4-CPU, 2-node test host", scalehost.test_smoke)] \
        + selftests
    # Two rows at a time (testhost.lanes()), then the smoke run and the
    # selftests in the lane that ends first; each is then counted as a
    # stage of its own, the rows in the order they were started.
    outcomes = t.stage(f"test host matrix: {len(testhost.LONGEST_FIRST)} rows, then "
                       f"{len(after)} more guests",
                       lambda: testhost.test_rows(testhost.LONGEST_FIRST, then=after))
    if outcomes is None:
        return _alone(t, after)
    for v in testhost.LONGEST_FIRST:
        t.stage(f"test host {v}: libvirt integration tests "
                f"({', '.join(testhost.tests_in_host(v))})",
                lambda v=v: testhost.row_verdict(v, outcomes[v]))
    for name, _ in after:
        t.stage(name, lambda name=name: testhost.job_result(outcomes[name]))


def _alone(t, stages):
    """Stages that would have run in the matrix's lanes, one after another."""
    for name, fn in stages:
        t.stage(name, fn)
