# SPDX-License-Identifier: GPL-2.0-or-later
"""Build the patched libvirt (qemu driver and what it needs) into a private prefix.

Every libvirt stack (tools/lab's keys 'libvirt', 'libvirt-9.0') has its own
build directory, prefix and logs, so that builds of both bases live side by
side: stack KEY builds in _build/KEY-build and installs into _build/prefix
(libvirt's default stack, the 11.3.0 one) or _build/prefix-KEY (any other;
see stacks.Stack.suffix).
"""

import os
import shutil

from ..common import LabError, build_dir, logs_dir, run, step
from .. import config
from . import CCACHE_DEPEND, mesonlog
from ..stack import stacks


def builddir(stack):
    return os.path.join(build_dir(), f"{stack.key}-build")


def prefix(stack):
    return os.path.join(build_dir(), f"prefix{stack.suffix}")


def logpath(name, what):
    """_build/logs/NAME-WHAT.log: libvirt-build.log, libvirt-9.0-test.log, ..."""
    return os.path.join(logs_dir(), f"{name}-{what}.log")


def check_stack(stack):
    if stack.package != "libvirt":
        raise LabError(f"{stack.key!r} is not a libvirt stack; libvirt stacks: "
                       f"{' '.join(s.key for s in stacks.of_package('libvirt'))}")
    return stack


def lab_prefix(cfg=None):
    """The install the lab daemon runs: the build of the configuration's
    libvirt stack (stacks.lab_libvirt(): UNSTEAL_LIBVIRT_STACK, default
    libvirt's default stack), or its libvirt_prefix.
    UNSTEAL_LIBVIRT_PREFIX=/ runs the libvirt that Debian's packages
    installed instead: on a merged-/usr Debian root every path the lab
    derives from the prefix (sbin/virtqemud, bin/virsh,
    etc/libvirt/qemu.conf, var/run/libvirt, var/log/libvirt) is where the
    packages put it.  The test host uses this when its image carries our
    .debs (tools/lab testhost build --libvirt packages)."""
    cfg = cfg or config.get()
    return cfg.libvirt_prefix or prefix(stacks.lab_libvirt(cfg))

# Everything the qemu driver and its tests need; every other driver is off so
# that a build takes about two minutes on two cores.
MESON_OPTS = [
    "-Ddriver_qemu=enabled", "-Ddriver_remote=enabled", "-Ddriver_libvirtd=enabled",
    "-Ddriver_test=enabled",
    "-Ddriver_bhyve=disabled", "-Ddriver_esx=disabled", "-Ddriver_hyperv=disabled",
    "-Ddriver_interface=disabled", "-Ddriver_libxl=disabled", "-Ddriver_lxc=disabled",
    "-Ddriver_ch=disabled", "-Ddriver_network=disabled", "-Ddriver_openvz=disabled",
    "-Ddriver_secrets=disabled", "-Ddriver_vbox=disabled", "-Ddriver_vmware=disabled",
    "-Ddriver_vz=disabled",
    "-Dstorage_dir=disabled", "-Dstorage_disk=disabled", "-Dstorage_fs=disabled",
    "-Dstorage_gluster=disabled", "-Dstorage_iscsi=disabled",
    "-Dstorage_iscsi_direct=disabled", "-Dstorage_lvm=disabled", "-Dstorage_mpath=disabled",
    "-Dstorage_rbd=disabled", "-Dstorage_scsi=disabled", "-Dstorage_vstorage=disabled",
    "-Dstorage_zfs=disabled",
    "-Ddocs=disabled", "-Dtests=enabled", "-Dexpensive_tests=disabled", "-Dnls=disabled",
    "-Dapparmor=disabled", "-Dsecdriver_apparmor=disabled", "-Dselinux=disabled",
    "-Dsecdriver_selinux=disabled", "-Dpolkit=disabled", "-Dfirewalld=disabled",
    "-Dfirewalld_zone=disabled", "-Dwireshark_dissector=disabled", "-Dsasl=disabled",
    "-Dbash_completion=disabled", "-Dinit_script=none", "-Dsysctl_config=disabled",
    "-Dapparmor_profiles=disabled",
    # The lab runs QEMU as root: the compiled-in default user must exist.
    "-Dqemu_user=root", "-Dqemu_group=root",
]


