# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab testhost build: the test host's disk image, and its kernel.

build() takes the runtime root of testhostroot.py for a release
(testhostrelease.py) and assembles the release's root directory
(_build/testhost/root for Debian 13) from it: the repository's tools/ and tests/ under
/unsteal, our libvirt (the build prefix of the work tree, or with
'--libvirt packages' the .debs already installed in the runtime root, their
units masked), the unsteal binary, the benchmark's spinner, the nested
guests' images (the spin boot sector and the balloon kernel), and what
starts the integration tests at boot, from tools/testhost/:
the runner script with its configuration, its systemd unit, and
unsteal-init, PID 1 of the variants without systemd.  On Debian 13,
unsteal's own .deb ('tools/lab package unsteal', built for trixie) is
installed into it with dpkg, its dependencies being in the runtime root,
so that its exporter service runs as the package sets it up.
mkfs.ext4 -d then writes that root into the release's testhost.img (no
mounts); Debian's kernel and initrd are copied out beside it for
'boot --kernel debian'.  kernel_image() builds the lab kernel (lab.config)
that 'boot --kernel ours' boots.
"""

import glob
import json
import os
import re
import shlex
import shutil
import time

from ..common import LabError, ROOT, images_dir, logs_dir, mkdirs, run, step
from ..lab import guest
from ..stack import stacks
from ..package.chroot import Root, no_services, rmtree, unpack
from .testhostrelease import DEFAULT
from .testhostroot import (IN, IN_BUILD, IN_SOURCE_PACKAGE, IN_STOCK_PREFIX, LIBVIRT_FROM,
                           base_tarball, build_in_root, check_stock, in_prefix, package_debs,
                           package_source, runtime_tarball, write_file)

KERNEL_EXTRA = []   # lab.config carries what the test host needs


# ---------------------------------------------------------------- the image

# What starts the integration tests at boot, from tools/testhost/: (file,
# where the image has it, mode).  The runner reads RUNNER_CONF, which
# runner_conf() writes (its names are listed in the runner's header).
PROGRAMS = os.path.join(ROOT, "tools", "testhost")
PROGRAM_FILES = [
    ("unsteal-init.py", "/usr/local/sbin/unsteal-init", 0o755),
    ("unsteal-testhost-run.sh", "/usr/local/sbin/unsteal-testhost-run", 0o755),
    ("unsteal-testhost.service", "/etc/systemd/system/unsteal-testhost.service", 0o644),
]
RUNNER_CONF = "/usr/local/etc/unsteal-testhost-run.conf"


# tests/meson.build's lists of integration tests, in the order meson runs them
INTEGRATION_LISTS = ("integration_tests", "cpu_time_tests")


def integration_tests():
    """The integration tests of tests/meson.build, in its order."""
    text = open(os.path.join(ROOT, "tests", "meson.build")).read()
    out = []
    for name in INTEGRATION_LISTS:
        m = re.search(rf"^{name}\s*=\s*\[(.*?)\]", text, re.S | re.M)
        if not m:
            raise LabError(f"tests/meson.build: no {name} list")
        out += re.findall(r"'(\w+)'", m.group(1))
    return out


def runner_conf(libvirt_from="tree", version=None, rel=DEFAULT):
    """The runner's configuration: sh assignments it sources at boot."""
    conf = {"UNSTEAL_TREE": IN, "UNSTEAL_BUILD": IN_BUILD,
            "UNSTEAL_TESTS": " ".join(integration_tests()),
            "UNSTEAL_RELEASE": rel.describe()}
    if libvirt_from == "tree":
        conf["UNSTEAL_LIBVIRT_DESC"] = (f"our work tree ({rel.stack.rel}), built into "
                                        f"{in_prefix(rel)}")
        if not rel.stack.default:
            # The lab in the image uses (and names) the stack's own prefix
            conf["UNSTEAL_LIBVIRT_STACK"] = rel.stack_key
    else:
        conf["UNSTEAL_LIBVIRT_DESC"] = (f"Debian packages {version} (apt-installed, "
                                        f"/usr/sbin/libvirtd)")
        conf["UNSTEAL_LIBVIRT_PREFIX"] = "/"
    return ("# Written by tools/lablib/testing/testhostimage.py for unsteal-testhost-run.\n"
            + "".join(f"{k}={shlex.quote(v)}\n" for k, v in conf.items()))


