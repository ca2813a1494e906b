# SPDX-License-Identifier: GPL-2.0-or-later
"""Throwaway Debian roots for package builds and installation checks.

A root of a suite (trixie, bookworm, ...) is made once with mmdebstrap from
the mirror of the machine's own apt sources and cached as a tarball under
~/.cache/unsteal/chroots.  Every build or check unpacks a fresh copy under
_build/ and deletes it afterwards.

Commands run inside the root through 'unshare --mount --pid --fork': /proc,
/sys (read-only), /dev/pts and /dev/shm are mounted in a private mount
namespace, so they vanish with the command, even when it fails or is
interrupted; nothing stays mounted on the host and no process outlives the
command.  With net=False the command also gets its own network namespace
with only loopback up (package builds run offline, as on Debian's buildds).
"""

import fcntl
import os
import platform
import re
import shlex
import shutil
import tempfile

from ..common import LabError, cache_dir, logs_dir, mkdirs, run, step
from ..stack import sources



def chroots_dir():
    """Where the roots' tarballs are cached."""
    return os.path.join(cache_dir(), "chroots")


# Part of every cached root's name: bump it when the way roots are made
# changes, and every cached root (and every root made from one) is made anew.
ROOT_FORMAT = "mm1"

# Packages of every root besides mmdebstrap's buildd variant.
BASE_EXTRA = ["fakeroot", "lintian", "iproute2"]


def host_arch():
    p = run(["dpkg", "--print-architecture"], capture=True)
    return p.stdout.strip() or platform.machine()


def _security_mirror():
    """The machine's security archive URI, or None when it has none configured."""
    deb822 = "/etc/apt/sources.list.d/debian.sources"
    if os.path.exists(deb822):
        with open(deb822) as fh:
            for stanza in re.split(r"\n\s*\n", fh.read()):
                uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
                if uris and suites and "security" in suites.group(1):
                    return uris.group(1)
    if os.path.exists("/etc/apt/sources.list"):
        with open("/etc/apt/sources.list") as fh:
            for line in fh:
                m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
                if m and "security" in m.group(2):
                    return m.group(1)
    return None


def apt_sources(suite):
    """deb822 sources of a root: the suite, its -updates and its security suite."""
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    text = (f"Types: deb\nURIs: {sources.debian_mirror()}\n"
            f"Suites: {suite} {suite}-updates\nComponents: main\nSigned-By: {keyring}\n")
    sec = _security_mirror()
    if sec:
        text += (f"\nTypes: deb\nURIs: {sec}\nSuites: {suite}-security\nComponents: main\n"
                 f"Signed-By: {keyring}\n")
    return text


def tar_args():
    return ["--zstd"] if shutil.which("zstd") else []


def mmdebstrap(suite, dest, variant, log, include=(), keep_lists=False, nice=False):
    """A fresh root of the suite in dest, made by mmdebstrap VARIANT from the
    mirror of the machine's own apt sources (the suite, -updates and
    -security in deb822, kept as the root's apt sources), with the packages
    of include, recommends off and retries on.  keep_lists keeps apt's
    package lists (mmdebstrap removes them), for a root that installs more
    packages without an apt-get update of its own (autopkgtest's testbed)."""
    if not shutil.which("mmdebstrap"):
        raise LabError("mmdebstrap is missing; run tools/lab setup")
    with tempfile.TemporaryDirectory(prefix="unsteal-sources-") as tmp:
        src = os.path.join(tmp, "debian.sources")
        with open(src, "w") as fh:
            fh.write(apt_sources(suite))
        cmd = ["mmdebstrap", "--mode=root", f"--variant={variant}",
               f"--architectures={host_arch()}",
               "--aptopt=APT::Install-Recommends \"false\"",
               "--aptopt=Acquire::Retries \"3\""]
        if include:
            cmd.append("--include=" + ",".join(include))
        if keep_lists:
            cmd.append("--skip=cleanup/apt/lists")
        run((["nice", "-n", "19"] if nice else []) + cmd + [suite, dest, src], log=log)
    # The root's apt sources: ours, under the name Debian's installer uses.
    lists = os.path.join(dest, "etc/apt/sources.list.d")
    for name in os.listdir(lists):
        os.unlink(os.path.join(lists, name))
    lst = os.path.join(dest, "etc/apt/sources.list")
    if os.path.exists(lst):
        os.unlink(lst)
    with open(os.path.join(lists, "debian.sources"), "w") as fh:
        fh.write(apt_sources(suite))


def no_services(root):
    """Keeps services from starting inside root while packages are installed
    (policy-rc.d); returns its path, for a root that must lose it later."""
    prc = os.path.join(root, "usr/sbin/policy-rc.d")
    with open(prc, "w") as fh:
        fh.write("#!/bin/sh\n# unsteal: no daemons start while the root is made\nexit 101\n")
    os.chmod(prc, 0o755)
    return prc


