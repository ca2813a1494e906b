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
  install   apt installs the .deb (its dependencies from the archive) in a
            fresh root; the binary, the man page, the service (enabled,
            'systemd-analyze verify' clean), an exporter started with the
            service's default arguments answering /metrics, and a purge that
            leaves nothing behind

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
from . import libvirt_deb
from ..stack import sources

PACKAGE = "unsteal"
SUITE = "trixie"
UNIT = "unsteal-exporter.service"


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
        lint_log, tags = libvirt_deb.lintian(root, tag, files="*.changes *.dsc")
        out = outdir()
        libvirt_deb.collect(bdir, info["srcdir"], out, lint_log)
        if tags["E"] or tags["W"]:
            lines = [ln for ln in open(lint_log, errors="replace") if ln[:2] in ("E:", "W:")]
            raise LabError(f"lintian: {tags['E']} error(s), {tags['W']} warning(s):\n"
                           + "".join(lines[:20]))
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


# Inside the install root, after apt: what the package must have put where,
# an exporter with the service's own arguments, and a purge.
_INSTALLED = rf"""
echo '== installed'; dpkg-query -W -f '${{Package}} ${{Version}}\n' {PACKAGE}
echo '== unsteal --version'; unsteal --version
test -x /usr/sbin/unsteal
test -f /usr/share/man/man8/unsteal.8.gz || {{ echo 'FAIL: no unsteal(8)'; exit 1; }}
echo '== the service'
systemd-analyze verify /usr/lib/systemd/system/{UNIT}
test -L /etc/systemd/system/multi-user.target.wants/{UNIT} || \
  {{ echo 'FAIL: {UNIT} is not enabled'; exit 1; }}
grep -q '^UNSTEAL_EXPORTER_ARGS=' /etc/default/unsteal-exporter
echo '== one report'
unsteal report --prometheus --count 1 --interval 0.5 > /tmp/report.prom
grep '^unsteal_host_cpus ' /tmp/report.prom
"""

# Run without network (a namespace of its own with only lo): the service's
# default arguments, one scrape over bash's /dev/tcp.
_EXPORTER = r"""
. /etc/default/unsteal-exporter
echo "== unsteal exporter $UNSTEAL_EXPORTER_ARGS"
unsteal exporter $UNSTEAL_EXPORTER_ARGS 2> /tmp/exporter.err &
pid=$!
addr=$(echo "$UNSTEAL_EXPORTER_ARGS" | sed -n 's/.*--listen \([^ ]*\):\([0-9]*\).*/\1 \2/p')
set -- $addr
ok=
for i in $(seq 50); do
  sleep 0.2
  if exec 3<>/dev/tcp/$1/$2 2>/dev/null; then
    printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3
    cat <&3 > /tmp/scrape.txt; exec 3<&-
    if head -1 /tmp/scrape.txt | grep -q ' 200 '; then ok=1; break; fi
  fi
done
kill -TERM $pid; wait $pid || true
cat /tmp/exporter.err
[ -n "$ok" ] || { echo 'FAIL: no 200 from /metrics'; head -5 /tmp/scrape.txt; exit 1; }
head -1 /tmp/scrape.txt
grep -c '^unsteal_' /tmp/scrape.txt
"""

_PURGE = rf"""
echo '== purge'
apt-get purge -y -q {PACKAGE}
for f in /usr/sbin/unsteal /etc/default/unsteal-exporter \
         /etc/systemd/system/multi-user.target.wants/{UNIT} \
         /usr/lib/systemd/system/{UNIT}; do
  if [ -e "$f" ] || [ -L "$f" ]; then echo "FAIL: $f left after purge"; exit 1; fi
done
echo 'install check: OK'
"""


def install_check():
    """The .deb of build() in a fresh Debian 13 root: see the module docstring."""
    found = debs()
    if not found:
        raise LabError(f"no packages in {os.path.relpath(outdir(), ROOT)}; run tools/lab "
                       f"package unsteal first")
    ver = version()
    root = libvirt_deb.install_root(SUITE, found, os.path.join(libvirt_deb.workdir(_base()),
                                                           "install-root"))
    log = os.path.join(logs_dir(), f"package-{PACKAGE}-{ver}-install.log")
    step(f"install check: apt-get install {PACKAGE} (and systemd, for systemd-analyze) in a "
         f"fresh {SUITE} root; log: {os.path.relpath(log, ROOT)}")
    try:
        root.run(f"apt-get update -q && apt-get install -y -q {PACKAGE} systemd"
                 + _INSTALLED, log=log)
        root.run(_EXPORTER, net=False, log=log + ".exporter")
        root.run(_PURGE, log=log + ".purge")
    finally:
        with open(log, "a") as fh:
            for part in (".exporter", ".purge"):
                if os.path.exists(log + part):
                    fh.write(open(log + part, errors="replace").read())
                    os.unlink(log + part)
        root.remove()
    text = open(log, errors="replace").read()
    scrape = re.search(r"^(HTTP/1\.\d 200.*)\n(\d+)$", text, re.M)
    step(f"install check: {PACKAGE} {ver} installed with apt; the service verifies and is "
         f"enabled; the exporter with its default arguments answered "
         f"{scrape.group(2) + ' unsteal_ lines' if scrape else '200'}; purge left nothing")


def build_and_check():
    """The tools/lab test stage: the whole package, as 'tools/lab package unsteal'."""
    build()
    install_check()
    return True


def command(args):
    if os.geteuid() != 0:
        raise LabError("tools/lab package needs root (apt, debootstrap, chroot)")
    sources.setup()
    if not args.install_check_only:
        build(jobs=args.jobs, keep_root=args.keep_root)
    if not args.no_install_check:
        install_check()
    return 0
