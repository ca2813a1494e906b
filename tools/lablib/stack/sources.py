# SPDX-License-Identifier: GPL-2.0-or-later
"""Debian archive access: deb-src entries, build dependencies, pinned tarballs.

No archive host name is written anywhere in the project: the mirror URI is
read from the machine's own apt configuration at run time, and the download
URLs come from apt's deb-src index (apt-get source --print-uris).  .dsc/.asc
files are never needed; tarballs are verified against the sha256 sums pinned
in each stack's BASE file.
"""

import os
import re
import shutil
import subprocess
import tempfile

from ..common import LabError, cache_dir, mkdirs, read_kv, run, sha256_file, sources_dir, step

SRC_LIST = "/etc/apt/sources.list.d/unsteal-src.sources"
SRC_SUITES = ["bookworm", "bookworm-updates", "bookworm-backports", "trixie"]

# Build and run dependencies, grouped so that progress output stays readable.
PACKAGES = {
    "toolchain": ["build-essential", "git", "meson", "ninja-build", "pkg-config", "ccache",
                  "curl", "xz-utils", "python3", "gettext"],
    "libvirt build": ["libglib2.0-dev", "libxml2-dev", "libxml2-utils", "xsltproc",
                      "libgnutls28-dev", "libtirpc-dev", "libjson-c-dev", "libnl-3-dev",
                      "libnl-route-3-dev", "libcap-ng-dev", "libnuma-dev", "python3-docutils",
                      "libreadline-dev", "augeas-tools", "libaugeas-dev", "libudev-dev",
                      "libpciaccess-dev", "libacl1-dev", "libattr1-dev", "libdevmapper-dev",
                      "libblkid-dev",
                      # libvirt 9.0.0 (Debian 12 stack) parses JSON with yajl
                      "libyajl-dev"],
    "kernel build": ["bc", "flex", "bison", "libelf-dev", "libssl-dev", "cpio", "dwarves",
                     "kmod",
                     # checkpatch.pl's SPDX check (scripts/spdxcheck.py)
                     "python3-ply", "python3-git"],
    # mmdebstrap: every Debian root (package/chroot.py); devscripts: dch for
    # the changelog entries; autopkgtest, uidmap: the packages' autopkgtests
    # (package/autopkgtest.py)
    "packaging": ["mmdebstrap", "devscripts", "dpkg-dev", "quilt", "zstd", "debian-archive-keyring",
                  "util-linux", "autopkgtest", "uidmap"],
    # bash-static: run_vmtests.sh in the kselftest guest, which has busybox only;
    # e2fsprogs: mkfs.ext4 for the kselftest guest's scratch disk
    "guests and tests": ["qemu-system-x86", "qemu-utils", "busybox-static", "bash-static",
                         "e2fsprogs", "libcgroup-dev", "valgrind", "iproute2", "dmidecode"],
    # unsteal --connect: libvirt's client library (Debian's, not the lab's);
    # unsteal exporter: libmicrohttpd
    "unsteal build": ["libvirt-dev", "libxml2-dev", "libmicrohttpd-dev"],
    # tests/tools/test_guest_programs.py: the programs that run inside guests
    "lint": ["shellcheck", "pyflakes3"],
}

# Installed on first use only by tools/lab bench: plots, and the libvirt API
# client the control-plane benchmark times calls with.
BENCH_PACKAGES = ["python3-matplotlib", "python3-libvirt"]


def debian_mirror():
    """The URI of the machine's main Debian archive, from its apt sources."""
    cands = []
    deb822 = "/etc/apt/sources.list.d/debian.sources"
    if os.path.exists(deb822):
        with open(deb822) as fh:
            text = fh.read()
        for stanza in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and "security" not in suites.group(1):
                cands.append(uris.group(1))
    if os.path.exists("/etc/apt/sources.list"):
        with open("/etc/apt/sources.list") as fh:
            for line in fh:
                m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
                if m and "security" not in m.group(2):
                    cands.append(m.group(1))
    if not cands:
        raise LabError("cannot find a Debian archive in /etc/apt/sources.list.d/debian.sources "
                       "or /etc/apt/sources.list; add one, then rerun tools/lab setup")
    return cands[0]


