# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab test: every test the project has, ending with 'N passed, N failed'.

Stages, in order: setup; the patch checks of every stack (every patch lints
clean and applies in order); the packaging checks (each libvirt stack's
Debian source package assembles with the series on Debian's own patches; the
kernel series applies on Debian's patched linux tree and the flavour's config
has what it needs; the full package builds are 'tools/lab package', not
tests); the builds; the kernel series' checkpatch --strict and its config
matrix, resolved (built by 'tools/lab check kernel --config-matrix');
libvirt's own test suite and syntax-check on the patched
tree; every other libvirt base (libvirt-9.0, the Debian 12 port): its build
and libvirt's own suite, which holds our qemuvcpucgrouptest; our meson tests
(unit tests of src/ and the integration tests that drive real guests through
the lab daemon); unsteal's own Debian package, built and installed; the
libvirt integration tests again inside the test host,
on each row of the host matrix (tools/lablib/testing/testhost.py), and the
scale benchmark's smoke run in it (scalehost.py); the kernel
selftests in QEMU once the kernel series has patches.

UNSTEAL_LIBVIRT_STACK=libvirt-9.0 runs the daemon and integration tests
against the Debian 12 port instead (the 11.3.0 stack then gets the short
stage).
"""

import os
import traceback

from ..common import LabError, step
from ..stack import sources, stack, stacks


class Tally:
    """Counts the stages' checks.  A stage's function returns (passed,
    failed) counts, or (passed, failed, why) with the lines that say why
    it failed, or anything else for one check; a LabError fails it with
    its message as the why."""

    # Of each failed stage, at most this many lines of why in the summary
    WHY_LINES = 8

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failures = []
        self.why = []

    def _fail(self, name, why, count=None):
        """A failed stage: count failed checks of its (passed, failed)
        counts, or None for a stage that stopped (one check)."""
        self.failed += count or 1
        self.failures.append(name if count is None else f"{name} ({count} failed)")
        self.why += [f"{name}: {w}" for w in why[:self.WHY_LINES]]
        if len(why) > self.WHY_LINES:
            self.why.append(f"{name}: ... {len(why) - self.WHY_LINES} more above")

    def stage(self, name, fn):
        step(f"test: {name}")
        try:
            res = fn()
        except LabError as e:
            print(f"lab: FAIL: {name}: {e}", flush=True)
            self._fail(name, [str(e)])
            return None
        except Exception as e:
            traceback.print_exc()
            self._fail(name, [f"{type(e).__name__}: {e} (traceback above)"])
            return None
        if isinstance(res, tuple):
            ok, bad = res[:2]
            self.passed += ok
            if bad:
                self._fail(name, list(res[2]) if len(res) > 2 else [], bad)
        else:
            self.passed += 1
        return res

    def summary(self):
        """The closing lines: the failed stages and why, then the counts."""
        if self.failures:
            print("lab: failed stages: " + "; ".join(self.failures))
        for line in self.why:
            print(f"lab:   {line}")
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed else 0


def _one(result):
    """A stage that is one check, whatever its function returns (a tuple
    return value means (passed, failed) counts to Tally.stage)."""
    return True


def run_all(quick=False):
    t = Tally()
    if os.geteuid() == 0:
        t.stage("setup (deb-src entries, packages, pinned sources)", sources.setup)
    else:
        print("lab: not root: skipping setup, the lab daemon and integration tests need root")
    for s in stacks.known():
        t.stage(f"{s.key} series: lint and apply in order",
                lambda d=s.dir: stack.check(d))
    from ..package import package, kpackage
    for s in sorted(stacks.known(), key=lambda s: s.key):
        if s.package == "libvirt":
            t.stage(f"{s.key} package: Debian source package with the series (dpkg-source, "
                    f"fuzz 0, changelog)", lambda d=s.dir: _one(package.check_prepare(d)))
        elif s.package == "linux":
            t.stage(f"{s.key} package: series on Debian's patched linux tree, flavour config",
                    lambda d=s.dir: _one(kpackage.quick_check(d)))
    from ..build import libvirt, kernel, ownsrc
    from ..lab import guest
    lab = stacks.lab_libvirt()
    # The daemon's stack keeps the historical stage names when it is libvirt's
    # default stack; another one is named.
    which = "" if lab.default else f" ({lab.key})"
    built = t.stage(f"build libvirt{which}", lambda: libvirt.build()) is not None
    t.stage("build kernel", lambda: kernel.build(patched=True))
    # The kernel series' checkpatch --strict, and its config matrix resolved
    # (the matrix builds are 'tools/lab check kernel --config-matrix').
    from ..build import kcheck
    t.stage("kernel series: checkpatch --strict (kernel-patches/checkpatch.accepted)",
            lambda: _one(kcheck.checkpatch()))
    t.stage("kernel config matrix: each configuration resolves as its fragment asks",
            lambda: _one(kcheck.configure_matrix()))
    t.stage("build guest initramfs", guest.build_initramfs)
    if built and not quick:
        t.stage(f"libvirt's own test suite and syntax-check{which}",
                lambda: libvirt.test_suite(syntax_check=True))
    # The other libvirt bases: kept building and passing libvirt's own unit
    # suite (under a minute once built); their syntax-check only in a full run.
    for other in stacks.of_package("libvirt"):
        if other.key == lab.key:
            continue
        if t.stage(f"build {other.key}",
                   lambda s=other: libvirt.build(install=False, stack=s)) is None:
            continue
        t.stage(f"{other.key}: libvirt's own test suite" + ("" if quick else " and syntax-check"),
                lambda s=other: libvirt.test_suite(syntax_check=not quick, stack=s))
    t.stage("our tests (meson test)", ownsrc.test)
    # unsteal's own Debian package: small enough to build in full (its tests,
    # lintian clean, installed with apt in a fresh Debian 13 root).
    if os.geteuid() == 0:
        from ..package import upackage
        t.stage("unsteal package: build with its tests, lintian, install check (Debian 13)",
                upackage.build_and_check)
    # The same libvirt integration tests on the hosts of the matrix: a
    # Debian 13 host booted under QEMU with cgroup v2 and systemd (with and
    # without machined), v2 without systemd, v1 under systemd and v1 with
    # cpu,cpuacct co-mounted (docs/testhost.md).
    if built and os.geteuid() == 0 and not quick:
        from . import testhost
        image = t.stage("test host: Debian 13 image with our libvirt, our kernel",
                        testhost.test_build)
        if image is not None:
            # Two rows at a time (testhost.lanes()); each is then counted
            # as a stage of its own, in the order they were started.
            outcomes = t.stage(f"test host matrix: {len(testhost.LONGEST_FIRST)} rows",
                               lambda: testhost.test_rows(testhost.LONGEST_FIRST))
            for v in testhost.LONGEST_FIRST if outcomes is not None else []:
                t.stage(f"test host {v}: libvirt integration tests "
                        f"({', '.join(testhost.tests_in_host(v))})",
                        lambda v=v: testhost.row_verdict(v, outcomes[v]))
            # The scale benchmark's smoke run ('tools/lab bench scale' is
            # the benchmark): 4 CPUs in 2 nodes, the trace-based idle steal
            # checked against the kernel, every layout measured once.
            from . import scalehost
            t.stage("bench scale: smoke run on a 4-CPU, 2-node test host",
                    scalehost.test_smoke)
    if stack.read_series(stacks.get("kernel").dir):
        try:
            from . import kselftest
        except ImportError:
            kselftest = None
        if kselftest:
            t.stage("kernel selftests in QEMU (patched)", lambda: kselftest.run("patched"))
    return t.summary()
