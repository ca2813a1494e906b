# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab testhost build: the test host's disk image, and its kernel.

build() takes the runtime root of testhostroot.py and assembles
_build/testhost/root from it: the repository's tools/ and tests/ under
/unsteal, our libvirt (the build prefix of the work tree, or with
'--libvirt packages' the .debs already installed in the runtime root, their
units masked), the unsteal binary, the benchmark's spinner and spin-boot
image, and what starts the integration tests at boot: the runner script,
its systemd unit, and unsteal-init, PID 1 of the variants without systemd.
mkfs.ext4 -d then writes that root into _build/testhost/testhost.img (no
mounts); Debian's kernel and initrd are copied out beside it for
'boot --kernel debian'.  kernel_image() builds the lab kernel (lab.config)
that 'boot --kernel ours' boots.
"""

import glob
import json
import os
import re
import shutil
import time

from .common import LabError, ROOT, mkdirs, run, step
from . import stacks
from .testhostroot import (IN, IN_BUILD, IN_PREFIX, LIBVIRT_FROM, LOGS, TH, base_tarball,
                           build_in_root, package_debs, rmtree, runtime_tarball, unpack,
                           write_file)

IMAGE = os.path.join(TH, "testhost.img")
HOSTROOT = os.path.join(TH, "root")
KERNEL_EXTRA = []   # lab.config carries what the test host needs
DEBIAN_KERNEL = os.path.join(TH, "vmlinuz-debian")
DEBIAN_INITRD = os.path.join(TH, "initrd-debian")


# ---------------------------------------------------------------- the image

UNIT = """[Unit]
Description=unsteal test-host run (tests/integration)
ConditionKernelCommandLine=unsteal.run=1
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/unsteal-testhost-run
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
"""

# PID 1 of the variants without systemd: mounts what a host has, the cgroup
# hierarchies of the variant, then runs the tests and reaps orphans.
INIT = r'''#!/usr/bin/python3
# unsteal test host: PID 1 without systemd (unsteal.cgroup=v2|v1-comounted).
import ctypes, os, subprocess, sys

def sh(*cmd):
    subprocess.run(cmd, check=False)

os.makedirs("/proc", exist_ok=True)
sh("mount", "-t", "proc", "proc", "/proc")
cmdline = open("/proc/cmdline").read().split()
mode = next((a.split("=", 1)[1] for a in cmdline if a.startswith("unsteal.cgroup=")), "v2")
sh("mount", "-o", "remount,rw", "/")
sh("mount", "-t", "sysfs", "sys", "/sys")
sh("mount", "-t", "devtmpfs", "dev", "/dev")
for d in ("/dev/pts", "/dev/shm"):
    os.makedirs(d, exist_ok=True)
sh("mount", "-t", "devpts", "-o", "ptmxmode=0666", "devpts", "/dev/pts")
sh("mount", "-t", "tmpfs", "-o", "mode=1777", "shm", "/dev/shm")
sh("mount", "-t", "tmpfs", "-o", "mode=0755", "run", "/run")
sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmp", "/tmp")
if mode == "v2":
    sh("mount", "-t", "cgroup2", "-o", "nsdelegate", "cgroup2", "/sys/fs/cgroup")
elif mode == "v1-comounted":
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "cgroup", "/sys/fs/cgroup")
    for ctrls in ("cpu,cpuacct", "cpuset", "memory", "devices", "freezer", "pids", "blkio"):
        d = "/sys/fs/cgroup/" + ctrls
        os.makedirs(d, exist_ok=True)
        sh("mount", "-t", "cgroup", "-o", ctrls, ctrls, d)
    os.symlink("cpu,cpuacct", "/sys/fs/cgroup/cpu")
    os.symlink("cpu,cpuacct", "/sys/fs/cgroup/cpuacct")
else:
    print(f"unsteal-init: unknown unsteal.cgroup={mode}", flush=True)
sh("hostname", "unsteal-testhost")
runner = subprocess.Popen(["/usr/local/sbin/unsteal-testhost-run"])
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        break
    if pid == runner.pid:
        break
os.sync()
ctypes.CDLL(None).reboot(0x01234567)
'''

RUNNER = r'''#!/bin/sh
# unsteal test host: run tests/integration, print TAP and a summary on the console.
export UNSTEAL_BUILD=@IN_BUILD@ UNSTEAL_BIN=@IN_BUILD@/unsteal-build/src/unsteal
export UNSTEAL_TESTHOST=1 PYTHONDONTWRITEBYTECODE=1 PATH=/usr/sbin:/usr/bin:/sbin:/bin
@LIBVIRT_ENV@
exec </dev/null
echo "unsteal-testhost: up $(cut -d' ' -f1 /proc/uptime) s, kernel $(uname -r)," \
     "PID 1 $(cat /proc/1/comm), $(nproc) CPUs"
echo "unsteal-testhost: libvirt: @LIBVIRT_DESC@"
grep -E ' cgroup2? ' /proc/mounts | sed 's/^/unsteal-testhost: mount: /'
[ -f /sys/fs/cgroup/cgroup.controllers ] &&
    echo "unsteal-testhost: v2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
if [ "$(cat /proc/1/comm)" = systemd ]; then
    t=$(systemctl show -P ActiveEnterTimestampMonotonic multi-user.target)
    echo "unsteal-testhost: multi-user.target reached at $((t / 1000)) ms after boot"
    # libvirt uses machined when D-Bus can activate it.
    if grep -q 'unsteal\.machined=0' /proc/cmdline; then
        systemctl mask --runtime --now systemd-machined.service >/dev/null 2>&1
        rm -f /usr/share/dbus-1/system-services/org.freedesktop.machine1.service
        busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
            ReloadConfig >/dev/null
    fi
    if busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
            ListActivatableNames | grep -q org.freedesktop.machine1; then
        echo "unsteal-testhost: systemd-machined: on"
    else
        echo "unsteal-testhost: systemd-machined: off"
    fi
fi
tests="@TESTS@"
only=$(sed -n 's/.*unsteal\.tests=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
[ -n "$only" ] && tests="$only"
n=$(echo $tests | wc -w)
echo "TAP version 13"
echo "1..$n"
i=0; pass=0; fail=0; skip=0
cd @IN@
for t in $tests; do
    i=$((i + 1))
    echo "# test: $t (started at $(cut -d' ' -f1 /proc/uptime) s)"
    rm -f /tmp/skip
    ( timeout -k 10 900 python3 tests/integration/test_$t.py 2>&1; echo $? >/tmp/rc ) |
        while IFS= read -r l; do
            echo "# $l"
            case "$l" in "1..0 # SKIP"*) echo "${l#1..0 # SKIP }" >/tmp/skip ;; esac
        done
    rc=$(cat /tmp/rc)
    # The daemon's own word on vcpu_cgroup (e.g. the cgroup v2 fallback).
    grep -h -i "warn.*vcpu.cgroup\|vcpu.cgroup.*warn" @IN_BUILD@/logs/virtqemud.log \
        2>/dev/null | sort -u | head -3 | sed 's/^/# virtqemud: /'
    if [ "$rc" = 0 ] && [ -s /tmp/skip ]; then
        skip=$((skip + 1)); echo "ok $i - $t # SKIP $(cat /tmp/skip)"
    elif [ "$rc" = 0 ]; then
        pass=$((pass + 1)); echo "ok $i - $t"
    else
        fail=$((fail + 1)); echo "not ok $i - $t # exit=$rc"
    fi
done
echo "unsteal-testhost: $pass passed, $fail failed, $skip skipped"
echo "unsteal-testhost: done at $(cut -d' ' -f1 /proc/uptime) s"
sync
# Under systemd, power off at once (QEMU runs with -no-reboot); without it,
# unsteal-init does that when this script ends.
[ "$(cat /proc/1/comm)" = systemd ] && systemctl --force --force reboot
exit 0
'''


def integration_tests():
    """The integration test list of tests/meson.build, in its order."""
    text = open(os.path.join(ROOT, "tests", "meson.build")).read()
    m = re.search(r"integration_tests\s*=\s*\[(.*?)\]", text, re.S)
    if not m:
        raise LabError("tests/meson.build: no integration_tests list")
    return re.findall(r"'(\w+)'", m.group(1))


def assemble(root_tar, buildroot, libvirt_from="tree", version=None):
    """_build/testhost/root: the cached runtime root plus our files."""
    step(f"testhost: assembling the root in {HOSTROOT}")
    unpack(root_tar, HOSTROOT)
    r = HOSTROOT
    dst = r + IN_BUILD
    mkdirs(dst, r + IN_BUILD + "/unsteal-build/src", r + IN_BUILD + "/bench",
           r + IN_BUILD + "/images")
    shutil.copy2(buildroot + IN_BUILD + "/images/spin-boot.img",
                 r + IN_BUILD + "/images/spin-boot.img")
    if libvirt_from == "tree":
        run(["cp", "-a", buildroot + IN_PREFIX, dst + "/prefix"])
        # The systemd unit our libvirt installs beside its daemons' units
        # (the packages carry it; the lab build installs no units)
        for unit in glob.glob(os.path.join(stack_worktree_libvirt(), "src", "qemu", "*.slice")):
            mkdirs(r + "/usr/lib/systemd/system")
            shutil.copy2(unit, r + "/usr/lib/systemd/system/" + os.path.basename(unit))
    else:
        _mask_libvirt_units(r)
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
    write_file(r + "/usr/local/sbin/unsteal-init", INIT, 0o755)
    if libvirt_from == "tree":
        libvirt_env = ""
        libvirt_desc = f"our work tree, built into {IN_PREFIX}"
    else:
        libvirt_env = "export UNSTEAL_LIBVIRT_PREFIX=/"
        libvirt_desc = f"Debian packages {version} (apt-installed, /usr/sbin/libvirtd)"
    runner = (RUNNER.replace("@IN_BUILD@", IN_BUILD).replace("@IN@", IN)
              .replace("@TESTS@", " ".join(integration_tests()))
              .replace("@LIBVIRT_ENV@", libvirt_env).replace("@LIBVIRT_DESC@", libvirt_desc))
    write_file(r + "/usr/local/sbin/unsteal-testhost-run", runner, 0o755)
    write_file(r + "/etc/systemd/system/unsteal-testhost.service", UNIT)
    wants = r + "/etc/systemd/system/multi-user.target.wants"
    mkdirs(wants)
    os.symlink("../unsteal-testhost.service", wants + "/unsteal-testhost.service")
    # The run owns the serial console: no getty there; no password for root
    # (the image is for a throwaway VM without network).
    os.symlink("/dev/null", r + "/etc/systemd/system/serial-getty@ttyS0.service")
    run(["chroot", r, "passwd", "-d", "root"], quiet=True)
    for pattern, dest in (("vmlinuz-*", DEBIAN_KERNEL), ("initrd.img-*", DEBIAN_INITRD)):
        found = sorted(glob.glob(os.path.join(r, "boot", pattern)))
        if not found:
            raise LabError(f"the root has no /boot/{pattern} (linux-image-amd64)")
        shutil.copyfile(found[-1], dest)
    return r


def stack_worktree_libvirt():
    return stacks.default("libvirt").worktree


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


def make_image(root):
    size_mb = int(run(["du", "-sm", root], capture=True).stdout.split()[0])
    size_mb = size_mb + max(768, size_mb // 2)
    step(f"testhost: mkfs.ext4 -d into {os.path.relpath(IMAGE, ROOT)} ({size_mb} MiB)")
    tmp = IMAGE + ".part"
    if os.path.exists(tmp):
        os.unlink(tmp)
    with open(tmp, "wb") as fh:
        fh.truncate(size_mb << 20)
    run(["mkfs.ext4", "-q", "-F", "-L", "unsteal-th", "-d", root, tmp], quiet=True,
        log=os.path.join(LOGS, "testhost-mkfs.log"))
    os.rename(tmp, IMAGE)
    return IMAGE


def build(libvirt_from="tree"):
    t0 = time.monotonic()
    if libvirt_from not in LIBVIRT_FROM:
        raise LabError(f"--libvirt {libvirt_from!r}: one of {', '.join(LIBVIRT_FROM)}")
    mkdirs(TH, LOGS)
    debs = package_debs() if libvirt_from == "packages" else None
    base_tarball()
    broot = build_in_root(libvirt_from)
    root_tar, pkgs = runtime_tarball(broot, libvirt_from, debs)
    root = assemble(root_tar, broot, libvirt_from, debs[0] if debs else None)
    make_image(root)
    rmtree(root)
    with open(os.path.join(TH, "image.json"), "w") as fh:
        json.dump({"runtime_packages": pkgs, "root": os.path.basename(root_tar),
                   "libvirt": libvirt_from, "libvirt_version": debs[0] if debs else None}, fh)
    step(f"testhost: image ready in {time.monotonic() - t0:.0f} s")
    return IMAGE


def kernel_image():
    from . import kernel
    return kernel.build(patched=True, extra=KERNEL_EXTRA)

