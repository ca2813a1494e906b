# SPDX-License-Identifier: GPL-2.0-or-later
"""The autopkgtests of unsteal's package and of the libvirt series, and how
the lab reads their results.

No root, no testbed: debian/tests/control names tests that exist as
executable scripts, each with the restrictions its script needs and
passing shellcheck as the shell its first line names; a control file that
names a missing test, or a script with a shell error, is caught by the
same checks.  autopkgtest.parse_summary() reads a summary file of every
result kind and skips lines that are not results.  That the tests pass
against the built package is 'tools/lab package unsteal' (a stage of
tools/lab test).
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-autopkgtest-test-")
ok = tap.ok

from lablib.package import autopkgtest  # noqa: E402

TESTS_DIR = os.path.join(tap.ROOT, "debian", "tests")
LIBVIRT_TESTS_DIR = os.path.join(tap.ROOT, "libvirt-patches", "autopkgtest")


def stanzas(text):
    """deb822 stanzas as dicts (continuation lines joined)."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, val = line.split(":", 1)
                fields[key.strip()] = val.strip()
        out.append(fields)
    return out


def problems(tests_dir):
    """What is wrong with a debian/tests directory, as a list of strings."""
    found = []
    for st in stanzas(open(os.path.join(tests_dir, "control")).read()):
        for name in st.get("Tests", "").replace(",", " ").split():
            path = os.path.join(tests_dir, name)
            if not os.access(path, os.X_OK):
                found.append(f"{name}: no executable script")
                continue
            first = open(path).readline()
            shell = "bash" if "bash" in first else "sh"
            p = subprocess.run(["shellcheck", "-s", shell, "-x", path],
                               capture_output=True, text=True)
            if p.returncode:
                found.append(f"{name}: shellcheck: {p.stdout.strip().splitlines()[:3]}")
    return found


if not shutil.which("shellcheck"):
    ok(False, "shellcheck is installed", "tools/lab setup installs it")
else:
    ctl = stanzas(open(os.path.join(TESTS_DIR, "control")).read())
    names = [n for st in ctl for n in st.get("Tests", "").split()]
    ok(names == ["cli", "service", "exporter", "purge"],
       "debian/tests/control: cli, service, exporter, purge", names)
    restr = {n: st.get("Restrictions", "") for st in ctl for n in st.get("Tests", "").split()}
    ok("breaks-testbed" in restr.get("purge", "") and "needs-root" in restr.get("purge", ""),
       "purge needs root and breaks the testbed", restr.get("purge"))
    ok("systemd" in [d.strip() for st in ctl if "service" in st.get("Tests", "")
                     for d in st.get("Depends", "").split(",")],
       "service depends on systemd (systemd-analyze)")
    found = problems(TESTS_DIR)
    ok(not found, "every test is an executable script that passes shellcheck", found)

    # The same checks on broken copies.
    broken = os.path.join(WORK, "tests")
    shutil.copytree(TESTS_DIR, broken)
    with open(os.path.join(broken, "control"), "a") as fh:
        fh.write("\nTests: missing\nDepends: @\n")
    with open(os.path.join(broken, "cli"), "a") as fh:
        fh.write('echo $UNQUOTED_VAR_WITH_TYPO"\n')
    found = problems(broken)
    ok(any(f.startswith("missing:") for f in found), "a test without a script is found", found)
    ok(any(f.startswith("cli: shellcheck") for f in found),
       "a script with a shell error is found", found)

    # The libvirt series' tests, appended to Debian's libvirt packaging.
    ctl = stanzas(open(os.path.join(LIBVIRT_TESTS_DIR, "control")).read())
    restr = {n: st.get("Restrictions", "") for st in ctl for n in st.get("Tests", "").split()}
    ok(sorted(restr) == ["unsteal-qemu-conf", "unsteal-schedinfo"],
       "libvirt-patches/autopkgtest/control: unsteal-qemu-conf, unsteal-schedinfo",
       sorted(restr))
    ok("isolation-machine" in restr.get("unsteal-schedinfo", ""),
       "unsteal-schedinfo (systemd, the machine's cgroups) needs machine-level isolation",
       restr.get("unsteal-schedinfo"))
    found = problems(LIBVIRT_TESTS_DIR)
    ok(not found, "the libvirt series' tests are executable scripts that pass shellcheck",
       found)

summary = """\
cli                  PASS
service              FAIL non-zero exit status 1
exporter             SKIP Test needs root on testbed which is not available
purge                FLAKY non-zero exit status 1
blame: unsteal_0.1.0.dsc
"""
ok(autopkgtest.parse_summary(summary) == [
    ("cli", "PASS", ""), ("service", "FAIL", "non-zero exit status 1"),
    ("exporter", "SKIP", "Test needs root on testbed which is not available"),
    ("purge", "FLAKY", "non-zero exit status 1")],
   "parse_summary: every result kind with its detail; other lines skipped",
   autopkgtest.parse_summary(summary))

twice = """\
smoke-lxc            SKIP Test restriction "isolation-machine" requires testbed capability \
"isolation-machine"
smoke-lxc            SKIP Test restriction "isolation-machine" requires testbed capability \
"isolation-machine"
smoke                PASS
"""
ok([n for n, _, _ in autopkgtest.parse_summary(twice)] == ["smoke-lxc", "smoke"],
   "parse_summary: a skip autopkgtest writes twice is one result",
   autopkgtest.parse_summary(twice))

