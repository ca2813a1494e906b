# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab testhost build --libvirt packages: which .debs it accepts.

No network, no root: a tiny stack (BASE, series, two patches) and a fake
package output directory (.debs, SUMMARY and the source package's debian
tarball with debian/patches/unsteal/).  The image must only ever carry
packages built from the series that is checked out: a changed, missing or
extra patch in the source package, or an unfinished build, is refused with
an error that says what to do.
"""

import io
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-testhost-debs-test-")
ROOT = tap.ROOT
ok = tap.ok

from lablib import common  # noqa: E402
from lablib.testing import testhostroot  # noqa: E402
from lablib.common import LabError  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


PATCHES = {"0001-qemu-one.patch": "one\n", "0002-qemu-two.patch": "two\n"}
STACK = os.path.join(WORK, "stack")
write(os.path.join(STACK, "BASE"), "package=libvirt\nversion=1.0-1\nsuite=trixie\n")
write(os.path.join(STACK, "series"), "".join(f"{p}\n" for p in PATCHES))
for name, text in PATCHES.items():
    write(os.path.join(STACK, name), text)
OUT = os.path.join(WORK, "build", "packages", "libvirt_1.0-1+unsteal1")


def package_output(patches, summary=True, debs=("libvirt0_1.0-1+unsteal1_amd64.deb",)):
    """A fake output directory of tools/lab package libvirt."""
    if os.path.isdir(OUT):
        for f in os.listdir(OUT):
            os.unlink(os.path.join(OUT, f))
    os.makedirs(OUT, exist_ok=True)
    for d in debs:
        write(os.path.join(OUT, d), "")
    if summary:
        write(os.path.join(OUT, "SUMMARY"), "package=libvirt\n")
    with tarfile.open(os.path.join(OUT, "libvirt_1.0-1+unsteal1.debian.tar.xz"), "w:xz") as tar:
        info = tarfile.TarInfo("debian/patches/unsteal")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for name, text in patches.items():
            info = tarfile.TarInfo(f"debian/patches/unsteal/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


def refused(what, want):
    try:
        got = testhostroot.package_debs(STACK)
    except LabError as e:
        ok(want in str(e), f"{what}: refused, the error says {want!r}", str(e))
        return
    ok(False, f"{what}: refused", f"accepted: {got}")


package_output(PATCHES)
try:
    version, debs = testhostroot.package_debs(STACK)
    ok(version == "1.0-1+unsteal1", "the packages of the checked-out series: accepted, "
       "version with +unsteal1", version)
    ok([os.path.basename(d) for d in debs] == ["libvirt0_1.0-1+unsteal1_amd64.deb"],
       "every .deb of the output directory is returned", debs)
except LabError as e:
    ok(False, "the packages of the checked-out series: accepted", str(e))
    ok(False, "every .deb of the output directory is returned")

package_output(dict(PATCHES, **{"0002-qemu-two.patch": "two, older\n"}))
refused("a patch that differs", "0002-qemu-two.patch differs or is missing")

package_output({"0001-qemu-one.patch": "one\n"})
refused("a patch the packages lack", "0002-qemu-two.patch differs or is missing")

package_output(dict(PATCHES, **{"0003-qemu-gone.patch": "gone\n"}))
refused("a patch the series no longer has", "0003-qemu-gone.patch")

package_output(PATCHES, summary=False)
refused("a build without SUMMARY (unfinished)", "run tools/lab package libvirt")

package_output(PATCHES, debs=())
refused("no .deb at all", "run tools/lab package libvirt")

sys.exit(tap.end())
