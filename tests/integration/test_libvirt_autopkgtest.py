# SPDX-License-Identifier: GPL-2.0-or-later
"""The autopkgtests of our libvirt source package that need a whole machine,
run by autopkgtest(1) on the test host booted from our .debs.

'tools/lab package libvirt' runs the source package's autopkgtests in an
autopkgtest-virt-unshare testbed, which offers neither container nor machine
isolation: the tests that need one are skipped there.  The test host built
with 'tools/lab testhost build --libvirt packages' is a throwaway machine
with our packages installed by apt, systemd as PID 1 and the machine's own
cgroups: this test runs autopkgtest there with its null runner (the testbed
is the machine itself, which null does not declare as isolated: the tests'
isolation-machine is ignored, --ignore-restrictions, because this machine
is a VM thrown away after the boot) on the
source package the .debs were built from (-B: the installed packages, no
build), for

  unsteal-schedinfo    (ours) virsh schedinfo of a per-host domain, its
                       placement and live tuning on v1 or v2;
  unsteal-qemu-conf    (ours) qemu.conf's vcpu_cgroup parsed by the daemon;
  smoke-lxc            (Debian's) a container of the LXC driver, across a
                       daemon restart.

The image masks the packages' libvirt units (the other tests start their own
daemons, each with a qemu.conf of its own); they are unmasked for the run
and masked again afterwards, and the package's qemu.conf, which the image
keeps beside the source package, is put back first.  Each
test is one TAP result; its log is printed when it fails.  Elsewhere (a work
tree's libvirt, no systemd) the test skips.
"""

import glob
import os
import shutil
import subprocess
import tempfile

import labtest
from lablib.package.autopkgtest import parse_summary

SOURCE_DIR = "/unsteal/_build/packages"
TESTS = ["unsteal-schedinfo", "unsteal-qemu-conf", "smoke-lxc"]


def systemctl(*args):
    return subprocess.run(["systemctl", "--no-pager"] + list(args), capture_output=True,
                          text=True, timeout=300)


def masked_units():
    """The libvirt units the image masked (links to /dev/null)."""
    return sorted(p for p in glob.glob("/etc/systemd/system/*")
                  if os.path.basename(p).startswith(("libvirt", "virt"))
                  and os.path.islink(p) and os.readlink(p) == "/dev/null")


def main(t):
    dsc = glob.glob(os.path.join(SOURCE_DIR, "libvirt_*.dsc"))
    t.ok(len(dsc) == 1, "the image has the source package of its .debs", dsc)
    if len(dsc) != 1:
        return
    # The lab's tests write /etc/libvirt/qemu.conf of their own; the
    # autopkgtests start from the package's, which the image kept.
    shutil.copy2(os.path.join(SOURCE_DIR, "qemu.conf"), "/etc/libvirt/qemu.conf")
    units = masked_units()
    t.ok(any("libvirtd" in u or "virtqemud" in u for u in units),
         "the image masked the packages' daemon units", units)
    for u in units:
        os.unlink(u)
    systemctl("daemon-reload")
    out = tempfile.mkdtemp(prefix="libvirt-autopkgtest-")
    summary = os.path.join(out, "summary")
    argv = (["autopkgtest", "-B", "--output-dir", os.path.join(out, "artifacts"),
             "--summary-file", summary, dsc[0]]
            + [a for name in TESTS for a in ("--test-name", name)]
            + ["--ignore-restrictions=isolation-machine", "--", "null"])
    print(f"# {' '.join(argv)}", flush=True)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
    finally:
        systemctl("stop", "libvirtd.service", "virtqemud.service")
        for u in units:
            os.symlink("/dev/null", u)
        systemctl("daemon-reload")
        for u in units:
            systemctl("stop", os.path.basename(u))
    text = open(summary).read() if os.path.exists(summary) else ""
    results = {name: (result, detail) for name, result, detail in parse_summary(text)}
    for name in TESTS:
        result, detail = results.get(name, ("missing", ""))
        # autopkgtest keeps a test's output as NAME-stdout and NAME-stderr
        # in its output directory (when there is any), the whole run in log.
        files = [os.path.join(out, "artifacts", f"{name}-{k}") for k in ("stdout", "stderr")]
        shown = "".join(open(f, errors="replace").read()[-2500:] for f in files
                        if os.path.exists(f))
        if not shown and os.path.exists(os.path.join(out, "artifacts", "log")):
            shown = open(os.path.join(out, "artifacts", "log"), errors="replace").read()[-3000:]
        t.ok(result == "PASS", f"autopkgtest {name}: {result} {detail}".strip(),
             shown or p.stdout[-3000:] + p.stderr[-1500:])
    t.ok(p.returncode == 0, f"autopkgtest exited {p.returncode}", p.stderr[-1500:])


if (not labtest.CONFIG.testhost or labtest.CONFIG.libvirt_prefix != "/"
        or not os.path.exists("/run/systemd/system")):
    labtest.skip_all("needs the test host booted with systemd from our libvirt packages "
                     "(tools/lab testhost build --libvirt packages)")
labtest.run(main, lab=False)