def pack(tmp, path):
    """tmp as the tarball path (written beside it, then renamed)."""
    step(f"chroot: packing {os.path.basename(path)}")
    run(["tar", "-C", tmp, "-cf", path + ".part"] + tar_args() + ["."], quiet=True)
    os.rename(path + ".part", path)


def unpack(tarball, dest):
    """A fresh copy of a root tarball in dest (whatever was there is removed)."""
    if os.path.exists(dest):
        rmtree(dest)
    mkdirs(dest)
    step(f"chroot: unpacking {os.path.basename(tarball)} into {dest}")
    run(["tar", "-C", dest, "-xf", tarball] + tar_args(), quiet=True)
    os.chmod(dest, 0o755)  # '/' of the root, for the unprivileged build user


def rmtree(path):
    """Deletes a root; refuses to delete through a mount (there never is one:
    mounts live in the private namespace of each command)."""
    with open("/proc/self/mounts") as fh:
        mounted = [ln.split()[1] for ln in fh if ln.split()[1].startswith(path + "/")]
    if mounted:
        raise LabError(f"{path} has mounts ({' '.join(mounted)}); not deleting it")
    shutil.rmtree(path)


def cached_root(path, make):
    """The root tarball at path, made once: make(tmp) fills a fresh directory
    beside it, which is then packed.  Concurrent callers wait on a lock and
    the first one's tarball serves them all."""
    if os.path.exists(path):
        return path
    mkdirs(os.path.dirname(path))
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return path
        tmp = tempfile.mkdtemp(dir=os.path.dirname(path),
                               prefix=os.path.basename(path).split(".")[0] + "-")
        try:
            make(tmp)
            os.chmod(tmp, 0o755)  # mkdtemp made it 0700; it is the root's '/'
            pack(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def base_tarball(suite):
    """The cached tarball of a fresh buildd root of the suite (made once)."""
    arch = host_arch()

    def make(tmp):
        log = os.path.join(logs_dir(), f"mmdebstrap-{suite}.log")
        step(f"chroot: mmdebstrap {suite} ({arch}, buildd variant, with "
             f"{', '.join(BASE_EXTRA)}; one-off, cached in {chroots_dir()}; log in {log})")
        mmdebstrap(suite, tmp, "buildd", log, include=BASE_EXTRA, keep_lists=True)
        no_services(tmp)
        run(["chroot", tmp, "useradd", "-m", "-u", "2000", "-s", "/bin/sh", "builder"])

    return cached_root(os.path.join(chroots_dir(), f"{suite}-{arch}-buildd-{ROOT_FORMAT}.tar.zst"),
                       make)


class Root:
    """A throwaway root unpacked from a cached tarball; remove() deletes it."""

    def __init__(self, tarball, path):
        self.path = path
        if tarball is not None:
            unpack(tarball, path)

    def remove(self):
        if os.path.exists(self.path):
            rmtree(self.path)

    def run(self, script, user=None, net=True, log=None, quiet=True, check=True, env=None,
            nice=10, binds=()):
        """Run a shell script inside the root (as root, or as 'builder')."""
        return run(self.argv(script, user=user, net=net, env=env, nice=nice, binds=binds),
                   log=log, quiet=quiet and not log, check=check)

    def argv(self, script, user=None, net=True, env=None, nice=10, binds=()):
        """The command line that runs a shell script inside the root: a
        private mount and PID namespace (and network, with net=False).
        env adds to or overrides the root's environment; binds are
        (host path, path in the root) mounted for the command only; nice is
        the command's niceness (0: none)."""
        envs = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
                "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": "/home/builder" if user else "/root"}
        envs.update(env or {})
        inner = ["env", "-i"] + [f"{k}={v}" for k, v in envs.items()] + ["bash", "-ec", script]
        if user:
            inner = ["runuser", "-u", user, "--"] + inner
        r = shlex.quote(self.path)
        setup = (f"mount -t proc proc {r}/proc && "
                 f"mount -t sysfs -o ro sysfs {r}/sys && "
                 f"mkdir -p {r}/dev/pts {r}/dev/shm && "
                 f"mount -t devpts -o newinstance,ptmxmode=0666 devpts {r}/dev/pts && "
                 f"mount -t tmpfs -o mode=1777 tmpfs {r}/dev/shm && "
                 f"cp /etc/resolv.conf {r}/etc/resolv.conf 2>/dev/null || true; ")
        for src, dst in binds:
            d = shlex.quote(self.path + dst)
            setup += f"mkdir -p {d} && mount --bind {shlex.quote(src)} {d} && "
        if not net:
            setup += "ip link set lo up && "
        cmd = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork"]
        if not net:
            cmd.append("--net")
        if nice:
            cmd = ["nice", "-n", str(nice)] + cmd
        # bash stays PID 1 of the namespace (no exec): it reaps orphaned
        # processes, which runuser would leave as zombies (libvirt's
        # commandtest waits for daemonised children to go away).
        cmd += ["bash", "-ec", setup + f"chroot {r} " + shlex.join(inner) + "; exit $?"]
        return cmd
