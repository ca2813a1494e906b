# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab package's source assembly on a tiny Debian source package of its own.

No network, no root: a throw-away orig tarball and a debian tarball (format
3.0 (quilt), one Debian patch) are placed in a private cache with their
sha256 in a BASE file.  Checks: the series lands in debian/patches/unsteal/
after Debian's own patches, the changelog gets VERSION+unsteal1 (or the
BASE's package_revision), dpkg-source builds the source package with every
patch applied; a patch that conflicts with Debian's patches is named in the
error; bad input gets a clear error; meson's summary is parsed.
"""

import email.utils
import hashlib
import io
import os
import re
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-package-test-")
ROOT = tap.ROOT
ok = tap.ok

from lablib import common  # noqa: E402
from lablib.build import mesonlog  # noqa: E402
from lablib.package import libvirt_deb  # noqa: E402
from lablib.common import LabError, run  # noqa: E402


def tarball(name, files, mode=0o644):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for path, text in files:
            blob = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(blob)
            info.mtime = 0
            info.mode = 0o755 if path.endswith("rules") else mode
            tar.addfile(info, io.BytesIO(blob))
    raw = data.getvalue()
    src = os.path.join(os.environ["UNSTEAL_CACHE"], "sources")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, name), "wb") as fh:
        fh.write(raw)
    return hashlib.sha256(raw).hexdigest()


DEBIAN_PATCH = """\
Description: Debian's own change to the README
--- a/README
+++ b/README
@@ -1,3 +1,3 @@
 demo
-line two
+line two, as Debian has it
 line three
"""

GOOD = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Unsteal Developers <dev@unsteal.invalid>
Date: Sat, 1 Jan 2000 00:00:00 +0000
Subject: [PATCH] demo: Return the answer from a very long subject line that
 git folded over two header lines

The answer is what the callers want; the body says why.

Signed-off-by: Unsteal Developers <dev@unsteal.invalid>
---
 hello.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/hello.c b/hello.c
--- a/hello.c
+++ b/hello.c
@@ -1 +1 @@
-int main(void) { return 0; }
+int main(void) { return 42; }
"""

# Written against the upstream README: its context is gone once Debian's
# patch is applied, so it must be reported, not applied with fuzz.
CONFLICT = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Unsteal Developers <dev@unsteal.invalid>
Date: Sat, 1 Jan 2000 00:00:00 +0000
Subject: [PATCH] demo: Reword line two

Line two says something else upstream; we want our own wording.

Signed-off-by: Unsteal Developers <dev@unsteal.invalid>
---
diff --git a/README b/README
--- a/README
+++ b/README
@@ -1,3 +1,3 @@
 demo
-line two
+line two, as we have it
 line three
