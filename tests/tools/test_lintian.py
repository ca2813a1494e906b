# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab package's lintian verdict (tools/lablib/package/lintian.py), on
small lintian logs written here, for the three builds: the kernel's
(kernel_deb.lint() with a stand-in root; test-patches' long image package
name explained, nothing else), libvirt's (Debian's own warning explained)
and unsteal's (nothing explained).  No root, no lintian.
"""

import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-lintian-test-")
ok = tap.ok

from lablib.common import LabError  # noqa: E402
from lablib.package import kernel_deb, libvirt_deb, lintian  # noqa: E402

IMAGE = "linux-image-6.12+unreleased-cloud-amd64-unsigned"
LONG = (f"W: {IMAGE}: package-has-long-file-name "
        f"{IMAGE}_6.12.107-1a~test_amd64.deb\n")
INFO = ("N:\nN:   An explanation of the tag, as --info prints it.\nN:\n"
        "I: linux-headers-6.12+unreleased-cloud-amd64: hardening-no-bindnow [usr/bin/x]\n"
        "I: linux-kbuild-6.12+unreleased: bash-term-in-posix-shell [usr/bin/y]\n")


class Root:
    """A stand-in for chroot.Root: run() writes a lintian log of its own."""

    def __init__(self, text, rc=0):
        self.text, self.rc, self.calls = text, rc, []

    def run(self, script, user=None, log=None, check=True, binds=(), **kw):
        self.calls.append({"script": script, "user": user, "binds": list(binds),
                           "check": check})
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "w") as fh:
            fh.write(self.text)
        return types.SimpleNamespace(returncode=self.rc)


def kernel_out(name="linux_6.12.107-1a~test_cloud-amd64"):
    out = os.path.join(WORK, "packages", name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "linux_6.12.107-1a~test_amd64.changes"), "w") as fh:
        fh.write("Source: linux\n")
    return out


def lint(path, root):
    """kernel_deb.lint()'s (counts, explained tags), or (None, its error)."""
    try:
        return kernel_deb.lint(path, root=root)
    except LabError as e:
        return None, str(e)


def write(name, text):
    path = os.path.join(WORK, name)
    with open(path, "w") as fh:
        fh.write(text)
    return path


# 1. The kernel: test-patches' long image package name is explained, for
# the kernel's build only, with its reason.
why = kernel_deb.LINTIAN_TEST_PATCHES.get("package-has-long-file-name", "")
ok(all(w in why for w in ("test-patches", "6.12+unreleased", "a~test")),
   "the kernel explains package-has-long-file-name by test-patches' version", why)
ok("package-has-long-file-name" not in libvirt_deb.LINTIAN_DEBIANS_OWN,
   "libvirt's builds do not explain it (their overrides name their packages)")

# 2. lint() on a build's directory: lintian in the root, as the build user,
# on the .changes in the directory bound as /lint; the log beside the
# build's others and as lintian.txt; 0 unexplained, the explained tag named.
out = kernel_out()
root = Root(LONG + INFO)
tags, found = lint(out, root=root)
ok(tags == {"E": 0, "W": 1, "I": 2} and found == ["package-has-long-file-name"],
   "the kernel's sample log passes: 0 errors, the one warning explained", (tags, found))
call = root.calls[-1]
ok(call["user"] == "builder" and call["binds"] == [(out, "/lint")]
   and call["script"].startswith("cd /lint && lintian --info --display-level '>=info' "
                                 "--fail-on none ")
   and call["script"].endswith(" 'linux_6.12.107-1a~test_amd64.changes'"),
   "lintian runs as libvirt's and unsteal's builds run it, on the .changes", call)
log = os.path.join(os.environ["UNSTEAL_BUILD"], "logs",
                   "package-linux-6.12.107-1-cloud-amd64-lintian.log")
ok(os.path.exists(log) and open(os.path.join(out, "lintian.txt")).read() == LONG + INFO,
   "the log beside the build's logs (package-linux-VERSION-FLAVOUR-) and in the output")
tags, found = lint(os.path.join(out, "linux_6.12.107-1a~test_amd64.changes"), root=Root(LONG))
ok(found == ["package-has-long-file-name"], "a .changes path works too", found)

# 3. Any other error or warning fails the kernel build, with its lines; so
# does the long name once its explanation is gone.
other = ("E: linux-libc-dev: some-new-error x\n"
         "W: linux-image-6.12+unreleased-cloud-amd64-unsigned: another-warning y\n")
got = tap.raises(kernel_deb.lint, out, root=Root(LONG + other + INFO))
ok(got and "2 error(s) or warning(s) not explained" in got and "some-new-error x" in got
   and "another-warning y" in got and "package-has-long-file-name" not in got,
   "an unexplained error and warning fail the build, their lines printed", got)
got = tap.raises(lintian.check, write("kernel.log", LONG + INFO), {})
ok(got and "package-has-long-file-name" in got,
   "without the explanation the long name fails the build", got)
got = tap.raises(kernel_deb.lint, out, root=Root(LONG, rc=2))
ok(got and "lintian failed (2)" in got, "lintian that did not run fails the build", got)
empty = os.path.join(WORK, "packages", "empty")
os.makedirs(empty)
got = tap.raises(kernel_deb.lint, empty, root=Root(""))
ok(got and "no .changes" in got, "a directory without a .changes is refused", got)

# 4. libvirt: Debian's own warning named, any other warning is the rebuild's.
lint_log = write("libvirt.log",
                 "W: libvirt-daemon-plugin-sanlock: missing-systemd-timer-for-cron-script "
                 "[etc/cron.weekly/x]\nI: libvirt: some-info\n"
                 "W: libvirt-daemon: spelling-error-in-binary x y\n")
bad, own = lintian.unexplained(lint_log, libvirt_deb.LINTIAN_DEBIANS_OWN)
ok(own == ["missing-systemd-timer-for-cron-script"] and len(bad) == 1
   and "spelling-error-in-binary" in bad[0],
   "libvirt: Debian's own warning named, any other warning is the rebuild's", (bad, own))

# 5. unsteal: nothing explained; lines of the source package and of the
# .changes are read too, and a line whose tag cannot be read is never
# explained away.
lint_log = write("unsteal.log", "W: unsteal source: some-source-tag x\n"
                                "E: unsteal changes: some-changes-tag\nW: garbled\n")
bad, found = lintian.unexplained(lint_log, {})
ok(len(bad) == 3 and found == [], "unsteal: every error and warning is unexplained", bad)
bad, found = lintian.unexplained(lint_log, {"some-source-tag": "x", "some-changes-tag": "y"})
ok(bad == ["W: garbled"] and found == ["some-changes-tag", "some-source-tag"],
   "'PKG source:' and 'PKG changes:' lines are read by their tag", (bad, found))
ok(tap.raises(lintian.check, write("clean.log", INFO), {}) is None,
   "info and explanations alone pass with nothing explained")

sys.exit(tap.end())
