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

Debian's smoke-qemu-session boots a type='kvm' domain of qemu:///session.
run_kvm_test() runs it in such a testbed given this host's KVM and a kernel
to boot (kvm_control() says what differs from Debian's stanza, and why).
"""

import os
import re
import shutil
import stat
import tarfile
import tempfile

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


def _autopkgtest(options, dsc, debs, suite, outdir, log, binds=()):
    """Run autopkgtest with options on dsc and debs in a testbed of suite
    (binds: (outside, inside) directories); its artifacts go to outdir, its
    output to log.  Returns (exit status, results)."""
    if not shutil.which("autopkgtest"):
        raise LabError("autopkgtest is not installed; run tools/lab setup")
    shutil.rmtree(outdir, ignore_errors=True)
    summary = outdir + ".summary"
    if os.path.exists(summary):
        os.unlink(summary)
    argv = (["autopkgtest", "--output-dir", outdir, "--summary-file", summary] + list(options)
            + [dsc] + list(debs)
            + ["--", "unshare", "--release", suite, "--arch", chroot.host_arch(),
               "--tarball", chroot.base_tarball(suite)])
    for outside, inside in binds:
        argv += ["--bind", outside, inside]
    p = run(argv, log=log, quiet=True, check=False)
    results = parse_summary(open(summary).read()) if os.path.exists(summary) else []
    for name, result, detail in results:
        step(f"autopkgtest: {name}: {result}{' ' + detail if detail else ''}")
    return p.returncode, results


def _failed(dsc, status, results, log):
    with open(log, errors="replace") as fh:
        tail = fh.read().splitlines()[-30:]
    return LabError(f"autopkgtest of {os.path.basename(dsc)} exited {status} with "
                    f"{len(results)} result(s), not all PASS; last lines of "
                    f"{os.path.relpath(log, ROOT)}:\n" + "\n".join(tail))


def run_tests(dsc, debs, suite, outdir, log):
    """Run the tests of dsc against debs in a testbed of suite; the
    artifacts go to outdir, autopkgtest's output to log.  Returns the
    results; fails unless every test passed, but for the tests that need an
    isolation the testbed does not offer (not_passed())."""
    step(f"autopkgtest: {os.path.basename(dsc)} against {len(debs)} .deb(s) in a {suite} "
         f"testbed (autopkgtest-virt-unshare); log: {os.path.relpath(log, ROOT)}")
    status, results = _autopkgtest([], dsc, debs, suite, outdir, log)
    # autopkgtest exits 2 when a test was skipped, 0 when all passed.
    if status not in (0, 2) or not results or not_passed(results):
        raise _failed(dsc, status, results, log)
    return results


# Debian's test of a type='kvm' domain; where the testbed finds what it needs
KVM_TEST = "smoke-qemu-session"
KVM_MOUNT = "/unsteal-kvm"
# Added to the test's Depends (kvm_control())
KVM_EXTRA_DEPENDS = ["libvirt-daemon-driver-qemu", "tini"]


def _stanzas(text):
    """The stanzas of a deb822 file: lists of (field, value), a value's
    continuation lines kept."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields = []
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and fields:
                fields[-1] = (fields[-1][0], fields[-1][1] + "\n" + line)
            elif ":" in line and not line.startswith("#"):
                key, val = line.split(":", 1)
                fields.append((key.strip(), val.strip()))
        out.append(fields)
    return out


def kvm_control(control, test=KVM_TEST):
    """The stanza of test from a debian/tests/control (its text), to run in
    an autopkgtest-virt-unshare testbed.  Two changes, both for the testbed:
    - Depends gains libvirt-daemon-driver-qemu: the test needs the qemu
      driver, which Debian's stanza gets only as a Recommends of
      libvirt-daemon, and autopkgtest installs no Recommends;
    - the script runs under 'tini -s', a subreaper: each command of the
      testbed is PID 1 of a PID namespace of its own ('su', which reaps
      nothing), so the QEMU processes libvirt starts and kills would stay
      zombies, and libvirt waits for each in vain (about 40 s per emulator
      it probes; 'virsh destroy' fails).
    The script, and every other field, are Debian's."""
    for fields in _stanzas(control):
        names = dict(fields).get("Tests", "").replace(",", " ").split()
        if test not in names:
            continue
        out = [f"Test-Command: tini -s -- debian/tests/{test}",
               f"Features: test-name={test}"]
        for key, val in fields:
            if key == "Tests":
                continue
            if key == "Features":
                out[1] += ", " + val
                continue
            if key == "Depends":
                val = ",\n ".join([val.rstrip().rstrip(",")] + KVM_EXTRA_DEPENDS) + ","
            out.append(f"{key}: {val}" if val[:1] != "\n" else f"{key}:{val}")
        return "\n".join(out) + "\n"
    raise LabError(f"debian/tests/control has no test {test}")


def source_control(debian_tarball):
    """debian/tests/control of a source package's debian tarball, as text."""
    with tarfile.open(debian_tarball) as tar:
        return tar.extractfile("debian/tests/control").read().decode()


def check_kvm_guest(kernel, initrd, dev="/dev/kvm"):
    """The device number of dev if it is a character device and kernel and
    initrd are files; a LabError saying what is missing otherwise."""
    try:
        st = os.stat(dev)
    except OSError:
        st = None
    if st is None or not stat.S_ISCHR(st.st_mode):
        raise LabError(f"{KVM_TEST} boots a type='kvm' domain: this host has no {dev}")
    for what, path in (("kernel", kernel), ("initrd", initrd)):
        if not os.path.isfile(path):
            raise LabError(f"{KVM_TEST}: the {what} {path} is not a file")
    return st.st_rdev


def run_kvm_test(dsc, debs, suite, outdir, log, kernel, initrd, control):
    """Run Debian's KVM_TEST of dsc (control: its debian/tests/control)
    against debs in a testbed of suite that has this host's KVM and the
    given kernel and initrd as /vmlinuz and /initrd.img, which the test's
    domain boots.  The testbed's root is root's subordinate uid, which
    cannot open /dev/kvm: it gets a node of the same device, mode 0666 (as
    systemd's udev rules make /dev/kvm), in a directory bound into it and
    removed afterwards.  Fails unless the test passed: the testbed offers
    everything it asks for, so a skip is a failure here."""
    rdev = check_kvm_guest(kernel, initrd)
    step(f"autopkgtest: {KVM_TEST} of {os.path.basename(dsc)} in a {suite} testbed with this "
         f"host's /dev/kvm, booting {kernel}; log: {os.path.relpath(log, ROOT)}")
    tmp = tempfile.mkdtemp(prefix="unsteal-kvm-")
    try:
        os.chmod(tmp, 0o755)
        node = os.path.join(tmp, "kvm")
        os.mknod(node, stat.S_IFCHR | 0o666, rdev)
        os.chmod(node, 0o666)
        for src, name in ((kernel, "vmlinuz"), (initrd, "initrd.img")):
            shutil.copyfile(src, os.path.join(tmp, name))
            os.chmod(os.path.join(tmp, name), 0o644)
        ctl = os.path.join(tmp, "control")
        with open(ctl, "w") as fh:
            fh.write(kvm_control(control))
        links = " && ".join(f"ln -sf {KVM_MOUNT}/{name} {path}" for name, path in
                            (("kvm", "/dev/kvm"), ("vmlinuz", "/vmlinuz"),
                             ("initrd.img", "/initrd.img")))
        options = ["--override-control", ctl, "--test-name", KVM_TEST,
                   "--ignore-restrictions", "isolation-container", "--setup-commands", links]
        status, results = _autopkgtest(options, dsc, debs, suite, outdir, log,
                                       binds=[(tmp, KVM_MOUNT)])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if status != 0 or [(n, r) for n, r, _ in results] != [(KVM_TEST, "PASS")]:
        raise _failed(dsc, status, results, log)
    return results
