# SPDX-License-Identifier: GPL-2.0-or-later
"""The Debian roots of tools/lab testhost, and our builds in them.

Every root is of one release's suite (testhostrelease.py: trixie, or
bookworm for the 9.0.0 port), starts as mmdebstrap minbase from the
mirror of the machine's own apt sources and is installed with apt inside a
chroot (chroot.Root: a private mount namespace, so nothing stays mounted
and no process outlives the command).  Each root is made once and kept as
a tarball in ~/.cache/unsteal/testhost (delete at will):
  base-SUITE-KEY.tar.zst       mmdebstrap minbase with BASE_PACKAGES
  build-SUITE-KEY.tar.zst      base + BUILD_PACKAGES (the libvirt build root)
  root-SUITE-KEY.tar.zst       base + the runtime libraries of our build
  root-debs-SUITE-KEY.tar.zst  the same with our .debs (build --libvirt packages)
Each KEY is a hash of the root's package list (and of ROOT_FORMAT).

The release's patched libvirt, the unsteal binary, the benchmark's
spinner and the nested guests' images (spin boot sector, balloon kernel)
are built inside the build root, unpacked once into the release's
buildroot directory (_build/testhost/buildroot for Debian 13) where their
meson build dirs stay for incremental builds: they link against the
suite's libraries, and nothing built on the development host goes into
the test host.  The image is made from these roots in testhostimage.py.
"""

import glob
import hashlib
import itertools
import os
import shlex
import shutil
import subprocess

from ..build import CCACHE_DEPEND
from ..common import LabError, ROOT, logs_dir, mkdirs, run, step
from ..lab import guest
from ..package import chroot
from ..stack import sources
from .testhostrelease import DEFAULT, testhost_cache_dir

# Where things live inside the test host (and the build root): the lab's own
# layout, so that tools/lablib and the tests run there unchanged.
IN = "/unsteal"
IN_BUILD = IN + "/_build"


def in_prefix(rel=DEFAULT):
    """The release's libvirt build prefix inside the test host: the lab's own
    prefix of its stack (_build/prefix for libvirt's default stack,
    _build/prefix-libvirt-9.0 for the 9.0.0 port), so that the lab in the
    image, told the stack (UNSTEAL_LIBVIRT_STACK), finds it and names it."""
    return IN_BUILD + "/prefix" + rel.stack.suffix


# Stock libvirt (the default stack's base, without the series), built into
# the image on request (testhost build --stock) for vcpu_cgroup_inert, which
# compares it with ours: the lab's own stock prefix.
IN_STOCK_PREFIX = IN_BUILD + "/prefix-stock"


def check_stock(rel, libvirt_from):
    """Refuses --stock where there is no stock to compare with: the stock
    build is the default stack's base, beside our work tree's build."""
    if rel.stack.suffix or libvirt_from != "tree":
        raise LabError("--stock builds stock libvirt beside our work tree's build on "
                       "the default release (debian-13, --libvirt tree) only")

# The test host's root: minbase + these.  systemd-container (machined) is
# added to the runtime root (HOST_PACKAGES), not here, so that the build root
# does not change with it.
BASE_PACKAGES = ["systemd", "systemd-sysv", "udev", "dbus", "python3", "qemu-system-x86",
                 "procps", "util-linux", "dmidecode", "kmod"]
# The build root: the lab's libvirt build dependencies (sources.PACKAGES,
# the same names in trixie and bookworm), plus gcc for the unsteal binary
# and the benchmark's spinner.
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
#   tree      our patched work tree, built in the release's build root into
#             /unsteal/_build/prefix (what tools/lab test uses: it needs no
#             package build, which alone takes longer than CI may run);
#   packages  the .debs of 'tools/lab package libvirt', installed with apt the
#             way an operator installs them (PACKAGE_INSTALL pulls the rest);
#             the tests then drive the packaged daemon (/usr/sbin/libvirtd,
#             /etc/libvirt, /run/libvirt) through UNSTEAL_LIBVIRT_PREFIX=/.
LIBVIRT_FROM = ("tree", "packages")
PACKAGE_INSTALL = ["libvirt-daemon-system", "libvirt-clients"]
# With the packages, what the libvirt source package's machine-level
# autopkgtests need in the image, which has no network (libvirt_autopkgtest):
# autopkgtest itself with dpkg-source, and the tests' Depends (the LXC
# driver for Debian's smoke-lxc; libxml2-utils for its virt-xml-validate).
PACKAGE_TESTBED = ["autopkgtest", "dpkg-dev", "libxml2-utils", "libvirt-daemon-driver-lxc"]
# Packages whose versions must be ours after the install.
PACKAGE_OURS = ["libvirt0", "libvirt-daemon-driver-qemu", "libvirt-daemon-log",
                "libvirt-clients", "libvirt-daemon-system"]
