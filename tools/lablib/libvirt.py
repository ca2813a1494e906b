# SPDX-License-Identifier: GPL-2.0-or-later
"""Build the patched libvirt (qemu driver and what it needs) into a private prefix."""

import os
import shutil

from .common import BUILD, LabError, STACKS, run, step

PREFIX = os.path.join(BUILD, "prefix")
BUILDDIR = os.path.join(BUILD, "libvirt-build")

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


def meson_env():
    # Debian's meson and libvirt's build scripts want the system python.
    return {"PATH": "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin"}


def configure(src, builddir, prefix):
    opts = [f"--prefix={prefix}", "--libdir=lib", f"-Drunstatedir={prefix}/var/run",
            "--buildtype=debugoptimized", "-Dwerror=false"] + MESON_OPTS
    stamp = os.path.join(builddir, ".unsteal-meson-opts")
    if os.path.exists(os.path.join(builddir, "build.ninja")):
        if os.path.exists(stamp) and open(stamp).read() == "\n".join(opts):
            return
        step(f"libvirt: meson options changed; reconfiguring {builddir}")
        cmd = ["meson", "setup", "--reconfigure", builddir, src]
    else:
        step(f"libvirt: meson setup {builddir}")
        cmd = ["meson", "setup", builddir, src]
    run(cmd + opts, env=meson_env(), quiet=True,
        log=os.path.join(BUILD, "logs", "libvirt-meson-setup.log"))
    with open(stamp, "w") as fh:
        fh.write("\n".join(opts))


def build(install=True):
    from .stack import ensure_worktree
    src = ensure_worktree(STACKS["libvirt"])
    configure(src, BUILDDIR, PREFIX)
    step("libvirt: ninja (incremental; log in _build/logs/libvirt-build.log)")
    run(["ninja", "-C", BUILDDIR], env=meson_env(),
        log=os.path.join(BUILD, "logs", "libvirt-build.log"))
    if install:
        step(f"libvirt: installing into {PREFIX}")
        run(["meson", "install", "-C", BUILDDIR, "--no-rebuild", "--quiet"], env=meson_env(),
            log=os.path.join(BUILD, "logs", "libvirt-install.log"))
    return src


STOCK_PREFIX = os.path.join(BUILD, "prefix-stock")
STOCK_BUILDDIR = os.path.join(BUILD, "libvirt-stock-build")


def build_stock():
    """libvirt at the pinned base, without the series, into its own prefix.

    The control-plane benchmark compares it with the patched build.  The
    tree is a second git work tree of the same repository at the base tag.
    """
    from .stack import _add_untracked, ensure_worktree
    wt = ensure_worktree(STACKS["libvirt"], quiet_reuse=True)
    src = wt + "-stock"
    if os.path.isdir(src) and run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=src,
                                  check=False, capture=True).returncode != 0:
        # The patched work tree was recreated: its worktree record is gone.
        shutil.rmtree(src)
    if not os.path.isdir(src):
        step(f"libvirt: checking out the stock base into {src}")
        run(["git", "worktree", "add", "-f", "--detach", src, "base"], cwd=wt, quiet=True)
        _add_untracked(STACKS["libvirt"], src)
    configure(src, STOCK_BUILDDIR, STOCK_PREFIX)
    step("libvirt: building stock libvirt (log in _build/logs/libvirt-stock-build.log)")
    run(["ninja", "-C", STOCK_BUILDDIR], env=meson_env(),
        log=os.path.join(BUILD, "logs", "libvirt-stock-build.log"))
    run(["meson", "install", "-C", STOCK_BUILDDIR, "--no-rebuild", "--quiet"], env=meson_env(),
        log=os.path.join(BUILD, "logs", "libvirt-stock-install.log"))
    return STOCK_PREFIX


def build_tree(tree, what):
    """Build a check tree (used by 'tools/lab check libvirt --build-each')."""
    builddir = tree + "-build"
    configure(tree, builddir, os.path.join(builddir, "prefix"))
    p = run(["ninja", "-C", builddir], env=meson_env(), check=False,
            log=os.path.join(BUILD, "logs", "check-libvirt-build.log"))
    if p.returncode != 0:
        raise LabError(f"libvirt does not build with {what}; see "
                       f"_build/logs/check-libvirt-build.log")


def test_suite(syntax_check=True):
    """libvirt's own test suite on the patched tree (and syntax-check)."""
    build(install=False)
    step("libvirt: meson test (libvirt's own suite; log in _build/logs/libvirt-test.log)")
    log = os.path.join(BUILD, "logs", "libvirt-test.log")
    p = run(["meson", "test", "-C", BUILDDIR, "--no-rebuild", "--print-errorlogs",
             "--no-suite", "syntax-check"], env=meson_env(), check=False, log=log)
    summary = _summary(log)
    if p.returncode != 0:
        raise LabError(f"libvirt's test suite failed ({summary}); see {log}")
    step(f"libvirt: test suite passed ({summary})")
    counts = _counts(log)
    if syntax_check:
        step("libvirt: syntax-check")
        slog = os.path.join(BUILD, "logs", "libvirt-syntax-check.log")
        p = run(["meson", "test", "-C", BUILDDIR, "--no-rebuild", "--suite", "syntax-check",
                 "--print-errorlogs"], env=meson_env(), check=False, log=slog)
        if p.returncode != 0:
            raise LabError(f"libvirt's syntax-check failed ({_summary(slog)}); see {slog}")
        step(f"libvirt: syntax-check passed ({_summary(slog)})")
        sc = _counts(slog)
        counts = (counts[0] + sc[0], counts[1] + sc[1])
    return counts


def _counts(log):
    ok = fail = 0
    with open(log) as fh:
        for line in fh:
            line = line.strip()
            for key in ("Ok:", "Expected Fail:", "Skipped:"):
                if line.startswith(key) and key == "Ok:":
                    ok = int(line.split()[-1])
            if line.startswith("Fail:") or line.startswith("Unexpected Pass:") or \
                    line.startswith("Timeout:"):
                fail += int(line.split()[-1])
    return ok, fail


def _summary(log):
    ok, fail = _counts(log)
    return f"{ok} ok, {fail} failed"