def ensure_deb_src():
    mirror = debian_mirror()
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    want = ("# Written by unsteal's tools/lab setup: source indexes for the pinned bases.\n"
            "Types: deb-src\n"
            f"URIs: {mirror}\n"
            f"Suites: {' '.join(SRC_SUITES)}\n"
            "Components: main\n"
            f"Signed-By: {keyring}\n")
    have = open(SRC_LIST).read() if os.path.exists(SRC_LIST) else None
    stamp = "/var/lib/apt/lists/.unsteal-updated"
    if have != want:
        step(f"apt: adding deb-src entries ({', '.join(SRC_SUITES)}) to {SRC_LIST}")
        with open(SRC_LIST, "w") as fh:
            fh.write(want)
    if have != want or not os.path.exists(stamp):
        step("apt: updating package indexes")
        run(["apt-get", "update", "-q"], quiet=True)
        open(stamp, "w").close()


def _installed(pkgs):
    p = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n"] + pkgs,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ok = {line.split()[0] for line in p.stdout.splitlines() if line.endswith(" installed")}
    return ok


def _missing(group, pkgs, quiet_present=False):
    """The packages of a group that are not installed; says which."""
    have = _installed(pkgs)
    missing = [p for p in pkgs if p not in have]
    if missing:
        step(f"apt: {group}: installing {' '.join(missing)}")
    elif not quiet_present:
        step(f"apt: {group}: {len(pkgs)} packages present")
    return missing


def _install(missing):
    if missing:
        run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing,
            env={"DEBIAN_FRONTEND": "noninteractive"}, quiet=True)


def ensure_group(group, pkgs, quiet_present=False):
    _install(_missing(group, pkgs, quiet_present))


def ensure_packages():
    """Every group's missing packages in one apt-get run: one dependency
    resolution and one pass of dpkg's triggers (man-db, ldconfig), not one
    per group."""
    missing = []
    for group, pkgs in PACKAGES.items():
        missing += [p for p in _missing(group, pkgs) if p not in missing]
    _install(missing)