LOCAL_REPO = "/var/local/unsteal-debs"
ROOT_FORMAT = "2"   # bump when the way roots are made changes (2: mmdebstrap)


# ---------------------------------------------------------------- roots

def _key(*lists):
    h = hashlib.sha256(ROOT_FORMAT.encode())
    for lst in lists:
        h.update(("\n".join(sorted(lst)) + "\0").encode())
    return h.hexdigest()[:12]


# Inside the roots: ccache in front of the compilers (in depend mode, as
# every lab build), its cache bind-mounted
CCACHE_ENV = {"PATH": "/usr/lib/ccache:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                      "/sbin:/bin",
              "CCACHE_DIR": "/root/.ccache", **CCACHE_DEPEND}


def in_root(root, script, log, binds=(), net=True, check=True):
    """Run a bash script in a root (chroot.Root: mounts in a private namespace
    of the command, no process outlives it), at the lowest priority."""
    return chroot.Root(None, root).run(script, log=log, net=net, check=check, env=CCACHE_ENV,
                                       binds=binds, nice=19)


def write_file(path, text, mode=0o644):
    mkdirs(os.path.dirname(path))
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, mode)


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
    write_file(root + "/etc/apt/sources.list.d/unsteal-local.sources",
               f"Types: deb\nURIs: file:{LOCAL_REPO}\nSuites: ./\nTrusted: yes\n")
    write_file(root + "/etc/apt/preferences.d/unsteal-local",
               "Package: *\nPin: origin \"\"\nPin-Priority: 1001\n")
    # Only the packages the .debs provide: a base's libvirt may lack one
    # (9.0.0 has no libvirt-daemon-log).
    names = {run(["dpkg-deb", "-f", d, "Package"], capture=True).stdout.strip() for d in debs}
    check = " ".join(p for p in PACKAGE_OURS if p in names)
    # After the install: every package of PACKAGE_OURS is ours, then the
    # repository goes (the image needs the installed packages only).
    return (f"\nfor p in {check}; do v=$(dpkg-query -W -f='${{Version}}' $p); "
            f"[ \"$v\" = {shlex.quote(version)} ] || {{ echo \"$p is $v, not {version}\"; "
            f"exit 1; }}; echo \"unsteal: $p $v\"; done\n"
            f"rm -rf {LOCAL_REPO} /etc/apt/sources.list.d/unsteal-local.sources "
            f"/etc/apt/preferences.d/unsteal-local\n")


def _cached_root(rel, name, parent, packages, key, debs=None):
    """The tarball ~/.cache/unsteal/testhost/NAME-SUITE-KEY.tar.zst of a
    release, made once.

    debs: (version, [paths]) of our libvirt packages, installed from a local
    repository next to the archive's packages."""
    def make(tmp):
        if parent is None:
            log = rel.log("mmdebstrap")
            step(f"testhost: mmdebstrap {rel.suite} (minbase with {len(packages)} package(s); "
                 f"log in {os.path.relpath(log, ROOT)})")
            chroot.mmdebstrap(rel.suite, tmp, "minbase", log, include=packages, nice=True)
            return
        chroot.unpack(parent, tmp)
        # No service starts while packages are installed into the root.
        prc = chroot.no_services(tmp)
        after = _local_repo(tmp, debs[1], debs[0]) if debs else ""
        log = rel.log(f"{name}-apt")
        step(f"testhost: {name} root ({rel.suite}): apt-get install {len(packages)} package(s)"
             + (f", our libvirt {debs[0]} from {len(debs[1])} .deb(s)" if debs else "")
             + f" (log in {os.path.relpath(log, ROOT)})")
        in_root(tmp, "apt-get update -q && apt-get install -y -q " + shlex.join(packages)
                + after + "\napt-get clean && rm -rf /var/lib/apt/lists/*", log=log)
        os.unlink(prc)

    mkdirs(logs_dir())
    return chroot.cached_root(
        os.path.join(testhost_cache_dir(), f"{name}-{rel.suite}-{key}.tar.zst"), make)


def base_tarball(rel=DEFAULT):
    return _cached_root(rel, "base", None, BASE_PACKAGES, _key(BASE_PACKAGES))


def build_tarball(rel=DEFAULT):
    base = base_tarball(rel)
    return _cached_root(rel, "build", base, BUILD_PACKAGES,
                        _key(BASE_PACKAGES, BUILD_PACKAGES))


# ---------------------------------------------------------------- libvirt for the release

def _ensure_buildroot(rel):
    """The release's build root, unpacked once per build tarball (kept for
    incremental builds: the meson build dirs live inside it)."""
    tar = build_tarball(rel)
    root = rel.buildroot
    stamp = os.path.join(rel.dir, "buildroot.from")
    if os.path.isdir(root) and os.path.exists(stamp) and open(stamp).read() == tar:
        return root
    step(f"testhost: unpacking the build root into {os.path.relpath(root, ROOT)}")
    if os.path.exists(stamp):
        os.unlink(stamp)
    mkdirs(rel.dir)
    chroot.unpack(tar, root)
    with open(stamp, "w") as fh:
        fh.write(tar)
    return root


