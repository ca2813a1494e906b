# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab testhost: a booted Debian 13 host with our libvirt, for the cgroup matrix.

'build' makes a Debian 13 (trixie) root with debootstrap from the mirror of
the machine's own apt sources: minimal, systemd, QEMU and the libraries our
libvirt build links against.  Our patched libvirt is built INSIDE a trixie
build root (the same root plus the build dependencies), so it links against
trixie's libraries; a build made on the Debian 12 development host is never
copied in.  The root, the repository's tools/ and tests/, the libvirt prefix
and the unsteal binary go into an ext4 image (mkfs.ext4 -d, no mounts).

'boot --variant V' boots that image with the lab kernel
(lab.config) under QEMU TCG, runs the integration tests of
tests/integration/ inside (the lab daemon runs in the test host, see
UNSTEAL_TESTHOST in tools/lablib/guest.py), and streams the serial console:
TAP, then 'unsteal-testhost: N passed, N failed'.

Cached in ~/.cache/unsteal/testhost (delete at will):
  base-trixie-KEY.tar.zst    debootstrap + BASE_PACKAGES
  build-trixie-KEY.tar.zst   base + BUILD_PACKAGES (the libvirt build root)
  root-trixie-KEY.tar.zst    base + the runtime libraries of our build
Each KEY is a hash of the root's package list.  Work files live in
_build/testhost/ (the build root with its incremental meson build dirs, the
assembled root, the image, per-boot overlays).
"""

import fcntl
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time

from .common import BUILD, CACHE, LabError, ROOT, STACKS, mkdirs, run, step
from . import sources

SUITE = "trixie"
TH = os.path.join(BUILD, "testhost")
THCACHE = os.path.join(CACHE, "testhost")
LOGS = os.path.join(BUILD, "logs")
IMAGE = os.path.join(TH, "testhost.img")
BUILDROOT = os.path.join(TH, "buildroot")
HOSTROOT = os.path.join(TH, "root")
KERNEL_EXTRA = []   # lab.config carries what the test host needs

# Where things live inside the test host (and the build root): the lab's own
# layout, so that tools/lablib and the tests run there unchanged.
IN = "/unsteal"
IN_BUILD = IN + "/_build"
IN_PREFIX = IN_BUILD + "/prefix"

# The test host's root: minbase + these.  systemd-container (machined) is
# added to the runtime root (HOST_PACKAGES), not here, so that the build root
# does not change with it.
BASE_PACKAGES = ["systemd", "systemd-sysv", "udev", "dbus", "python3", "qemu-system-x86",
                 "procps", "util-linux", "dmidecode", "kmod"]
# The build root: the lab's libvirt build dependencies (sources.PACKAGES)
# for trixie, plus gcc for the unsteal binary and the benchmark's spinner.
BUILD_PACKAGES = (["build-essential", "meson", "ninja-build", "pkg-config", "ccache",
                   "python3", "gettext", "git"]
                  + sources.PACKAGES["libvirt build"] + ["libcgroup-dev"])
# Debian's own kernel (with its initramfs) is in the image too: a reference
# for the lab kernel, and 'boot --kernel debian' needs no build.
KERNEL_PACKAGES = ["linux-image-amd64", "initramfs-tools"]
# systemd-machined is in the image; the runner switches it off (masked, and
# its D-Bus activation removed) on the systemd variants with
# unsteal.machined=0, where libvirt then manages the cgroups below
# /machine itself.
HOST_PACKAGES = ["systemd-container"]
# Where the image's libvirt comes from (build --libvirt):
#   tree      our patched work tree, built in the trixie build root into
#             /unsteal/_build/prefix (what tools/lab test uses: it needs no
#             package build, which alone takes longer than CI may run);
#   packages  the .debs of 'tools/lab package libvirt', installed with apt the
#             way an operator installs them (PACKAGE_INSTALL pulls the rest);
#             the tests then drive the packaged daemon (/usr/sbin/libvirtd,
#             /etc/libvirt, /run/libvirt) through UNSTEAL_LIBVIRT_PREFIX=/.
LIBVIRT_FROM = ("tree", "packages")
PACKAGE_INSTALL = ["libvirt-daemon-system", "libvirt-clients"]
# Packages whose versions must be ours after the install.
PACKAGE_OURS = ["libvirt0", "libvirt-daemon-driver-qemu", "libvirt-daemon-log",
                "libvirt-clients", "libvirt-daemon-system"]
LOCAL_REPO = "/var/local/unsteal-debs"
DEBIAN_KERNEL = os.path.join(TH, "vmlinuz-debian")
DEBIAN_INITRD = os.path.join(TH, "initrd-debian")
ROOT_FORMAT = "1"   # bump when the way roots are made changes

# What tools/lab test runs inside the test host, on every variant: the
# libvirt integration tests.  The analyser's tests (unsteal_*) and the
# scheduler benchmark do not depend on the host's cgroup layout and run on
# the development host only.
TESTS_IN_HOST = ["lab_guest", "vcpu_cgroup_start", "vcpu_cgroup_daemon"]
# cgroup v1 moves vCPUs on live changes; v2 keeps placement while a domain
# runs (each test skips on the other).  With machined also the test that
# needs machined, the weights measured with CPU time (the one test that
# runs minutes) and the daemon killed during placement changes: the
# development host runs those two on v1; the other v2 rows by hand
# (docs/testhost.md).
TESTS_V1 = TESTS_IN_HOST + ["vcpu_cgroup_live"]
TESTS_V2 = TESTS_IN_HOST + ["vcpu_cgroup_v2"]
TESTS_WITH_MACHINED = TESTS_V2 + ["vcpu_cgroup_machined", "vcpu_cgroup_weights",
                                  "vcpu_cgroup_crash"]

VARIANTS = {
    "v2-systemd": {
        "desc": "cgroup v2 (unified), systemd 257 as PID 1 without machined; the tests run "
                "as a service",
        "append": "systemd.unified_cgroup_hierarchy=1 systemd.show_status=error "
                  "unsteal.machined=0",
        "tests": TESTS_V2,
    },
    "v2-machined": {
        "desc": "cgroup v2 (unified), systemd 257 with systemd-machined: domains are "
                "machines in scopes, the per-host partition is a slice",
        "append": "systemd.unified_cgroup_hierarchy=1 systemd.show_status=error",
        "tests": TESTS_WITH_MACHINED,
    },
    "v2-nosystemd": {
        "desc": "cgroup v2 mounted by a small init (no systemd); the tests run from it",
        "append": "init=/usr/local/sbin/unsteal-init unsteal.cgroup=v2",
        "tests": TESTS_V2,
    },
    "v1-systemd": {
        "desc": "cgroup v1 under systemd 257 (forced back to v1, what Debian 12 boots with "
                "systemd.unified_cgroup_hierarchy=0): cpu,cpuacct co-mounted plus systemd's "
                "empty v2 hierarchy",
        "append": "systemd.unified_cgroup_hierarchy=0 SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1 "
                  "systemd.show_status=error unsteal.machined=0",
        "tests": TESTS_V1,
    },
    "v1-comounted": {
        "desc": "cgroup v1, cpu and cpuacct co-mounted, every other controller on its own "
                "(no v2 hierarchy, no systemd)",
        "append": "init=/usr/local/sbin/unsteal-init unsteal.cgroup=v1-comounted",
        "tests": TESTS_V1,
    },
}
MEMORY_MB = 2048


# ---------------------------------------------------------------- roots

def _security_mirror():
    """URI of the machine's security archive (None without one)."""
    deb822 = "/etc/apt/sources.list.d/debian.sources"
    if os.path.exists(deb822):
        for stanza in re.split(r"\n\s*\n", open(deb822).read()):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and "security" in suites.group(1):
                return uris.group(1)
    if os.path.exists("/etc/apt/sources.list"):
        for line in open("/etc/apt/sources.list"):
            m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m and "security" in m.group(2):
                return m.group(1)
    return None