def _print_uris(package, version):
    p = subprocess.run(["apt-get", "source", "--print-uris", "--only-source",
                        f"{package}={version}"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    uris = {}
    for line in p.stdout.splitlines():
        m = re.match(r"'([^']+)'\s+(\S+)\s+(\d+)\s+SHA256:([0-9a-f]+)", line)
        if m:
            uris[m.group(2)] = (m.group(1), m.group(4))
    return uris


def _available_versions(package):
    p = subprocess.run(["apt-cache", "showsrc", "--only-source", package],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    vers = re.findall(r"^Version:\s*(\S+)", p.stdout, re.M)
    if not vers:
        return []
    cmp = subprocess.run(["bash", "-c", "sort -V"], input="\n".join(vers), text=True,
                         stdout=subprocess.PIPE).stdout.split()
    return cmp


_VERIFIED = {}


def _cached_ok(path, pin):
    """sha256 of a cached file matches the pin (hashed once per process)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns, pin)
    if key not in _VERIFIED:
        _VERIFIED[key] = sha256_file(path) == pin
    return _VERIFIED[key]


def fetch_base(stack_dir, which=("orig",)):
    """Fetch (or reuse from the cache) the pinned tarballs of a stack, verified."""
    base = read_kv(os.path.join(stack_dir, "BASE"))
    mkdirs(sources_dir())
    paths = {}
    uris = None
    for kind in which:
        fname, pin = base[kind], base[f"{kind}_sha256"]
        dest = os.path.join(sources_dir(), fname)
        if os.path.exists(dest):
            if _cached_ok(dest, pin):
                paths[kind] = dest
                continue
            step(f"sources: cached {fname} does not match the pin; fetching it again")
            os.unlink(dest)
        if uris is None:
            ensure_deb_src()
            uris = _print_uris(base["package"], base["version"])
        if fname not in uris:
            vers = _available_versions(base["package"])
            newest = vers[-1] if vers else "(none found)"
            raise LabError(
                f"{stack_dir}/BASE pins {base['package']} {base['version']}, which the archive "
                f"no longer offers ({fname} not in its source index).\n"
                f"  newest available: {newest}\n"
                f"  available: {' '.join(vers[-8:])}\n"
                f"  to move the pin: edit version, topdir and the file names in {stack_dir}/BASE, "
                f"take the sha256 sums from 'apt-cache showsrc --only-source {base['package']}', "
                f"then rebase the series (docs/patch-workflow.md, 'Moving to a new base')")
        url, index_sum = uris[fname]
        if index_sum != pin:
            raise LabError(f"{stack_dir}/BASE: sha256 pin of {fname} ({pin}) differs from the "
                           f"archive's index ({index_sum}); refusing to use it")
        step(f"sources: downloading {fname}")
        tmp = dest + ".part"
        run(["curl", "-fsSL", "--retry", "3", "-o", tmp, url], quiet=True)
        got = sha256_file(tmp)
        if got != pin:
            os.unlink(tmp)
            raise LabError(f"{fname}: sha256 {got} does not match the pin {pin} in "
                           f"{stack_dir}/BASE")
        os.rename(tmp, dest)
        paths[kind] = dest
    msg = (f"sources: {base['package']} {base['version']}: "
           f"{', '.join(os.path.basename(p) for p in paths.values())} verified")
    if msg not in _VERIFIED:
        _VERIFIED[msg] = True
        step(msg)
    return base, paths


# promtool, which checks unsteal's scrapes (tests/integration/test_unsteal_exporter.py)
# and rules (docs/prometheus/), ships in Debian's prometheus package.  Installing
# that package would also start a Prometheus server, so setup takes promtool out
# of the .deb that apt downloads (and verifies against the signed index) instead.
def _promtool_path(cache=None):
    return os.path.join(cache or cache_dir(), "promtool", "promtool")


def promtool(cache=None):
    """promtool: on PATH, else the one setup extracted into the cache (the
    configured one, or the directory given); None when neither."""
    found = shutil.which("promtool")
    if found:
        return found
    path = _promtool_path(cache)
    return path if os.access(path, os.X_OK) else None


def ensure_promtool():
    if promtool():
        return
    step("apt: promtool: extracting it from Debian's prometheus package (apt-get download)")
    with tempfile.TemporaryDirectory() as tmp:
        run(["apt-get", "download", "-q", "prometheus"], cwd=tmp, quiet=True)
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        if len(debs) != 1:
            raise LabError(f"apt-get download prometheus gave {debs}")
        run(["dpkg-deb", "-x", os.path.join(tmp, debs[0]), os.path.join(tmp, "x")], quiet=True)
        dest = _promtool_path()
        mkdirs(os.path.dirname(dest))
        shutil.copy(os.path.join(tmp, "x", "usr", "bin", "promtool"), dest + ".part")
        os.rename(dest + ".part", dest)


# Root's subordinate ids, for autopkgtest-virt-unshare's testbeds
SUBIDS = "1000000-1065535"


def ensure_subids():
    """Give root a range of subordinate user and group ids unless it has one."""
    missing = []
    for path, opt in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        text = open(path).read() if os.path.exists(path) else ""
        if not re.search(r"^root:", text, re.M):
            missing += [opt, SUBIDS]
    if missing:
        step(f"setup: subordinate ids {SUBIDS} for root (autopkgtest-virt-unshare)")
        run(["usermod"] + missing + ["root"])


def setup():
    if os.geteuid() != 0:
        raise LabError("tools/lab setup needs root (apt)")
    ensure_deb_src()
    ensure_packages()
    ensure_subids()
    ensure_promtool()