def assemble(root_tar, buildroot, libvirt_from="tree", version=None, rel=DEFAULT,
             stock=False):
    """The release's root directory: the cached runtime root plus our files."""
    r = rel.hostroot
    step(f"testhost: assembling the root in {os.path.relpath(r, ROOT)}")
    unpack(root_tar, r)
    dst = r + IN_BUILD
    mkdirs(dst, r + IN_BUILD + "/unsteal-build/src", r + IN_BUILD + "/bench",
           r + IN_BUILD + "/images")
    for image in (guest.SPIN_BOOT_NAME, guest.BALLOON_NAME):
        shutil.copy2(buildroot + IN_BUILD + "/images/" + image, r + IN_BUILD + "/images/" + image)
    if libvirt_from == "tree":
        run(["cp", "-a", buildroot + in_prefix(rel), r + in_prefix(rel)])
        # The systemd unit our libvirt installs beside its daemons' units
        # (the packages carry it; the lab build installs no units)
        for unit in glob.glob(os.path.join(rel.stack.worktree, "src", "qemu", "*.slice")):
            mkdirs(r + "/usr/lib/systemd/system")
            shutil.copy2(unit, r + "/usr/lib/systemd/system/" + os.path.basename(unit))
    else:
        _mask_libvirt_units(r)
        # The source package of the .debs: its autopkgtests run in the host,
        # from the package's qemu.conf (the lab's tests write their own).
        mkdirs(r + IN_SOURCE_PACKAGE)
        for f in package_source(rel.stack.dir):
            shutil.copy2(f, r + IN_SOURCE_PACKAGE)
        shutil.copy2(r + "/etc/libvirt/qemu.conf", r + IN_SOURCE_PACKAGE + "/qemu.conf")
    if stock:
        run(["cp", "-a", buildroot + IN_STOCK_PREFIX, r + IN_STOCK_PREFIX])
    shutil.copy2(buildroot + IN_BUILD + "/unsteal-build/src/unsteal",
                 r + IN_BUILD + "/unsteal-build/src/unsteal")
    shutil.copy2(buildroot + IN_BUILD + "/bench/vcpu-spin", r + IN_BUILD + "/bench/vcpu-spin")
    for d in ("tools", "tests"):
        shutil.copytree(os.path.join(ROOT, d), r + IN + "/" + d,
                        ignore=shutil.ignore_patterns("__pycache__"))
    # The lab reads every stack's BASE to tell the stacks apart; the patches
    # themselves stay out (the image carries the built prefix).
    for s in stacks.known():
        mkdirs(r + IN + "/" + s.rel)
        shutil.copy2(os.path.join(s.dir, "BASE"), r + IN + "/" + s.rel + "/BASE")
    # The spinner binary must look newer than its source (benchsched rebuilds otherwise).
    now = time.time()
    os.utime(r + IN_BUILD + "/bench/vcpu-spin", (now, now))
    write_file(r + "/etc/hostname", "unsteal-testhost\n")
    write_file(r + "/etc/fstab", "/dev/vda / ext4 rw,errors=remount-ro 0 1\n")
    for name, dest, mode in PROGRAM_FILES:
        with open(os.path.join(PROGRAMS, name)) as fh:
            write_file(r + dest, fh.read(), mode)
    write_file(r + RUNNER_CONF, runner_conf(libvirt_from, version, rel))
    wants = r + "/etc/systemd/system/multi-user.target.wants"
    mkdirs(wants)
    os.symlink("../unsteal-testhost.service", wants + "/unsteal-testhost.service")
    # The run owns the serial console: no getty there; no password for root
    # (the image is for a throwaway VM without network).
    os.symlink("/dev/null", r + "/etc/systemd/system/serial-getty@ttyS0.service")
    run(["chroot", r, "passwd", "-d", "root"], quiet=True)
    for pattern, dest in (("vmlinuz-*", rel.debian_kernel), ("initrd.img-*", rel.debian_initrd)):
        found = sorted(glob.glob(os.path.join(r, "boot", pattern)))
        if not found:
            raise LabError(f"the root has no /boot/{pattern} (linux-image-amd64)")
        shutil.copyfile(found[-1], dest)
    return r


def _mask_libvirt_units(root):
    """The packages enable libvirt's sockets and services; the tests start and
    restart the daemons themselves (each test writes its own qemu.conf), so
    systemd must not hold the sockets or start a second daemon: mask them."""
    units = sorted(os.path.basename(u) for u in
                   glob.glob(root + "/usr/lib/systemd/system/virt*") +
                   glob.glob(root + "/usr/lib/systemd/system/libvirt*")
                   if u.endswith((".service", ".socket")))
    if not any(u.startswith(("virtqemud", "libvirtd")) for u in units):
        raise LabError("the image's libvirt packages have no virtqemud or libvirtd unit")
    for u in units:
        link = root + "/etc/systemd/system/" + u
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink("/dev/null", link)
    step(f"testhost: masked {len(units)} libvirt unit(s) of the packages (the tests run "
         f"the daemons): {' '.join(units)}")