def _apt_sources():
    key = "/usr/share/keyrings/debian-archive-keyring.gpg"
    text = (f"Types: deb\nURIs: {sources.debian_mirror()}\nSuites: {SUITE} {SUITE}-updates\n"
            f"Components: main\nSigned-By: {key}\n")
    sec = _security_mirror()
    if sec:
        text += (f"\nTypes: deb\nURIs: {sec}\nSuites: {SUITE}-security\nComponents: main\n"
                 f"Signed-By: {key}\n")
    return text


def _key(*lists):
    h = hashlib.sha256(ROOT_FORMAT.encode())
    for lst in lists:
        h.update(("\n".join(sorted(lst)) + "\0").encode())
    return h.hexdigest()[:12]


def chroot(root, script, log, binds=(), net=True, check=True):
    """Run a bash script in a root.  Mounts (proc, sys, binds) live in a private
    mount namespace of the command and vanish with it; no process outlives it."""
    r = shlex.quote(root)
    setup = [f"mount -t proc proc {r}/proc", f"mount -t sysfs -o ro sys {r}/sys",
             f"mount -t tmpfs -o mode=1777 tmp {r}/dev/shm"]
    if net:
        setup.append(f"cp /etc/resolv.conf {r}/etc/resolv.conf")
    for src, dst in binds:
        d = shlex.quote(root + dst)
        setup.append(f"mkdir -p {d} && mount --bind {shlex.quote(src)} {d}")
    env = ["env", "-i", "PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
           "LC_ALL=C.UTF-8", "DEBIAN_FRONTEND=noninteractive", "CCACHE_DIR=/root/.ccache"]
    inner = shlex.join(["chroot", root] + env + ["bash", "-ec", script])
    # Without net: a network namespace of its own with nothing in it.
    cmd = ["nice", "-n", "19", "unshare", "--mount", "--propagation", "private", "--pid",
           "--fork"] + ([] if net else ["--net"]) + ["bash", "-ec", " && ".join(["mkdir -p " + r + "/dev/shm"] + setup)
           + " && exec " + inner]
    return run(cmd, log=log, check=check)


