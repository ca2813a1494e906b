# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab package unsteal: unsteal's own Debian package.

The packaging is debian/ at the top of this repository (a native package:
the version is meson.build's project version).  Steps, each in a throwaway
root of Debian 13 made by chroot.py, as for libvirt's packages (libvirt_deb.py):

  source    the work tree's files (those git tracks, and new ones it does
            not ignore) become unsteal-VERSION/, and dpkg-source -b makes
            the source package
  build     dpkg-buildpackage -b as an unprivileged user without network,
            unsteal's own tests (meson suite 'src') included; lintian must
            report no error and no warning
  install   the package's autopkgtests (debian/tests: the command and its
            man page, the service enabled and 'systemd-analyze verify'
            clean, an exporter started with the service's default arguments
            answering /metrics, a purge that leaves nothing behind) run with
            autopkgtest against the .deb in a fresh testbed (autopkgtest.py)

Outputs land in _build/packages/unsteal_VERSION/, the logs in _build/logs/.
The service itself starts under systemd in the test host
(docs/testhost.md); docs/packaging.md is the guide.
"""

import functools
import glob
import os
import re
import shutil

from ..common import LabError, ROOT, build_dir, logs_dir, mkdirs, run, step
from . import autopkgtest, libvirt_deb, lintian
from ..stack import sources

PACKAGE = "unsteal"
SUITE = "trixie"


@functools.lru_cache(maxsize=None)
def version():
    """debian/changelog's version, refused unless it is meson.build's."""
    chl = run(["dpkg-parsechangelog", "-l", os.path.join(ROOT, "debian", "changelog"),
               "-S", "Version"], capture=True).stdout.strip()
    m = re.search(r"^project\([^)]*?version:\s*'([^']+)'", open(os.path.join(ROOT, "meson.build"))
                  .read(), re.M | re.S)
    if not m:
        raise LabError("meson.build: no project version")
    if chl != m.group(1):
        raise LabError(f"debian/changelog is at {chl}, meson.build's project at {m.group(1)}: "
                       f"add a changelog entry for {m.group(1)} (dch -v {m.group(1)})")
    return chl


def _base():
    return {"package": PACKAGE, "version": version(), "suite": SUITE}


def outdir():
    return os.path.join(build_dir(), "packages", f"{PACKAGE}_{version()}")


def source():
    """The source package from the work tree's tracked files; (base, info) as
    libvirt_deb.prepare() returns them, for libvirt_deb.build_root()."""
    base = _base()
    ver = base["version"]
    wd = os.path.join(libvirt_deb.workdir(base), "src")
    shutil.rmtree(wd, ignore_errors=True)
    top = f"{PACKAGE}-{ver}"
    tree = os.path.join(wd, top)
    mkdirs(tree)
    names = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=ROOT, capture=True).stdout.split("\0")
    names = [n for n in names if n and os.path.lexists(os.path.join(ROOT, n))]
    step(f"package: assembling {PACKAGE} {ver} from the work tree's {len(names)} files "
         f"(those git tracks, and new ones it does not ignore)")
    for n in names:
        dst = os.path.join(tree, n)
        mkdirs(os.path.dirname(dst))
        shutil.copy2(os.path.join(ROOT, n), dst, follow_symlinks=False)
    p = run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture=True, check=False)
    ts = int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else 0
    log = os.path.join(logs_dir(), f"package-{PACKAGE}-{ver}-source.log")
    run(["dpkg-source", "-b", top], cwd=wd, log=log,
        env={"SOURCE_DATE_EPOCH": str(ts), "LC_ALL": "C.UTF-8"})
    dsc = os.path.join(wd, f"{PACKAGE}_{ver}.dsc")
    if not os.path.exists(dsc):
        raise LabError(f"dpkg-source did not write {dsc}; see {log}")
    step(f"package: source package {os.path.basename(dsc)}")
    return base, {"version": ver, "dsc": dsc, "srcdir": wd, "tree": tree, "ts": ts}


def build(jobs=None, keep_root=False):
    """Build, lintian (no error, no warning), outputs into outdir()."""
    base, info = source()
    tag = f"{PACKAGE}-{info['version']}"
    root, bdir = libvirt_deb.build_root(None, base, info)
    try:
        text, counts, secs = libvirt_deb.buildpackage(root, info, tag, jobs)
        if not counts.get("Ok"):
            raise LabError(f"the package build ran none of unsteal's tests ({counts})")
        # the binary build's .changes, and the source package
        lint_log, tags = lintian.run_lintian(root, tag, files="*.changes *.dsc")
        out = outdir()
        libvirt_deb.collect(bdir, info["srcdir"], out, lint_log)
        lintian.check(lint_log, explained={})
        with open(os.path.join(out, "SUMMARY"), "w") as fh:
            fh.write(f"package={PACKAGE}\nversion={info['version']}\nsuite={SUITE}\n"
                     f"build_minutes={secs / 60:.1f}\n"
                     + "".join(f"meson_{k.lower().replace(' ', '_')}={v}\n"
                               for k, v in counts.items())
                     + f"lintian_errors={tags['E']}\nlintian_warnings={tags['W']}\n"
                     f"lintian_info={tags['I']}\n")
        step(f"package: {', '.join(os.path.basename(d) for d in debs(out))} in "
             f"{os.path.relpath(out, ROOT)}")
        return out
    finally:
        if not keep_root:
            root.remove()


def debs(out=None):
    """Every .deb of the build (unsteal and its -dbgsym)."""
    return sorted(glob.glob(os.path.join(out or outdir(), "*.deb")))


def main_deb(out=None):
    """unsteal_VERSION_ARCH.deb of the build, or None."""
    found = [d for d in debs(out) if os.path.basename(d).startswith(PACKAGE + "_")]
    return found[0] if found else None


def install_check():
    """debian/tests of the source package against the .debs of build(), in a
    fresh Debian 13 testbed (autopkgtest.py)."""
    found = [d for d in debs() if not os.path.basename(d).startswith(PACKAGE + "-dbgsym_")]
    dsc = os.path.join(outdir(), f"{PACKAGE}_{version()}.dsc")
    if not found or not os.path.exists(dsc):
        raise LabError(f"no source and binary packages in {os.path.relpath(outdir(), ROOT)}; "
                       f"run tools/lab package unsteal first")
    log = os.path.join(logs_dir(), f"package-{PACKAGE}-{version()}-autopkgtest.log")
    results = autopkgtest.run_tests(dsc, found, SUITE, os.path.join(outdir(), "autopkgtest"),
                                    log)
    step(f"install check: {PACKAGE} {version()}: {len(results)} autopkgtest(s) passed "
         f"({', '.join(name for name, _, _ in results)})")


def build_and_check():
    """The tools/lab test stage: the whole package, as 'tools/lab package unsteal'."""
    build()
    install_check()
    return True


def command(args):
    if os.geteuid() != 0:
        raise LabError("tools/lab package needs root (apt, mmdebstrap, chroot)")
    if args.kvm_guest:
        raise LabError("--kvm-guest is an installation check of libvirt's packages")
    sources.setup()
    if not args.install_check_only:
        build(jobs=args.jobs, keep_root=args.keep_root)
    if not args.no_install_check:
        install_check()
    return 0