def _libvirt_script(root, src, bdir, prefix, extra=()):
    """The shell script that configures (when its options changed), builds
    and installs the libvirt tree mounted at src into prefix, in bdir of
    the build root; extra: more meson options."""
    from ..build import libvirt
    opts = [f"--prefix={prefix}", "--libdir=lib", f"-Drunstatedir={prefix}/var/run",
            f"--buildtype={libvirt.BUILDTYPE}", "-Dwerror=false"] + \
        [o for o in libvirt.MESON_OPTS if o != "-Dtests=enabled"] + ["-Dtests=disabled"] + \
        list(extra)
    stampf = os.path.join(root, bdir.lstrip("/"), ".unsteal-meson-opts")
    want = "\n".join(opts)
    have = open(stampf).read() if os.path.exists(stampf) else None
    if have == want:
        setup = ""
    elif have is None:
        setup = f"rm -rf {bdir}; meson setup {bdir} {src} {shlex.join(opts)}\n"
    else:
        setup = f"meson setup --reconfigure {bdir} {src} {shlex.join(opts)}\n"
    return (setup + f"printf %s {shlex.quote(want)} > {bdir}/.unsteal-meson-opts\n"
            f"ninja -C {bdir}\n"
            f"meson install -C {bdir} --no-rebuild --quiet\n")


def build_in_root(libvirt_from="tree", rel=DEFAULT, stock=False):
    """The release's libvirt stack (libvirt_from 'tree' only), with stock
    also libvirt at its base (build() checks that it may), and the unsteal
    binary, built with the suite's toolchain and libraries."""
    from ..build import libvirt
    from ..stack.patchqueue import ensure_worktree
    src = ensure_worktree(rel.stack.dir, quiet_reuse=True)
    root = _ensure_buildroot(rel)
    ccache = os.path.join(os.path.expanduser("~"), ".cache", "ccache")
    mkdirs(ccache)
    binds = [(src, IN + "/src/libvirt"), (ROOT, IN + "/repo"), (ccache, "/root/.ccache")]
    if libvirt_from == "tree":
        log = rel.log("libvirt-build")
        step(f"testhost: building our libvirt {rel.stack.version} (without its test suite, "
             f"which tools/lab test runs on the development host) inside the {rel.suite} "
             f"build root (incremental; log in {os.path.relpath(log, ROOT)})")
        in_root(root, _libvirt_script(root, IN + "/src/libvirt", IN_BUILD + "/libvirt-build",
                                      in_prefix(rel)),
                log, binds=binds, net=False)
    if stock:
        log = rel.log("libvirt-stock-build")
        step(f"testhost: building stock libvirt {rel.stack.version} (the base without the "
             f"series) inside the {rel.suite} build root (incremental, about 10 minutes "
             f"cold; log in {os.path.relpath(log, ROOT)})")
        in_root(root, _libvirt_script(root, IN + "/src/libvirt-stock",
                                      IN_BUILD + "/libvirt-stock-build", IN_STOCK_PREFIX,
                                      # its .git names the patched tree's repository,
                                      # which the build root does not have
                                      extra=["-Dno_git=true"]),
                log, binds=binds + [(libvirt.stock_tree(), IN + "/src/libvirt-stock")],
                net=False)
    ubdir = IN_BUILD + "/unsteal-build"
    script = (f"[ -f {ubdir}/build.ninja ] || meson setup {ubdir} {IN}/repo "
              f"-Dlab_build_dir={IN_BUILD}\n"
              f"ninja -C {ubdir} src/unsteal\n"
              f"mkdir -p {IN_BUILD}/bench {IN_BUILD}/images\n"
              f"as --32 -o /tmp/spin-boot.o {IN}/repo/tools/testhost/spin-boot.S\n"
              f"ld -m elf_i386 -Ttext 0x7c00 --oformat binary -o {IN_BUILD}/images/spin-boot.img "
              f"/tmp/spin-boot.o\n"
              + "".join(shlex.join(argv) + "\n" for argv in guest.balloon_build_commands(
                  f"{IN}/repo/tools/testhost/balloon-guest.c",
                  f"{IN_BUILD}/images/{guest.BALLOON_NAME}")) +
              f"gcc -O2 -Wall -Wextra -pthread -o {IN_BUILD}/bench/vcpu-spin "
              f"{IN}/repo/tools/bench/vcpu-spin.c\n")
    step("testhost: building unsteal, the benchmark spinner and the guest images inside "
         "the build root")
    in_root(root, script, rel.log("unsteal-build"), binds=binds, net=False)
    return root


