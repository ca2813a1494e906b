# SPDX-License-Identifier: GPL-2.0-or-later
"""The autopkgtests of a source package, run against the .debs we built.

autopkgtest(1) reads debian/tests/control from the source package (.dsc) and
runs its tests with the given .debs installed, in a testbed that
autopkgtest-virt-unshare(1) unpacks from the suite's cached root
(chroot.base_tarball(): the same root the package builds start from) for
the tests and again for each test that breaks it.  virt-unshare maps the
testbed's users to root's subordinate ids: /etc/subuid and /etc/subgid
entries for root and newuidmap (package uidmap), which tools/lab setup
provides (sources.ensure_subids()).
"""

import os
import re
import shutil

from ..common import LabError, ROOT, run, step
from . import chroot

# autopkgtest's --summary-file: one line per test, 'NAME RESULT [DETAIL]'
SUMMARY_RE = re.compile(r"^(\S+)\s+(PASS|FAIL|SKIP|FLAKY|NEUTRAL|BAD)\b *(.*)$")
# autopkgtest's reason for a test whose isolation-container or
# isolation-machine restriction the testbed cannot meet (virt-unshare
# offers neither): such a test is not run here, and is run in a testbed
# that offers it (docs/packaging.md).
ISOLATION_SKIP_RE = re.compile(r'^Test restriction "isolation-(container|machine)" requires '
                               r'testbed capability "isolation-')


def parse_summary(text):
    """[(test, result, detail)] of an autopkgtest summary file, each once:
    autopkgtest 5.28 writes a test skipped for its restrictions twice."""
    out = []
    for m in map(SUMMARY_RE.match, text.splitlines()):
        if m and m.groups() not in out:
            out.append(m.groups())
    return out


def not_passed(results):
    """The results that fail a run: every result but PASS, except a SKIP
    for an isolation the testbed does not offer."""
    return [(n, r, d) for n, r, d in results
            if r != "PASS" and not (r == "SKIP" and ISOLATION_SKIP_RE.match(d))]


def run_tests(dsc, debs, suite, outdir, log):
    """Run the tests of dsc against debs in a testbed of suite; the
    artifacts go to outdir, autopkgtest's output to log.  Returns the
    results; fails unless every test passed, but for the tests that need an
    isolation the testbed does not offer (not_passed())."""
    if not shutil.which("autopkgtest"):
        raise LabError("autopkgtest is not installed; run tools/lab setup")
    shutil.rmtree(outdir, ignore_errors=True)
    summary = outdir + ".summary"
    if os.path.exists(summary):
        os.unlink(summary)
    tarball = chroot.base_tarball(suite)
    step(f"autopkgtest: {os.path.basename(dsc)} against {len(debs)} .deb(s) in a {suite} "
         f"testbed (autopkgtest-virt-unshare); log: {os.path.relpath(log, ROOT)}")
    argv = (["autopkgtest", "--output-dir", outdir, "--summary-file", summary, dsc]
            + list(debs)
            + ["--", "unshare", "--release", suite, "--arch", chroot.host_arch(),
               "--tarball", tarball])
    p = run(argv, log=log, quiet=True, check=False)
    results = parse_summary(open(summary).read()) if os.path.exists(summary) else []
    for name, result, detail in results:
        step(f"autopkgtest: {name}: {result}{' ' + detail if detail else ''}")
    # autopkgtest exits 2 when a test was skipped, 0 when all passed.
    if p.returncode not in (0, 2) or not results or not_passed(results):
        with open(log, errors="replace") as fh:
            tail = fh.read().splitlines()[-30:]
        raise LabError(f"autopkgtest of {os.path.basename(dsc)} exited {p.returncode} with "
                       f"{len(results)} result(s), not all PASS; last lines of "
                       f"{os.path.relpath(log, ROOT)}:\n" + "\n".join(tail))
    return results