def _pack(tmp, path):
    step(f"testhost: packing {os.path.basename(path)}")
    run(["tar", "-C", tmp, "--zstd", "-cf", path + ".part", "."], quiet=True)
    os.rename(path + ".part", path)


def _unpack(tarball, dest):
    if os.path.exists(dest):
        _rmtree(dest)
    mkdirs(dest)
    run(["tar", "-C", dest, "--zstd", "-xf", tarball], quiet=True)
    os.chmod(dest, 0o755)


def _rmtree(path):
    with open("/proc/self/mounts") as fh:
        mounted = [ln.split()[1] for ln in fh if ln.split()[1].startswith(path + "/")]
    if mounted:
        raise LabError(f"{path} has mounts ({' '.join(mounted)}); not deleting it")
    shutil.rmtree(path)


def _local_repo(root, debs, version):
    """Make the .debs installable by name in root: a flat apt repository with a
    pin that prefers it, so that apt takes every libvirt package from our
    build even if the archive has a newer Debian revision."""
    repo = root + LOCAL_REPO
    mkdirs(repo)
    for d in debs:
        shutil.copy2(d, repo)
    with open(os.path.join(repo, "Packages"), "w") as fh:
        subprocess.run(["dpkg-scanpackages", "-m", ".", "/dev/null"], cwd=repo, stdout=fh,
                       stderr=subprocess.DEVNULL, check=True)
    _write(root + "/etc/apt/sources.list.d/unsteal-local.sources",
           f"Types: deb\nURIs: file:{LOCAL_REPO}\nSuites: ./\nTrusted: yes\n")
    _write(root + "/etc/apt/preferences.d/unsteal-local",
           "Package: *\nPin: origin \"\"\nPin-Priority: 1001\n")
    check = " ".join(PACKAGE_OURS)
    # After the install: every package of PACKAGE_OURS is ours, then the
    # repository goes (the image needs the installed packages only).
    return (f"\nfor p in {check}; do v=$(dpkg-query -W -f='${{Version}}' $p); "
            f"[ \"$v\" = {shlex.quote(version)} ] || {{ echo \"$p is $v, not {version}\"; "
            f"exit 1; }}; echo \"unsteal: $p $v\"; done\n"
            f"rm -rf {LOCAL_REPO} /etc/apt/sources.list.d/unsteal-local.sources "
            f"/etc/apt/preferences.d/unsteal-local\n")