lacking = """\
smoke                PASS
smoke-lxc            SKIP Test restriction "isolation-machine" requires testbed capability \
"isolation-machine"
smoke-qemu-session   SKIP Test restriction "isolation-container" requires testbed capability \
"isolation-container" and/or "isolation-machine"
build-test           SKIP Test needs root on testbed which is not available
unsteal-qemu-conf    FAIL non-zero exit status 1
"""
ok(autopkgtest.not_passed(autopkgtest.parse_summary(lacking)) == [
    ("build-test", "SKIP", "Test needs root on testbed which is not available"),
    ("unsteal-qemu-conf", "FAIL", "non-zero exit status 1")],
   "not_passed: a skip for isolation the testbed lacks passes, any other skip or failure not",
   autopkgtest.not_passed(autopkgtest.parse_summary(lacking)))

# Debian's KVM test rewritten for the unshare testbed.  The control below
# has the shape of Debian 13's libvirt debian/tests/control: the KVM test in
# a stanza of its own between two others.
debian_control = """\
Tests:
 smoke,
Depends:
 libvirt-clients,
Restrictions:
 allow-stderr,

Tests:
 smoke-qemu-session,
Depends:
 libvirt-clients,
 libvirt-daemon,
 qemu-kvm,
Restrictions:
 allow-stderr,
 isolation-container,
 skippable,

Tests: smoke-lxc
Depends: libvirt-daemon-driver-lxc
Restrictions: isolation-machine
"""
kvm = stanzas(autopkgtest.kvm_control(debian_control))
ok(len(kvm) == 1 and "Tests" not in kvm[0]
   and kvm[0].get("Test-Command") == "tini -s -- debian/tests/smoke-qemu-session"
   and kvm[0].get("Features") == "test-name=smoke-qemu-session",
   "kvm_control: one stanza, Debian's script run under the subreaper tini, "
   "named as Debian names it", kvm)
deps = [d.strip() for d in kvm[0].get("Depends", "").split(",") if d.strip()] if kvm else []
ok(deps == ["libvirt-clients", "libvirt-daemon", "qemu-kvm",
            "libvirt-daemon-driver-qemu", "tini"],
   "kvm_control: Debian's Depends, then the qemu driver and tini", deps)
restr = [r.strip() for r in kvm[0].get("Restrictions", "").split(",") if r.strip()] \
    if kvm else []
ok(restr == ["allow-stderr", "isolation-container", "skippable"],
   "kvm_control: Debian's Restrictions unchanged", restr)
one_line = stanzas(autopkgtest.kvm_control(debian_control, test="smoke-lxc"))
ok([d.strip() for d in one_line[0].get("Depends", "").split(",") if d.strip()]
   == ["libvirt-daemon-driver-lxc", "libvirt-daemon-driver-qemu", "tini"],
   "kvm_control: a one-line Depends gains the same two", one_line)
try:
    autopkgtest.kvm_control(debian_control, test="smoke-missing")
    ok(False, "kvm_control: a test the control lacks is an error")
except autopkgtest.LabError as e:
    ok("smoke-missing" in str(e), "kvm_control: a test the control lacks is an error", e)

if shutil.which("autopkgtest"):
    # autopkgtest itself reads the rewritten stanza beside Debian's source
    src = os.path.join(WORK, "src")
    os.makedirs(os.path.join(src, "debian", "tests"))
    with open(os.path.join(src, "debian", "control"), "w") as fh:
        fh.write("Source: libvirt\n\nPackage: libvirt-daemon\nArchitecture: any\n")
    with open(os.path.join(src, "debian", "changelog"), "w") as fh:
        fh.write("libvirt (1.0-1) unstable; urgency=medium\n\n  * Test.\n\n"
                 " -- Unsteal Developers <dev@unsteal.invalid>  Mon, 30 Nov 2026 00:00:00 +0000\n")
    ctl = os.path.join(WORK, "kvm-control")
    with open(ctl, "w") as fh:
        fh.write(autopkgtest.kvm_control(debian_control))
    p = subprocess.run(["autopkgtest", "--validate", "--override-control", ctl, "-B", src + "/",
                        "--", "null"], capture_output=True, text=True)
    ok(p.returncode == 0, "autopkgtest --validate accepts the rewritten stanza",
       (p.stdout + p.stderr)[-600:])
else:
    ok(False, "autopkgtest is installed", "tools/lab setup installs it")

# What the KVM test needs on this host, checked before a build starts.
kernel = os.path.join(WORK, "vmlinuz")
open(kernel, "w").close()
ok(autopkgtest.check_kvm_guest(kernel, kernel, dev="/dev/null") == os.stat("/dev/null").st_rdev,
   "check_kvm_guest: a character device and two files give the device's number")
for args, want in (((kernel, kernel, kernel), "no " + kernel),
                   ((kernel, kernel, os.path.join(WORK, "no-kvm")), "no "),
                   ((kernel, os.path.join(WORK, "no-initrd"), "/dev/null"), "initrd"),
                   ((os.path.join(WORK, "no-kernel"), kernel, "/dev/null"), "kernel")):
    try:
        autopkgtest.check_kvm_guest(args[0], args[1], dev=args[2])
        ok(False, f"check_kvm_guest: {want!r} is an error", args)
    except autopkgtest.LabError as e:
        ok(want in str(e), f"check_kvm_guest: {want!r} is an error", e)

sys.exit(tap.end())