"""


def make_stack(patches, extra=""):
    orig_sha = tarball("demo_1.0.orig.tar.xz", [
        ("demo-1.0/hello.c", "int main(void) { return 0; }\n"),
        ("demo-1.0/README", "demo\nline two\nline three\n")])
    deb_sha = tarball("demo_1.0-1.debian.tar.xz", [
        ("debian/source/format", "3.0 (quilt)\n"),
        ("debian/changelog", "demo (1.0-1) trixie; urgency=medium\n\n  * Initial.\n\n"
                             " -- Demo <demo@example.invalid>  Sat, 01 Jan 2000 00:00:00 +0000\n"),
        ("debian/control", "Source: demo\nMaintainer: Demo <demo@example.invalid>\n"
                           "Build-Depends: debhelper-compat (= 13)\n\nPackage: demo\n"
                           "Architecture: all\nDescription: demo\n demo\n"),
        ("debian/rules", "#!/usr/bin/make -f\n%:\n\tdh $@\n"),
        ("debian/patches/series", "debian-readme.patch\n"),
        ("debian/patches/debian-readme.patch", DEBIAN_PATCH)])
    d = tempfile.mkdtemp(dir=WORK, prefix="demo-patches-")
    with open(os.path.join(d, "BASE"), "w") as fh:
        fh.write("name=demo\npackage=demo\nversion=1.0-1\nsuite=trixie\ntopdir=demo-1.0\n"
                 f"orig=demo_1.0.orig.tar.xz\norig_sha256={orig_sha}\n"
                 f"debian=demo_1.0-1.debian.tar.xz\ndebian_sha256={deb_sha}\n" + extra)
    with open(os.path.join(d, "series"), "w") as fh:
        for name, text in patches:
            with open(os.path.join(d, name), "w") as p:
                p.write(text)
            fh.write(name + "\n")
    # The stack's last commit dates the changelog entry: one from 2020, so
    # an entry dated by the clock shows.
    env = {"GIT_AUTHOR_DATE": "2020-01-02T03:04:05Z", "GIT_COMMITTER_DATE": "2020-01-02T03:04:05Z",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    run(["git", "init", "-q", d], quiet=True)
    run(["git", "-C", d, "add", "."], quiet=True)
    run(["git", "-C", d, "commit", "-q", "-m", "stack"], env=env, quiet=True)
    return d


# 1. A good series.
d = make_stack([("0001-demo-Return-the-answer.patch", GOOD)])
try:
    base, info = libvirt_deb.prepare(d)
    err = None
except LabError as e:
    err = e
ok(err is None, "prepare() assembles the source package", err)
if err is None:
    tree = info["tree"]
    ok(info["version"] == "1.0-1+unsteal1", "version is Debian's + '+unsteal1'", info["version"])
    series = open(os.path.join(tree, "debian/patches/series")).read().splitlines()
    ok(series[0] == "debian-readme.patch" and
       series[-1] == "unsteal/0001-demo-Return-the-answer.patch",
       "the series is appended after Debian's own patches", series)
    ok(os.path.exists(os.path.join(tree, "debian/patches/unsteal/0001-demo-Return-the-answer.patch")),
       "the patch is copied into debian/patches/unsteal/")
    chl = open(os.path.join(tree, "debian/changelog")).read()
    first = chl.splitlines()[0]
    ok(max(len(ln) for ln in chl.splitlines()) <= 80, "changelog lines fit 80 columns", chl)
    ok(first == "demo (1.0-1+unsteal1) trixie; urgency=medium", "changelog entry on top", first)
    ok(" ".join(chl.split()).find("a very long subject line that git folded over two "
                                  "header lines") > 0 and "[PATCH]" not in chl,
       "changelog lists the unfolded subject without [PATCH]", chl[:600])
    ok(" -- Unsteal Developers <dev@unsteal.invalid>  " in chl, "changelog signed by us")
    trailer = [ln for ln in chl.splitlines() if ln.startswith(" -- ")][0]
    stamp = email.utils.parsedate_to_datetime(trailer.split(">  ", 1)[1]).timestamp()
    ok(stamp == info["ts"] == 1577934245,
       "the entry is dated by the stack's last commit, not by the clock", (trailer, info["ts"]))
    ok(run(["dpkg-parsechangelog", "-l", os.path.join(tree, "debian/changelog"), "-S",
            "Maintainer"], capture=True).stdout.strip()
       == "Unsteal Developers <dev@unsteal.invalid>", "dpkg-parsechangelog reads our entry")
    control = open(os.path.join(tree, "debian/tests/control")).read()
    ok(re.findall(r"^Tests: (\S+)", control, re.M) == ["unsteal-qemu-conf", "unsteal-schedinfo"]
       and all(os.access(os.path.join(tree, "debian/tests", n), os.X_OK)
               for n in ("unsteal-qemu-conf", "unsteal-schedinfo")),
       "the series' autopkgtests are in debian/tests/ (control made: the demo has none)",
       control)
    ok(os.path.exists(info["dsc"]) and os.path.basename(info["dsc"]) == "demo_1.0-1+unsteal1.dsc",
       "dpkg-source wrote the .dsc", info["dsc"])
    ok(open(os.path.join(tree, "hello.c")).read() == "int main(void) { return 42; }\n"
       and "as Debian has it" in open(os.path.join(tree, "README")).read(),
       "Debian's patch and ours are both applied")
    ok(info["debian_patches"] == 1 and info["ours"] == 1, "patch counts", info)

# 2. A patch written against upstream that conflicts with Debian's patch.
d = make_stack([("0001-demo-Reword-line-two.patch", CONFLICT)])
try:
    libvirt_deb.prepare(d)
    err = None
except LabError as e:
    err = str(e)
ok(err is not None and "does not apply on Debian's patched tree" in err
   and "0001-demo-Reword-line-two.patch" in err,
   "a conflict with Debian's patches names the patch", err)

# 3. package_revision.
d = make_stack([("0001-demo-Return-the-answer.patch", GOOD)], extra="package_revision=3\n")
base, info = libvirt_deb.prepare(d)
ok(info["version"] == "1.0-1+unsteal3", "package_revision=3 gives +unsteal3", info["version"])
d = make_stack([("0001-demo-Return-the-answer.patch", GOOD)], extra="package_revision=x\n")
try:
    libvirt_deb.prepare(d)
    err = None
except LabError as e:
    err = str(e)
ok(err is not None and "package_revision" in err, "a bad package_revision is refused", err)

# 4. Bad stack argument.
try:
    libvirt_deb.resolve_stack(os.path.join(WORK, "nowhere"), "libvirt")
    err = None
except LabError as e:
    err = str(e)
ok(err is not None and "not a stack" in err, "an unknown stack is refused", err)

# 5. meson test's summary as dh_auto_test prints it.
summary = mesonlog.summary("""
 1/3 qemuvcpucgrouptest OK 0.05s