def _cached_root(name, parent, packages, key, debs=None):
    """The tarball ~/.cache/unsteal/testhost/NAME-trixie-KEY.tar.zst, made once.

    debs: (version, [paths]) of our libvirt packages, installed from a local
    repository next to the archive's packages."""
    path = os.path.join(THCACHE, f"{name}-{SUITE}-{key}.tar.zst")
    if os.path.exists(path):
        return path
    mkdirs(THCACHE, LOGS)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return path
        tmp = tempfile.mkdtemp(dir=THCACHE, prefix=f"{name}-")
        try:
            if parent is None:
                if not shutil.which("debootstrap"):
                    raise LabError("debootstrap is missing: apt-get install debootstrap")
                step(f"testhost: debootstrap {SUITE} (minbase; log in _build/logs/"
                     f"testhost-debootstrap.log)")
                run(["nice", "-n", "19", "debootstrap", "--variant=minbase", SUITE, tmp,
                     sources.debian_mirror()], log=os.path.join(LOGS, "testhost-debootstrap.log"))
                with open(os.path.join(tmp, "etc/apt/sources.list.d/debian.sources"), "w") as fh:
                    fh.write(_apt_sources())
                if os.path.exists(os.path.join(tmp, "etc/apt/sources.list")):
                    os.unlink(os.path.join(tmp, "etc/apt/sources.list"))
                with open(os.path.join(tmp, "etc/apt/apt.conf.d/90unsteal"), "w") as fh:
                    fh.write('APT::Install-Recommends "false";\nAcquire::Retries "3";\n')
            else:
                _unpack(parent, tmp)
            # No service starts while packages are installed into the root.
            prc = os.path.join(tmp, "usr/sbin/policy-rc.d")
            with open(prc, "w") as fh:
                fh.write("#!/bin/sh\nexit 101\n")
            os.chmod(prc, 0o755)
            after = _local_repo(tmp, debs[1], debs[0]) if debs else ""
            step(f"testhost: {name} root: apt-get install {len(packages)} package(s)"
                 + (f", our libvirt {debs[0]} from {len(debs[1])} .deb(s)" if debs else "")
                 + f" (log in _build/logs/testhost-{name}-apt.log)")
            chroot(tmp, "apt-get update -q && apt-get install -y -q " + shlex.join(packages)
                   + after + "\napt-get clean && rm -rf /var/lib/apt/lists/*",
                   log=os.path.join(LOGS, f"testhost-{name}-apt.log"))
            os.unlink(prc)
            os.chmod(tmp, 0o755)
            _pack(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def base_tarball():
    return _cached_root("base", None, BASE_PACKAGES, _key(BASE_PACKAGES))


def build_tarball():
    base = base_tarball()
    return _cached_root("build", base, BUILD_PACKAGES, _key(BASE_PACKAGES, BUILD_PACKAGES))


# ---------------------------------------------------------------- libvirt for trixie

def _ensure_buildroot():
    """_build/testhost/buildroot, unpacked once per build tarball (kept for
    incremental builds: the meson build dirs live inside it)."""
    tar = build_tarball()
    stamp = os.path.join(TH, "buildroot.from")
    if os.path.isdir(BUILDROOT) and os.path.exists(stamp) and open(stamp).read() == tar:
        return BUILDROOT
    step(f"testhost: unpacking the build root into {BUILDROOT}")
    if os.path.exists(stamp):
        os.unlink(stamp)
    _unpack(tar, BUILDROOT)
    with open(stamp, "w") as fh:
        fh.write(tar)
    return BUILDROOT


def build_in_root(libvirt_from="tree"):
    """Our libvirt (libvirt_from 'tree' only) and the unsteal binary, built with
    trixie's toolchain and libraries."""
    from . import libvirt
    from .stack import ensure_worktree
    src = ensure_worktree(STACKS["libvirt"], quiet_reuse=True)
    root = _ensure_buildroot()
    ccache = os.path.join(os.path.expanduser("~"), ".cache", "ccache")
    mkdirs(ccache)
    binds = [(src, IN + "/src/libvirt"), (ROOT, IN + "/repo"), (ccache, "/root/.ccache")]
    opts = [f"--prefix={IN_PREFIX}", "--libdir=lib", f"-Drunstatedir={IN_PREFIX}/var/run",
            "--buildtype=debugoptimized", "-Dwerror=false"] + \
        [o for o in libvirt.MESON_OPTS if o != "-Dtests=enabled"] + ["-Dtests=disabled"]
    bdir = IN_BUILD + "/libvirt-build"
    stampf = os.path.join(root, bdir.lstrip("/"), ".unsteal-meson-opts")
    want = "\n".join(opts)
    have = open(stampf).read() if os.path.exists(stampf) else None
    if have == want:
        setup = ""
    elif have is None:
        setup = f"rm -rf {bdir}; meson setup {bdir} {IN}/src/libvirt {shlex.join(opts)}\n"
    else:
        setup = f"meson setup --reconfigure {bdir} {IN}/src/libvirt {shlex.join(opts)}\n"
    script = (setup + f"printf %s {shlex.quote(want)} > {bdir}/.unsteal-meson-opts\n"
              f"ninja -C {bdir}\n"
              f"meson install -C {bdir} --no-rebuild --quiet\n")
    if libvirt_from == "tree":
        step("testhost: building our libvirt (without its test suite, which tools/lab test "
             "runs on the development host) inside the trixie build root (incremental; log "
             "in _build/logs/testhost-libvirt-build.log)")
        chroot(root, script, os.path.join(LOGS, "testhost-libvirt-build.log"), binds=binds,
               net=False)
    ubdir = IN_BUILD + "/unsteal-build"
    script = (f"[ -f {ubdir}/build.ninja ] || meson setup {ubdir} {IN}/repo "
              f"-Dlab_build_dir={IN_BUILD}\n"
              f"ninja -C {ubdir} src/unsteal\n"
              f"mkdir -p {IN_BUILD}/bench {IN_BUILD}/images\n"
              f"as --32 -o /tmp/spin-boot.o {IN}/repo/tools/testhost/spin-boot.S\n"
              f"ld -m elf_i386 -Ttext 0x7c00 --oformat binary -o {IN_BUILD}/images/spin-boot.img "
              f"/tmp/spin-boot.o\n"
              f"gcc -O2 -Wall -Wextra -pthread -o {IN_BUILD}/bench/vcpu-spin "
              f"{IN}/repo/tools/bench/vcpu-spin.c\n")
    step("testhost: building unsteal and the benchmark spinner inside the build root")
    chroot(root, script, os.path.join(LOGS, "testhost-unsteal-build.log"), binds=binds,
           net=False)
    return root


def runtime_packages(root, libvirt_from="tree"):
    """Packages that provide the shared libraries our builds link against."""
    paths = ([IN_PREFIX] if libvirt_from == "tree" else []) + \
        [IN_BUILD + "/unsteal-build/src/unsteal", IN_BUILD + "/bench"]
    script = rf"""
find {' '.join(paths)} -type f \
    \( -perm -u+x -o -name '*.so*' \) -print0 |
  xargs -0 ldd 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u |
  while read -r lib; do
    case "$lib" in {IN_PREFIX}/*) continue ;; esac
    real=$(readlink -f "$lib")
    dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null ||
      dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null ||
      echo "UNOWNED: $lib"
  done > /tmp/unsteal-runtime-packages
"""
    log = os.path.join(LOGS, "testhost-runtime-packages.log")
    chroot(root, script, log, net=False)
    pkgs, bad = set(), []
    # dpkg -S prints "PKG[:ARCH][, PKG...]: PATH", and "diversion by ..." lines.
    for line in open(os.path.join(root, "tmp", "unsteal-runtime-packages")):
        if line.startswith("UNOWNED"):
            bad.append(line.split(None, 1)[1].strip())
        elif line.startswith("diversion by "):
            # A library moved to /usr keeps a diversion of its old path.
            pkgs.add(line.split()[2])
        elif ": /" in line:
            owners = line.split(": /", 1)[0]
            pkgs |= {o.strip().split(":")[0] for o in owners.split(",")}
    if bad:
        raise LabError(f"libraries our build links against belong to no package: {bad}")
    return sorted(pkgs)


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


def _write(path, text, mode=0o644):
    mkdirs(os.path.dirname(path))
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, mode)