# Every lab build of libvirt (the patched stacks, stock libvirt, the check
# trees, the test host's) uses meson's debug build type, -O0 -g: the 11.3.0
# tree with its tests compiles in 74 s against 131 s for debugoptimized
# (-O2 -g; 2-core VM, ccache off), and the development host's integration
# tests took as long against it (docs/results/2026-11-29-ci-cold-this-machine.md).
# Debug info stays, so libvirt's check-*_protocol tests still compare the
# RPC structs (without it they pass without checking anything).  The
# packages build with Debian's flags.
BUILDTYPE = "debug"


def meson_env():
    """Debian's meson and libvirt's build scripts want the system python.
    ccache must not hash the build directory (libvirt builds with -g, which
    makes ccache hash the working directory by default) and rewrites
    absolute paths below _build into relative ones: otherwise a clone in
    another directory, as CI's, misses the cache for every file (6 % hits
    measured) and compiles libvirt from scratch.  The objects' debug info
    then names the directory of the build that filled the cache."""
    return {"PATH": "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin",
            "CCACHE_BASEDIR": build_dir(), "CCACHE_NOHASHDIR": "1", **CCACHE_DEPEND}


def configure(src, bdir, pfx, log, tests=True):
    """meson setup (or --reconfigure when the options changed) of src in
    bdir for the prefix pfx; tests=False leaves libvirt's test programs
    out, for a build whose suite nothing runs."""
    opts = [f"--prefix={pfx}", "--libdir=lib", f"-Drunstatedir={pfx}/var/run",
            f"--buildtype={BUILDTYPE}", "-Dwerror=false"] + MESON_OPTS
    if not tests:
        opts = [("-Dtests=disabled" if o == "-Dtests=enabled" else o) for o in opts]
    stamp = os.path.join(bdir, ".unsteal-meson-opts")
    if os.path.exists(os.path.join(bdir, "build.ninja")):
        if os.path.exists(stamp) and open(stamp).read() == "\n".join(opts):
            return
        step(f"libvirt: meson options changed; reconfiguring {bdir}")
        cmd = ["meson", "setup", "--reconfigure", bdir, src]
    else:
        step(f"libvirt: meson setup {bdir}")
        cmd = ["meson", "setup", bdir, src]
    run(cmd + opts, env=meson_env(), quiet=True, log=log)
    with open(stamp, "w") as fh:
        fh.write("\n".join(opts))


def build(install=True, stack=None):
    """Build (and install) one libvirt stack's work tree (default: the lab's)
    into its own prefix."""
    from ..stack.patchqueue import ensure_worktree
    stack = check_stack(stack or stacks.lab_libvirt())
    src = ensure_worktree(stack.dir)
    bdir, pfx = builddir(stack), prefix(stack)
    configure(src, bdir, pfx, logpath(stack.key, "meson-setup"))
    log = logpath(stack.key, "build")
    step(f"libvirt: ninja {os.path.basename(bdir)} (incremental; log in {log})")
    run(["ninja", "-C", bdir], env=meson_env(), log=log)
    if install:
        step(f"libvirt: installing into {pfx}")
        run(["meson", "install", "-C", bdir, "--no-rebuild", "--quiet"], env=meson_env(),
            log=logpath(stack.key, "install"))
    return src


def stock_prefix():
    """Where build_stock() installs stock libvirt."""
    return os.path.join(build_dir(), "prefix-stock")


def stock_builddir():
    return os.path.join(build_dir(), "libvirt-stock-build")


def stock_tree():
    """The work tree of libvirt at the pinned base of the default stack,
    without the series: a second git work tree of the same repository at
    the base tag (_build/src/libvirt-stock), made when missing."""
    from ..stack.patchqueue import add_untracked, ensure_worktree
    patched = stacks.default("libvirt")
    wt = ensure_worktree(patched.dir, quiet_reuse=True)
    src = wt + "-stock"
    if os.path.isdir(src) and run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=src,
                                  check=False, capture=True).returncode != 0:
        # The patched work tree was recreated: its worktree record is gone.
        shutil.rmtree(src)
    if not os.path.isdir(src):
        step(f"libvirt: checking out the stock base into {src}")
        run(["git", "worktree", "add", "-f", "--detach", src, "base"], cwd=wt, quiet=True)
        add_untracked(patched.dir, src)
    return src