def make_image(root, rel=DEFAULT):
    image = rel.image
    size_mb = int(run(["du", "-sm", root], capture=True).stdout.split()[0])
    size_mb = size_mb + max(768, size_mb // 2)
    step(f"testhost: mkfs.ext4 -d into {os.path.relpath(image, ROOT)} ({size_mb} MiB)")
    tmp = image + ".part"
    if os.path.exists(tmp):
        os.unlink(tmp)
    with open(tmp, "wb") as fh:
        fh.truncate(size_mb << 20)
    run(["mkfs.ext4", "-q", "-F", "-L", "unsteal-th", "-d", root, tmp], quiet=True,
        log=rel.log("mkfs"))
    os.rename(tmp, image)
    return image


def _unsteal_deb():
    """The .deb of 'tools/lab package unsteal' (built when there is none):
    the image has it installed, for its exporter service (tools/lab test
    builds it in the stage before)."""
    from ..package import unsteal_deb
    deb = unsteal_deb.main_deb()
    if deb is None:
        step("testhost: no unsteal package yet: tools/lab package unsteal")
        deb = unsteal_deb.main_deb(unsteal_deb.build())
    return deb


def _deb_depends(deb):
    """The packages a .deb depends on (the first of each alternative), so that
    the cached runtime root has them and dpkg -i needs no archive."""
    dep = run(["dpkg-deb", "-f", deb, "Depends"], capture=True).stdout
    return sorted({alt.split("|")[0].split("(")[0].strip()
                   for alt in dep.split(",") if alt.strip()})


def install_deb(root, deb, rel=DEFAULT):
    """dpkg -i a .deb into the assembled root: its maintainer scripts enable
    its services (policy-rc.d keeps them from starting in the chroot)."""
    step(f"testhost: installing {os.path.basename(deb)} into the root (dpkg -i)")
    shutil.copy2(deb, root + "/tmp/")
    prc = no_services(root)
    try:
        Root(None, root).run(f"dpkg -i /tmp/{shlex.quote(os.path.basename(deb))}",
                             log=rel.log("unsteal-deb"))
    finally:
        os.unlink(prc)
        os.unlink(root + "/tmp/" + os.path.basename(deb))


def build_root(rel=DEFAULT):
    """What build() compiles in the release's build root (our libvirt from
    the work tree, unsteal, the guest programs), without the image:
    tools/lab test makes it beside other work, and build() then finds it
    built (its build is incremental)."""
    build_in_root("tree", rel, False)


def build(libvirt_from="tree", rel=DEFAULT, stock=False):
    """The release's image; with stock, stock libvirt in it too (check_stock())."""
    t0 = time.monotonic()
    if libvirt_from not in LIBVIRT_FROM:
        raise LabError(f"--libvirt {libvirt_from!r}: one of {', '.join(LIBVIRT_FROM)}")
    if stock:
        check_stock(rel, libvirt_from)
    step(f"testhost: the image of {rel.describe()}")
    mkdirs(rel.dir, logs_dir())
    debs = package_debs(rel.stack.dir) if libvirt_from == "packages" else None
    if rel.unsteal_deb:
        unsteal_deb = _unsteal_deb()
        extra = _deb_depends(unsteal_deb)
    else:
        step(f"testhost: unsteal's .deb is built for trixie: the {rel.name} image goes "
             f"without it (its test, unsteal_service, is not in this release's rows)")
        unsteal_deb, extra = None, []
    base_tarball(rel)
    broot = build_in_root(libvirt_from, rel, stock)
    root_tar, pkgs = runtime_tarball(broot, libvirt_from, debs, extra=extra, rel=rel,
                                     stock=stock)
    root = assemble(root_tar, broot, libvirt_from, debs[0] if debs else None, rel, stock)
    if unsteal_deb:
        install_deb(root, unsteal_deb, rel)
    make_image(root, rel)
    rmtree(root)
    with open(os.path.join(rel.dir, "image.json"), "w") as fh:
        json.dump({"release": rel.name, "runtime_packages": pkgs,
                   "root": os.path.basename(root_tar), "libvirt": libvirt_from,
                   "stock_libvirt": stock,
                   "libvirt_stack": rel.stack_key,
                   "libvirt_version": debs[0] if debs else None}, fh)
    step(f"testhost: image ready in {time.monotonic() - t0:.0f} s")
    return rel.image


def kernel_image():
    """The lab kernel, built (incrementally: make walks the tree and links
    again, a minute or more on 2 cores even when nothing changed)."""
    from ..build import kernel
    return kernel.build(patched=True, extra=KERNEL_EXTRA)


def built_kernel_image():
    """The lab kernel as last built, built only when there is none: what the
    rows of tools/lab test boot, after test_build built it."""
    from ..build import kernel
    path = os.path.join(images_dir(),
                        "bzImage-" + kernel.flavour_name(True, False, KERNEL_EXTRA))
    return path if os.path.exists(path) else kernel_image()