def assemble(root_tar, buildroot, libvirt_from="tree", version=None):
    """_build/testhost/root: the cached runtime root plus our files."""
    step(f"testhost: assembling the root in {HOSTROOT}")
    _unpack(root_tar, HOSTROOT)
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
    for stack_dir in STACKS.values():
        rel = os.path.relpath(stack_dir, ROOT)
        mkdirs(r + IN + "/" + rel)
        shutil.copy2(os.path.join(stack_dir, "BASE"), r + IN + "/" + rel + "/BASE")
    # The spinner binary must look newer than its source (benchsched rebuilds otherwise).
    now = time.time()
    os.utime(r + IN_BUILD + "/bench/vcpu-spin", (now, now))
    _write(r + "/etc/hostname", "unsteal-testhost\n")
    _write(r + "/etc/fstab", "/dev/vda / ext4 rw,errors=remount-ro 0 1\n")
    _write(r + "/usr/local/sbin/unsteal-init", INIT, 0o755)
    if libvirt_from == "tree":
        libvirt_env = ""
        libvirt_desc = f"our work tree, built into {IN_PREFIX}"
    else:
        libvirt_env = "export UNSTEAL_LIBVIRT_PREFIX=/"
        libvirt_desc = f"Debian packages {version} (apt-installed, /usr/sbin/libvirtd)"
    runner = (RUNNER.replace("@IN_BUILD@", IN_BUILD).replace("@IN@", IN)
              .replace("@TESTS@", " ".join(integration_tests()))
              .replace("@LIBVIRT_ENV@", libvirt_env).replace("@LIBVIRT_DESC@", libvirt_desc))
    _write(r + "/usr/local/sbin/unsteal-testhost-run", runner, 0o755)
    _write(r + "/etc/systemd/system/unsteal-testhost.service", UNIT)
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
    from .stack import worktree_path
    return worktree_path(STACKS["libvirt"])


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