def runtime_packages(root, libvirt_from="tree", rel=DEFAULT, stock=False):
    """Packages that provide the shared libraries our builds link against."""
    prefix = in_prefix(rel)
    paths = ([prefix] if libvirt_from == "tree" else []) + \
        ([IN_STOCK_PREFIX] if stock else []) + \
        [IN_BUILD + "/unsteal-build/src/unsteal", IN_BUILD + "/bench"]
    script = rf"""
find {' '.join(paths)} -type f \
    \( -perm -u+x -o -name '*.so*' \) -print0 |
  xargs -0 ldd 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u |
  while read -r lib; do
    case "$lib" in {prefix}/*|{IN_STOCK_PREFIX}/*) continue ;; esac
    real=$(readlink -f "$lib")
    dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null ||
      dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null ||
      echo "UNOWNED: $lib"
  done > /tmp/unsteal-runtime-packages
"""
    in_root(root, script, rel.log("runtime-packages"), net=False)
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


# ---------------------------------------------------------------- the runtime root

def package_debs(stack_dir=None):
    """(version, [.deb]) of 'tools/lab package libvirt' for a stack (the
    11.3.0 one by default), refused when they were built from another series
    than the one checked out."""
    from ..package import libvirt_deb
    from ..common import read_kv
    from ..stack.patchqueue import read_series
    stack_dir = stack_dir or DEFAULT.stack.dir
    base = read_kv(os.path.join(stack_dir, "BASE"))
    version = libvirt_deb.local_version(base)
    out = libvirt_deb.outdir(base)
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
            member = f"debian/patches/{libvirt_deb.SUFFIX_NAME}/{name}"
            ours = open(os.path.join(stack_dir, name), "rb").read()
            if member not in names or tf.extractfile(member).read() != ours:
                raise LabError(f"the packages in {rel} were built from another series "
                               f"({name} differs or is missing): rebuild them with tools/lab "
                               f"package libvirt")
        extra = [n for n in names if n.startswith(f"debian/patches/{libvirt_deb.SUFFIX_NAME}/")
                 and os.path.basename(n) not in series]
        if extra:
            raise LabError(f"the packages in {rel} carry patches the series no longer has "
                           f"({', '.join(extra)}): rebuild them with tools/lab package libvirt")
    return version, debs


# Where the image has the libvirt source package of its .debs, for the
# machine-level autopkgtests (tests/integration/test_libvirt_autopkgtest.py).
IN_SOURCE_PACKAGE = IN_BUILD + "/packages"


def package_source(stack_dir=None):
    """The source package (.dsc and its tarballs) beside package_debs()'s
    .debs: the one they were built from."""
    from ..package import libvirt_deb
    from ..common import read_kv
    base = read_kv(os.path.join(stack_dir or DEFAULT.stack.dir, "BASE"))
    out = libvirt_deb.outdir(base)
    dsc = glob.glob(os.path.join(out, "*.dsc"))
    if len(dsc) != 1:
        raise LabError(f"{os.path.relpath(out, ROOT)} has {len(dsc)} .dsc files, not one")
    lines = open(dsc[0]).read().split("\nFiles:\n", 1)[1].split("\n")
    files = [dsc[0]] + [os.path.join(out, ln.split()[-1]) for ln in
                        itertools.takewhile(lambda ln: ln.startswith(" "), lines)]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise LabError(f"the source package lacks {', '.join(missing)}")
    return files


def runtime_tarball(buildroot, libvirt_from="tree", debs=None, extra=(), rel=DEFAULT,
                    stock=False):
    """The cached runtime root of a release for what build_in_root() built in
    buildroot: base plus the packages of its shared libraries,
    KERNEL_PACKAGES, HOST_PACKAGES and extra (with debs from package_debs(),
    also PACKAGE_INSTALL, PACKAGE_TESTBED and our .debs); (tarball, its
    package list)."""
    pkgs = runtime_packages(buildroot, libvirt_from, rel, stock)
    step(f"testhost: runtime libraries come from {len(pkgs)} package(s): {' '.join(pkgs)}")
    pkgs = sorted(set(pkgs) | set(KERNEL_PACKAGES) | set(HOST_PACKAGES) | set(extra))
    if debs:
        pkgs = sorted(set(pkgs) | set(PACKAGE_INSTALL) | set(PACKAGE_TESTBED))
        h = hashlib.sha256()
        for d in debs[1]:
            h.update(os.path.basename(d).encode() + b"\0" + open(d, "rb").read())
        key = _key(BASE_PACKAGES, pkgs, [h.hexdigest()])
        return _cached_root(rel, "root-debs", base_tarball(rel), pkgs, key, debs=debs), pkgs
    return (_cached_root(rel, "root", base_tarball(rel), pkgs, _key(BASE_PACKAGES, pkgs)),
            pkgs)