def build_stock():
    """libvirt at the pinned base, without the series, into its own prefix.

    The control-plane benchmark and vcpu_cgroup_inert compare it with the
    patched build.  Nothing runs its test suite, so its test programs are
    not built (138 of the 551 compile units of 11.3.0, and their links).
    """
    src, bdir, pfx = stock_tree(), stock_builddir(), stock_prefix()
    configure(src, bdir, pfx, logpath("libvirt-stock", "meson-setup"), tests=False)
    log = logpath("libvirt-stock", "build")
    step(f"libvirt: building stock libvirt (log in {log})")
    run(["ninja", "-C", bdir], env=meson_env(), log=log)
    run(["meson", "install", "-C", bdir, "--no-rebuild", "--quiet"], env=meson_env(),
        log=logpath("libvirt-stock", "install"))
    return pfx


def build_tree(tree, what):
    """Build a check tree (used by 'tools/lab check STACK --build-each')."""
    bdir = tree + "-build"
    log = os.path.join(logs_dir(), f"check-{os.path.basename(tree)}-build.log")
    configure(tree, bdir, os.path.join(bdir, "prefix"), log)
    p = run(["ninja", "-C", bdir], env=meson_env(), check=False, log=log)
    if p.returncode != 0:
        raise LabError(f"libvirt does not build with {what}; see {log}")


def test_suite(syntax_check=True, stack=None):
    """libvirt's own test suite on a stack's patched tree (default: the lab's)
    and syntax-check.

    Returns Counts, one unit per meson test (mesonlog.results()).
    """
    stack = stack or stacks.lab_libvirt()
    build(install=False, stack=stack)
    bdir = builddir(stack)
    log = logpath(stack.key, "test")
    step(f"libvirt: meson test in {os.path.basename(bdir)} (libvirt's own suite; log in {log})")
    p = run(["meson", "test", "-C", bdir, "--no-rebuild", "--print-errorlogs",
             "--no-suite", "syntax-check"], env=meson_env(), check=False, log=log)
    counts = mesonlog.results(bdir)
    if p.returncode != 0 and not counts.failed:
        raise LabError(f"libvirt's test suite failed ({mesonlog.describe(counts)}); see {log}")
    for name in _not_ok(bdir, OUR_TESTS):
        counts.failed += 1
        counts.why.append(f"{name} did not run and pass in libvirt's suite; see {log}")
    step(f"libvirt: test suite: {mesonlog.describe(counts)}")
    if syntax_check:
        step("libvirt: syntax-check")
        slog = logpath(stack.key, "syntax-check")
        p = run(["meson", "test", "-C", bdir, "--no-rebuild", "--suite", "syntax-check",
                 "--print-errorlogs"], env=meson_env(), check=False, log=slog)
        sc = mesonlog.results(bdir)
        if p.returncode != 0 and not sc.failed:
            raise LabError(f"libvirt's syntax-check failed ({mesonlog.describe(sc)}); "
                           f"see {slog}")
        step(f"libvirt: syntax-check: {mesonlog.describe(sc)}")
        counts = counts + sc
    return counts


# Unit tests the series adds to libvirt's suite: they must have run and passed.
OUR_TESTS = ("qemuvcpucgrouptest",)


def _not_ok(bdir, names):
    """Of names, those that did not run and pass in the last meson test
    (a test that was skipped or left out of the build would not fail the
    suite)."""
    ran = {t["name"].split(" / ")[-1].split(":")[-1]: t["result"]
           for t in mesonlog.tests(bdir)}
    return [n for n in names if ran.get(n) != "OK"]


def has_vcpu_cgroup():
    """Whether the libvirt the lab daemon runs (lab_prefix()) knows
    qemu.conf's vcpu_cgroup (our series is applied)."""
    conf = os.path.join(lab_prefix(), "share", "augeas", "lenses", "libvirtd_qemu.aug")
    try:
        with open(conf) as fh:
            return "vcpu_cgroup" in fh.read()
    except OSError:
        return False