def package_debs(stack_dir=None):
    """(version, [.deb]) of 'tools/lab package libvirt' for the 11.3.0 stack,
    refused when they were built from another series than the one checked out."""
    from . import package
    from .common import read_kv
    from .stack import read_series
    stack_dir = stack_dir or STACKS["libvirt"]
    base = read_kv(os.path.join(stack_dir, "BASE"))
    version = package.local_version(base)
    out = package.outdir(base)
    rel = os.path.relpath(out, ROOT)
    debs = sorted(glob.glob(os.path.join(out, "*.deb")))
    dtar = glob.glob(os.path.join(out, "*.debian.tar.xz"))
    if not debs or not dtar or not os.path.exists(os.path.join(out, "SUMMARY")):
        raise LabError(f"no finished package build in {rel}: run tools/lab package libvirt "
                       f"first (docs/packaging.md; about 40 minutes the first time)")
    import tarfile
    series = read_series(stack_dir)
    with tarfile.open(dtar[0]) as tf:
        names = [m.name for m in tf.getmembers()]
        for name in series:
            member = f"debian/patches/{package.SUFFIX_NAME}/{name}"
            ours = open(os.path.join(stack_dir, name), "rb").read()
            if member not in names or tf.extractfile(member).read() != ours:
                raise LabError(f"the packages in {rel} were built from another series "
                               f"({name} differs or is missing): rebuild them with tools/lab "
                               f"package libvirt")
        extra = [n for n in names if n.startswith(f"debian/patches/{package.SUFFIX_NAME}/")
                 and os.path.basename(n) not in series]
        if extra:
            raise LabError(f"the packages in {rel} carry patches the series no longer has "
                           f"({', '.join(extra)}): rebuild them with tools/lab package libvirt")
    return version, debs


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
    pkgs = runtime_packages(broot, libvirt_from)
    step(f"testhost: runtime libraries come from {len(pkgs)} package(s): {' '.join(pkgs)}")
    pkgs = sorted(set(pkgs) | set(KERNEL_PACKAGES) | set(HOST_PACKAGES))
    if debs:
        pkgs = sorted(set(pkgs) | set(PACKAGE_INSTALL))
        h = hashlib.sha256()
        for d in debs[1]:
            h.update(os.path.basename(d).encode() + b"\0" + open(d, "rb").read())
        key = _key(BASE_PACKAGES, pkgs, [h.hexdigest()])
        root_tar = _cached_root("root-debs", base_tarball(), pkgs, key, debs=debs)
    else:
        root_tar = _cached_root("root", base_tarball(), pkgs, _key(BASE_PACKAGES, pkgs))
    root = assemble(root_tar, broot, libvirt_from, debs[0] if debs else None)
    make_image(root)
    _rmtree(root)
    with open(os.path.join(TH, "image.json"), "w") as fh:
        json.dump({"runtime_packages": pkgs, "root": os.path.basename(root_tar),
                   "libvirt": libvirt_from, "libvirt_version": debs[0] if debs else None}, fh)
    step(f"testhost: image ready in {time.monotonic() - t0:.0f} s")
    return IMAGE