Ok:                 431
Expected Fail:      0
Fail:               0
Unexpected Pass:    0
Skipped:            7
Timeout:            0
""")
ok(summary == {"Ok": 431, "Expected Fail": 0, "Fail": 0, "Unexpected Pass": 0, "Skipped": 7,
               "Timeout": 0}, "meson summary parsed", summary)

# 6. systemd units the series adds to the QEMU driver are listed for its
# package: in Debian 13's .install.in template below /usr/lib, in Debian 12's
# .install below /lib; other packages and series without units are left alone.
unit_patch = os.path.join(WORK, "unit.patch")
with open(unit_patch, "w") as fh:
    fh.write("diff --git a/src/qemu/machine-x.slice b/src/qemu/machine-x.slice\n"
             "new file mode 100644\n--- /dev/null\n+++ b/src/qemu/machine-x.slice\n"
             "@@ -0,0 +1 @@\n+[Slice]\n")
for ext, want in ((".in", "usr/lib/systemd/system/machine-x.slice\n"),
                  ("", "usr/lib/systemd/system/machine-x.slice lib/systemd/system/\n")):
    tree = os.path.join(WORK, "units" + ext)
    os.makedirs(os.path.join(tree, "debian"), exist_ok=True)
    inst = os.path.join(tree, "debian", "libvirt-daemon-driver-qemu.install" + ext)
    with open(inst, "w") as fh:
        fh.write("usr/bin/virt-qemu-run\n")
    units = libvirt_deb._install_units(tree, {"package": "libvirt", "version": "1"}, [unit_patch])
    ok(units == ["machine-x.slice"] and open(inst).read().endswith(want),
       f"a unit the series adds is installed by the QEMU driver's package (.install{ext})",
       open(inst).read())
ok(libvirt_deb._install_units(tree, {"package": "linux", "version": "1"}, [unit_patch]) == [],
   "other packages get no unit")

# 7. lintian: an override of package-has-long-file-name only for the packages
# whose name the version suffix takes past lintian's limit (the limit and
# the three names of Debian 13's libvirt that lintian named: 82, 82 and 87
# characters with +unsteal1, 73 to 78 without).  The verdict on lintian's
# log (Debian's own warnings named) is test_lintian.py's.
tree = os.path.join(WORK, "lintian")
os.makedirs(os.path.join(tree, "debian"), exist_ok=True)
with open(os.path.join(tree, "debian", "control"), "w") as fh:
    fh.write("Source: libvirt\n\nPackage: libvirt-daemon\nArchitecture: any\n\n"
             "Package: libvirt-daemon-driver-storage-logical\nArchitecture: any\n\n"
             "Package: libvirt-daemon-driver-storage-iscsi-direct\nArchitecture: any\n")
iscsi = os.path.join(tree, "debian", "libvirt-daemon-driver-storage-iscsi-direct.lintian-overrides")
with open(iscsi, "w") as fh:
    fh.write("# Debian's own\nsome-other-tag")
got = libvirt_deb._add_lintian_overrides(tree, "11.3.0-3+deb13u3+unsteal1", "11.3.0-3+deb13u3")
ok(got == ["libvirt-daemon-driver-storage-logical", "libvirt-daemon-driver-storage-iscsi-direct"],
   "the packages whose .deb name the suffix makes too long get an override", got)
ok(open(iscsi).read().startswith("# Debian's own\nsome-other-tag\n#")
   and open(iscsi).read().endswith("\npackage-has-long-file-name\n"),
   "an override file Debian has keeps its lines, ours appended", open(iscsi).read())
ok(not os.path.exists(os.path.join(tree, "debian", "libvirt-daemon.lintian-overrides")),
   "a short name gets no override")
got = libvirt_deb._add_lintian_overrides(tree, "11.3.0-3+deb13u3+unsteal1",
                                         "11.3.0-3+deb13u3+a+long+revision+of+debian")
ok(got == [], "no override where Debian's own name is already past the limit", got)
sys.exit(tap.end())