def kernel_image():
    from . import kernel
    return kernel.build(patched=True, extra=KERNEL_EXTRA)


# ---------------------------------------------------------------- boot

RESULT_RE = re.compile(r"^(not ok|ok) (\d+) - (\S+)(.*)$")
SUB_RE = re.compile(r"^# (not ok|ok) \d+ - (.*)$")
ESCAPE_RE = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|c)")
SPLAT_RE = re.compile(r"(BUG: |WARNING: |Oops|general protection fault|Kernel panic - not "
                      r"syncing|kernel BUG at)")


class Outcome:
    def __init__(self):
        self.results = []       # (ok, name, skipped)
        self.subs = []          # (ok, test, description)
        self.current = None
        self.summary = None
        self.up_at = None       # seconds since QEMU started when the run began
        self.guest_uptime = None
        self.done = False
        self.timed_out = False
        self.splats = []
        self.info = []


def _parse(out, line, t_rel):
    line = ESCAPE_RE.sub("", line.replace("\r", ""))
    if "unsteal-testhost: " in line:
        # Terminal control sequences from the firmware or systemd may precede it.
        body = line.split("unsteal-testhost: ", 1)[1]
        if body.startswith("up "):
            out.up_at = t_rel
            out.guest_uptime = float(body.split()[1])
        if re.match(r"\d+ passed, \d+ failed", body):
            out.summary = body
        if body.startswith("done"):
            out.done = True
        out.info.append(body)
        return
    m = re.match(r"^# test: (\S+)", line)
    if m:
        out.current = m.group(1)
        return
    m = RESULT_RE.match(line)
    if m:
        out.results.append((m.group(1) == "ok", m.group(3), "# SKIP" in m.group(4)))
        return
    m = SUB_RE.match(line)
    if m:
        out.subs.append((m.group(1) == "ok", out.current, m.group(2)))
        return
    if SPLAT_RE.search(line):
        out.splats.append(line.strip())


def boot(variant, timeout=3600, tests=None, keep=False, kernel="ours"):
    if variant not in VARIANTS:
        raise LabError(f"unknown variant {variant!r}; one of {', '.join(VARIANTS)}")
    if not os.path.exists(IMAGE):
        raise LabError(f"{IMAGE} is missing: run tools/lab testhost build first")
    if kernel == "ours":
        boot_files = ["-kernel", kernel_image()]
    else:
        boot_files = ["-kernel", DEBIAN_KERNEL, "-initrd", DEBIAN_INITRD]
    overlay = os.path.join(TH, f"run-{variant}.qcow2")
    if os.path.exists(overlay):
        os.unlink(overlay)
    run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", IMAGE, overlay])
    append = ("root=/dev/vda rw console=ttyS0 loglevel=4 panic=-1 unsteal.run=1 "
              + VARIANTS[variant]["append"])
    if tests:
        append += " unsteal.tests=" + ",".join(tests)
    # One TCG thread for both vCPUs: with multi-threaded TCG the guest
    # kernel's live code patching (static keys, e.g. the CFS bandwidth key
    # that vCPU quotas flip) raced with the other vCPU and ended in an
    # "int3" oops in 3 of 10 boots on 2026-11-23; in one thread it cannot.
    cmd = ["nice", "-n", "19", "qemu-system-x86_64", "-accel", "tcg,thread=single",
           "-nographic", "-no-reboot", "-smp", "2", "-m", f"{MEMORY_MB}M", "-cpu", "max",
           "-nic", "none", "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe",
           "-append", append] + boot_files
    log = os.path.join(LOGS, f"testhost-{variant}.log")
    which = "our kernel" if kernel == "ours" else "Debian's kernel"
    step(f"testhost: booting {variant} ({which}): {VARIANTS[variant]['desc']} "
         f"(watchdog {timeout} s; "
         f"console in {os.path.relpath(log, ROOT)})")
    out = Outcome()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)

    def watchdog():
        out.timed_out = True
        proc.kill()

    timer = threading.Timer(timeout, watchdog)
    timer.start()
    try:
        with open(log, "w") as fh:
            fh.write("$ " + shlex.join(cmd) + "\n")
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                t_rel = time.monotonic() - t0
                fh.write(f"[{t_rel:7.1f}] {line}\n")
                fh.flush()
                print(line, flush=True)
                _parse(out, line, t_rel)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if not keep and os.path.exists(overlay):
            os.unlink(overlay)
    out.total = time.monotonic() - t0
    return out


def verdict(variant, out):
    passed = sum(1 for r in out.results if r[0] and not r[2])
    skipped = [r[1] for r in out.results if r[2]]
    failed = sum(1 for r in out.results if not r[0])
    sp = sum(1 for s in out.subs if s[0])
    sf = [s for s in out.subs if not s[0]]
    problems = []
    if not out.done:
        failed += 1
        problems.append("the test host did not finish its run ("
                        + ("watchdog expired" if out.timed_out else
                           "no 'up' line: it did not boot to the runner" if out.up_at is None
                           else "it stopped early") + ")")
    elif not out.results:
        failed += 1
        problems.append("the test host finished without reporting a test program")
    if out.splats:
        problems.append(f"kernel problem lines: {out.splats[0]}")
    up = f"{out.up_at:.1f} s" if out.up_at is not None else "never"
    step(f"testhost: {variant}: runner up after {up} (guest uptime "
         f"{out.guest_uptime} s), whole run {out.total:.0f} s")
    step(f"testhost: {variant}: test programs {passed} passed, {failed} failed"
         + (f", {len(skipped)} skipped ({', '.join(skipped)})" if skipped else "")
         + f"; assertions {sp} ok, {len(sf)} not ok")
    for s in sf:
        print(f"lab: testhost: {variant}: not ok: {s[1]}: {s[2]}", flush=True)
    for p in problems:
        print(f"lab: testhost: {variant}: {p}", flush=True)
    res = {"variant": variant, "up_s": out.up_at, "guest_uptime_s": out.guest_uptime,
           "total_s": out.total, "programs": [list(r) for r in out.results],
           "skipped": skipped,
           "assertions_ok": sp, "assertions_not_ok": [list(s) for s in sf],
           "problems": problems}
    with open(os.path.join(TH, f"result-{variant}.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    return passed, failed


def _lock():
    mkdirs(TH)
    lock = open(os.path.join(TH, "lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LabError(f"another tools/lab testhost runs on {TH}; wait for it to finish")
    return lock


def test_build():
    """tools/lab test: the image (our libvirt built from the work tree) and the
    lab kernel that every row boots."""
    lock = _lock()
    try:
        image = build()
        kernel_image()
        return image
    finally:
        lock.close()


def tests_in_host(variant):
    return VARIANTS[variant].get("tests", TESTS_IN_HOST)


def test_row(variant, timeout=1800):
    """tools/lab test: tests_in_host(variant) on one row of the matrix, booted
    with our kernel (test_build built it); (passed, failed) programs.

    A guest kernel that dies before the run ends (nested TCG has shown an
    int3 oops while the kernel patched its own code) gets one more boot;
    both outcomes are printed."""
    lock = _lock()
    try:
        out = boot(variant, timeout=timeout, tests=tests_in_host(variant), kernel="ours")
        if not out.done and out.splats and not out.timed_out:
            verdict(variant, out)
            step(f"testhost: {variant}: the guest kernel failed before the run ended "
                 f"({out.splats[0]}); booting it once more")
            out = boot(variant, timeout=timeout, tests=tests_in_host(variant), kernel="ours")
        return verdict(variant, out)
    finally:
        lock.close()


def command(args):
    from .common import require_root
    require_root("tools/lab testhost")
    lock = _lock()  # noqa: F841 (held until the command ends)
    if args.action == "build":
        build(args.libvirt)
        if args.kernel == "ours":
            kernel_image()
        return 0
    if args.action == "kernel":
        kernel_image()
        return 0
    variants = list(VARIANTS) if args.variant == "all" else [args.variant]
    matrix = args.tests == "matrix"
    tests = args.tests.split(",") if args.tests and not matrix else None
    known = integration_tests()
    for t in tests or []:
        if t not in known:
            raise LabError(f"unknown test {t!r}; 'matrix' or one of {', '.join(known)}")
    total_p = total_f = 0
    for v in variants:
        out = boot(v, timeout=args.timeout, tests=tests_in_host(v) if matrix else tests,
                   keep=args.keep, kernel=args.kernel)
        p, f = verdict(v, out)
        total_p += p
        total_f += f
    print(f"{total_p} passed, {total_f} failed", flush=True)
    return 1 if total_f else 0
