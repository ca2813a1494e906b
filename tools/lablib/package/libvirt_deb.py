# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab package: rebuild Debian's own libvirt packages with a patch stack.

Works on any libvirt stack directory (a BASE pinning a Debian source package
with its orig and debian tarballs, and a series): libvirt-patches/debian-13/
for Debian 13, libvirt-patches/debian-12/ for the Debian 12 port, or a later
one.  Steps:

  prepare   unpack the pinned orig + debian tarballs, copy the series into
            debian/patches/unsteal/, append it to debian/patches/series, add
            a changelog entry VERSION+unsteal1, and build the source package
            with dpkg-source -b (which applies every patch with fuzz 0)
  build     in a fresh mmdebstrap root of the BASE's suite: dpkg-source -x,
            apt-get build-dep, dpkg-buildpackage -b -uc -us as an unprivileged
            user without network, Debian's test suite included; lintian
  install   the source package's autopkgtests (Debian's and the series',
            libvirt-patches/autopkgtest/) against the built packages in a
            fresh testbed of the suite (autopkgtest.py)

Outputs land in _build/packages/PACKAGE_VERSION/, the logs in _build/logs/.
docs/packaging.md is the maintainer's guide.
"""

import email
import glob
import hashlib
import os
import re
import shutil
import time

from ..common import LabError, ROOT, build_dir, logs_dir, mkdirs, read_kv, run, step, watch
from . import autopkgtest, chroot, lintian
from ..build import mesonlog
from ..stack import patchqueue, sources, stacks

SUFFIX_NAME = "unsteal"
MAINTAINER = "Unsteal Developers <dev@unsteal.invalid>"
# Tests of libvirt's suite that cover the series: the package build fails
# unless each ran and passed (the unit test of the vcpu_cgroup options and
# placement rule; the augeas lens test of qemu.conf, which the series extends).
OUR_TESTS = ["qemuvcpucgrouptest", "check-augeas-libvirtd_qemu"]
# The series' autopkgtests: debian/tests/control stanzas and their scripts.
AUTOPKGTEST_DIR = os.path.join(ROOT, "libvirt-patches", "autopkgtest")
# lintian's limit on a .deb's name, counted with the architecture replaced
# by its longest one (lintian's Archive/File/Name/Length check).
LINTIAN_NAME_LIMIT = 80
LINTIAN_LONGEST_ARCH = len("kfreebsd-amd64")
# Warnings lintian gives Debian's own, unmodified libvirt packages too: they
# are Debian's to fix, not the rebuild's.  Any other error or warning fails
# the build.  (Seen with lintian on Debian's libvirt-sanlock
# 9.0.0-4+deb12u2 and libvirt-daemon-plugin-sanlock 11.3.0-3+deb13u3.)
LINTIAN_DEBIANS_OWN = {
    "missing-systemd-timer-for-cron-script":
        "Debian's sanlock package ships a weekly cron script",
}


def resolve_stack(arg, package):
    """The directory of a stack given as a key or as a directory holding BASE
    and series; None: the project's default stack (package: libvirt, linux)."""
    if arg is None:
        return stacks.default(package).dir
    if arg in stacks.keys():
        return stacks.get(arg).dir
    path = os.path.abspath(arg)
    if not os.path.isfile(os.path.join(path, "BASE")):
        raise LabError(f"{arg}: not a stack (known: {', '.join(sorted(stacks.keys()))}, or a "
                       f"directory with a BASE file)")
    return path


def local_version(base):
    """The package version of our build: Debian's version + '+unsteal' + revision."""
    rev = base.get("package_revision", "1")
    if not re.fullmatch(r"[0-9]+", rev):
        raise LabError(f"BASE: package_revision={rev!r} must be a number")
    return f"{base['version']}+{SUFFIX_NAME}{rev}"


def _stack_date(stack_dir):
    """RFC 2822 date of the last commit touching the stack (reproducible changelog)."""
    p = run(["git", "log", "-1", "--format=%ct", "--", "."], cwd=stack_dir, check=False,
            capture=True)
    ts = int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else int(time.time())
    return time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(ts)), ts


def _rel(path):
    return os.path.relpath(path, ROOT)


def _subject(path):
    """A patch's subject, unfolded, without the [PATCH] tag."""
    with open(path, errors="replace") as fh:
        head = fh.read().split("\n\n", 1)[0]
    subj = email.message_from_string(head).get("Subject", os.path.basename(path))
    subj = re.sub(r"\s+", " ", str(subj)).strip()
    return re.sub(r"^\[PATCH[^]]*\]\s*", "", subj)


def workdir(base):
    return os.path.join(build_dir(), "package", f"{base['package']}-{base['version']}")


def outdir(base):
    return os.path.join(build_dir(), "packages", f"{base['package']}_{local_version(base)}")


# systemd units a libvirt series adds to the QEMU driver (src/qemu/*.slice):
# the driver's package installs them, or dh_missing fails the build on an
# installed file that no package lists.
UNIT_RE = re.compile(r"^\+\+\+ b/src/qemu/([\w.@-]+\.(?:slice|service|socket))$", re.M)
UNIT_PACKAGE = "libvirt-daemon-driver-qemu"


def _install_units(tree, base, patch_paths):
    """List the units the series adds in the QEMU driver's .install file."""
    if base["package"] != "libvirt":
        return []
    units = []
    for path in patch_paths:
        with open(path) as fh:
            units += [u for u in UNIT_RE.findall(fh.read()) if u not in units]
    if not units:
        return []
    deb = os.path.join(tree, "debian")
    # Debian 13 generates the .install files from .install.in templates and
    # installs units below /usr/lib; Debian 12 lists them below /lib.
    target = next((os.path.join(deb, f"{UNIT_PACKAGE}.install{ext}") for ext in (".in", "")
                   if os.path.exists(os.path.join(deb, f"{UNIT_PACKAGE}.install{ext}"))), None)
    if target is None:
        raise LabError(f"{base['package']} {base['version']}: no debian/{UNIT_PACKAGE}.install "
                       f"to list the series' units in: {' '.join(units)}")
    usr_lib = target.endswith(".in")
    with open(target, "a") as fh:
        for u in units:
            fh.write(f"usr/lib/systemd/system/{u}\n" if usr_lib else
                     f"usr/lib/systemd/system/{u} lib/systemd/system/\n")
    return units


# A .rst file a patch of the series adds or changes ("+++ b/PATH.rst")
RST_RE = re.compile(r"^\+\+\+ b/(\S+\.rst)$", re.M)


def check_docs(tree, patch_paths):
    """The reStructuredText files the series changes, on the patched tree,
    through rst2html5 --strict as libvirt's documentation build runs them
    (dh_auto_build stops at the first problem, 5 minutes into a build;
    the lab's own builds leave the documentation out).  Returns their
    names."""
    names = sorted({n for p in patch_paths for n in RST_RE.findall(open(p).read())})
    if names and not shutil.which("rst2html5"):
        raise LabError("rst2html5 is missing (package python3-docutils); run tools/lab setup")
    bad = []
    for name in names:
        p = run(["rst2html5", "--exit-status=1", "--stylesheet=", "--strict",
                 os.path.join(tree, name), os.devnull], check=False, capture=True)
        if p.returncode:
            bad.append(f"{name}: {(p.stderr or p.stdout).strip().splitlines()[0]}")
    if bad:
        raise LabError("the series' documentation does not build (rst2html5 --strict):\n  "
                       + "\n  ".join(bad))
    return names


def changelog_entry(tree, base, version, stack_dir, patches, date):
    """Our entry on top of debian/changelog, written by dch: the rebuild,
    then one item per patch of the series.  dch dates an entry with the
    current time; the date line is then set to the stack's last commit, so
    the same series gives the same source package (SOURCE_DATE_EPOCH)."""
    if not shutil.which("dch"):
        raise LabError("dch is missing (package devscripts); run tools/lab setup")
    name, mail = re.fullmatch(r"(.*) <(.*)>", MAINTAINER).groups()
    env = {"DEBFULLNAME": name, "DEBEMAIL": mail, "TZ": "UTC", "LC_ALL": "C.UTF-8"}
    n = len(patches)
    head = (f"Rebuild with the unsteal patch series: {n} patch{'es' if n != 1 else ''} in "
            f"debian/patches/{SUFFIX_NAME}/ (from {os.path.basename(stack_dir)}), with their "
            f"autopkgtests in debian/tests/:")
    dch = ["dch", "--no-conf", "--no-auto-nmu", "--check-dirname-level", "0"]
    run(dch + ["--newversion", version, "--distribution", base["suite"],
               "--force-distribution", "--urgency", "medium", head],
        cwd=tree, env=env, quiet=True)
    for name in patches:
        run(dch + ["--append", _subject(os.path.join(stack_dir, name))], cwd=tree, env=env,
            quiet=True)
    chl = os.path.join(tree, "debian", "changelog")
    with open(chl) as fh:
        text = fh.read()
    text, subs = re.subn(r"^( -- .*>  ).*$", lambda m: m.group(1) + date, text, count=1,
                         flags=re.M)
    if not subs:
        raise LabError(f"dch wrote no trailer line in {chl}")
    with open(chl, "w") as fh:
        fh.write(text)


def _add_autopkgtests(tree):
    """The series' autopkgtests (libvirt-patches/autopkgtest/) into the
    source package: the scripts into debian/tests/, their stanzas appended
    to debian/tests/control (made if the package has no tests of its own;
    Debian's own tests stay as they are).  Returns the tests' names."""
    tests = os.path.join(tree, "debian", "tests")
    control = os.path.join(tests, "control")
    with open(os.path.join(AUTOPKGTEST_DIR, "control")) as fh:
        ours = fh.read()
    names = re.findall(r"^Tests:\s*(\S+)", ours, re.M)
    mkdirs(tests)
    for name in names:
        dst = os.path.join(tests, name)
        if os.path.exists(dst):
            raise LabError(f"Debian's package already has debian/tests/{name}")
        shutil.copy(os.path.join(AUTOPKGTEST_DIR, name), dst)
        os.chmod(dst, 0o755)
    text = open(control).read().rstrip("\n") + "\n\n" if os.path.exists(control) else ""
    body = "\n".join(ln for ln in ours.splitlines() if not ln.startswith("#")).strip()
    with open(control, "w") as fh:
        fh.write(text + body + "\n")
    return names


def _control_packages(tree):
    """The binary packages of debian/control."""
    text = open(os.path.join(tree, "debian", "control")).read()
    return re.findall(r"^Package:\s*(\S+)", text, re.M)


def lintian_name_length(package, version):
    """The length lintian gives the name of package's .deb at version."""
    return (len(f"{package}_{version.split(':')[-1]}_") + LINTIAN_LONGEST_ARCH
            + len(".deb"))


def _add_lintian_overrides(tree, version, base_version):
    """A lintian override of package-has-long-file-name for each binary
    package whose .deb name only the rebuild's version suffix takes past
    lintian's limit (Debian's own name is within it).  Returns their names."""
    long_names = [p for p in _control_packages(tree)
                  if lintian_name_length(p, version) > LINTIAN_NAME_LIMIT
                  >= lintian_name_length(p, base_version)]
    for package in long_names:
        path = os.path.join(tree, "debian", f"{package}.lintian-overrides")
        old = open(path).read() if os.path.exists(path) else ""
        with open(path, "w") as fh:
            fh.write(old + ("" if not old or old.endswith("\n") else "\n")
                     + f"# The rebuild's version suffix (+{SUFFIX_NAME}N) makes this name "
                       f"longer than\n# lintian's {LINTIAN_NAME_LIMIT} characters; "
                       f"Debian's own name is within them.\n"
                     + "package-has-long-file-name\n")
    return long_names


def prepare(stack_dir, sub="src"):
    """Assemble Debian's source package with the series; returns (base, info dict).

    sub: the directory under _build/package/PACKAGE-VERSION/ to assemble in
    ('check' for the test stage, so that it never touches a running build).
    """
    base, paths = sources.fetch_base(stack_dir, which=("orig", "debian"))
    patches = patchqueue.read_series(stack_dir)
    version = local_version(base)
    wd = os.path.join(workdir(base), sub)
    shutil.rmtree(wd, ignore_errors=True)
    tree = os.path.join(wd, base["topdir"])
    mkdirs(tree)
    step(f"package: assembling {base['package']} {base['version']} + {len(patches)} patch(es) "
         f"from {_rel(stack_dir)}")
    run(["tar", "-xf", paths["orig"], "-C", tree, "--strip-components=1"], quiet=True)
    run(["tar", "-xf", paths["debian"], "-C", tree], quiet=True)
    pdir = os.path.join(tree, "debian", "patches")
    fmt = open(os.path.join(tree, "debian", "source", "format")).read().strip()
    if fmt != "3.0 (quilt)":
        raise LabError(f"{base['package']} {base['version']} uses source format {fmt!r}; "
                       f"only '3.0 (quilt)' is supported")
    if os.path.exists(os.path.join(pdir, SUFFIX_NAME)):
        raise LabError(f"Debian's packaging already has debian/patches/{SUFFIX_NAME}/")
    mkdirs(os.path.join(pdir, SUFFIX_NAME))
    for name in patches:
        shutil.copy(os.path.join(stack_dir, name), os.path.join(pdir, SUFFIX_NAME, name))
    series = os.path.join(pdir, "series")
    old = open(series).read() if os.path.exists(series) else ""
    with open(series, "w") as fh:
        fh.write(old if not old or old.endswith("\n") else old + "\n")
        fh.write(f"# unsteal: {_rel(stack_dir)}/series\n")
        fh.write("".join(f"{SUFFIX_NAME}/{n}\n" for n in patches))
    _install_units(tree, base, [os.path.join(stack_dir, n) for n in patches])
    _add_autopkgtests(tree)
    overridden = _add_lintian_overrides(tree, version, base["version"])
    date, ts = _stack_date(stack_dir)
    changelog_entry(tree, base, version, stack_dir, patches, date)
    got = run(["dpkg-parsechangelog", "-S", "Version"], cwd=tree, capture=True).stdout.strip()
    if got != version:
        raise LabError(f"debian/changelog: version {got!r}, expected {version!r}")
    if run(["dpkg", "--compare-versions", version, "gt", base["version"]], check=False,
           capture=True).returncode != 0:
        raise LabError(f"{version} does not sort after {base['version']}")
    os.symlink(paths["orig"], os.path.join(wd, os.path.basename(paths["orig"])))
    # dpkg-source applies Debian's patches and ours with fuzz 0 and names the
    # first one that does not apply; -b then writes the source package.
    log = os.path.join(logs_dir(), f"package-{base['package']}-{base['version']}-{sub}.log")
    env = {"SOURCE_DATE_EPOCH": str(ts), "DEB_BUILD_OPTIONS": "", "LC_ALL": "C.UTF-8"}
    try:
        run(["dpkg-source", "--before-build", base["topdir"]], cwd=wd, log=log, env=env)
    except LabError as e:
        m = re.findall(r"applying (\S+)", open(log).read())
        bad = f" (the last patch tried was {m[-1]})" if m else ""
        raise LabError(f"the series does not apply on Debian's patched tree{bad}:\n{e}")
    run(["dpkg-source", "-b", base["topdir"]], cwd=wd, log=log + ".b", env=env)
    dsc = os.path.join(wd, f"{base['package']}_{version.split(':')[-1]}.dsc")
    if not os.path.exists(dsc):
        raise LabError(f"dpkg-source did not write {dsc}")
    docs = check_docs(tree, [os.path.join(stack_dir, n) for n in patches])
    applied = [ln.strip() for ln in open(os.path.join(tree, ".pc", "applied-patches"))]
    ours = [a for a in applied if a.startswith(SUFFIX_NAME + "/")]
    if len(ours) != len(patches):
        raise LabError(f"only {len(ours)} of {len(patches)} patches of the series applied")
    step(f"package: source package {os.path.basename(dsc)}: {len(applied) - len(ours)} Debian "
         f"patch(es) + {len(ours)} of ours apply with fuzz 0; "
         f"{len(docs)} .rst file(s) of the series pass rst2html5 --strict")
    return base, {"version": version, "dsc": dsc, "srcdir": wd, "tree": tree,
                  "debian_patches": len(applied) - len(ours), "ours": len(ours), "ts": ts,
                  "lintian_overrides": overridden}


def check_prepare(stack_dir):
    """The test-suite stage: prepare() in a scratch directory, removed afterwards."""
    base, info = prepare(stack_dir, sub="check")
    shutil.rmtree(info["srcdir"], ignore_errors=True)
    return info


def _deps_tarball(base, tree):
    """Cache key of a root with the Build-Depends installed: suite, the
    format of the root it is made from, and debian/control."""
    h = hashlib.sha256(chroot.ROOT_FORMAT.encode())
    with open(os.path.join(tree, "debian", "control"), "rb") as fh:
        h.update(fh.read())
    h = h.hexdigest()[:12]
    return os.path.join(chroot.chroots_dir(), f"{base['suite']}-{chroot.host_arch()}-"
                        f"{base['package']}-deps-{h}.tar.zst")


def build_root(stack_dir, base, info):
    """A fresh root of the suite with the source unpacked and the Build-Depends installed.

    The root with the Build-Depends is cached (keyed by debian/control), so
    only the first build of a base downloads them.  Returns (root, /build path).
    """
    tar_base = chroot.base_tarball(base["suite"])
    tar_deps = _deps_tarball(base, info["tree"])
    rootdir = os.path.join(workdir(base), "root")
    root = chroot.Root(tar_deps if os.path.exists(tar_deps) else tar_base, rootdir)
    logs = logs_dir()
    tag = f"{base['package']}-{info['version']}"
    try:
        bdir = os.path.join(rootdir, "build")
        mkdirs(bdir)
        for f in glob.glob(os.path.join(info["srcdir"], "*")):
            if os.path.isfile(f):
                shutil.copy(os.path.realpath(f), os.path.join(bdir, os.path.basename(f)))
        run(["chown", "-R", "2000:2000", bdir])
        dsc = os.path.basename(info["dsc"])
        root.run(f"cd /build && dpkg-source -x {dsc} src", user="builder",
                 log=os.path.join(logs, f"package-{tag}-unpack.log"))
        if not os.path.exists(tar_deps):
            step(f"package: installing {base['package']}'s Build-Depends in the {base['suite']} "
                 f"root (apt-get build-dep)")
            root.run("apt-get update -q && cd /build && apt-get build-dep -y -q ./src",
                     log=os.path.join(logs, f"package-{tag}-deps.log"))
            step(f"package: caching the root with Build-Depends as {os.path.basename(tar_deps)}")
            run(["tar", "-C", rootdir, "--exclude=./build", "-cf", tar_deps + ".part"]
                + chroot.tar_args() + ["."], quiet=True)
            os.rename(tar_deps + ".part", tar_deps)
        else:
            step(f"package: Build-Depends from the cached root {os.path.basename(tar_deps)}")
            # The cached root must still satisfy them (the check fails otherwise).
            root.run("cd /build/src && dpkg-checkbuilddeps",
                     log=os.path.join(logs, f"package-{tag}-deps.log"))
    except BaseException:
        root.remove()
        raise
    return root, bdir


def buildpackage(root, info, tag, jobs=None):
    """dpkg-buildpackage -b in a root from build_root(), as an unprivileged user
    without network, its test suite on; returns (log text, meson test counts,
    seconds)."""
    jobs = jobs or os.cpu_count() or 2
    log = os.path.join(logs_dir(), f"package-{tag}-build.log")
    step(f"package: dpkg-buildpackage -b -uc -us (parallel={jobs}, test suite on, no "
         f"network); log: {_rel(log)}")
    script = (f"cd /build/src && export DEB_BUILD_OPTIONS='parallel={jobs}' "
              f"SOURCE_DATE_EPOCH={info['ts']} && "
              f"dpkg-buildpackage -b -uc -us -rfakeroot")
    rc, secs = watch(root.argv(script, user="builder", net=False), log, "package: building")
    text = open(log, errors="replace").read()
    counts = mesonlog.summary(text)
    if rc != 0:
        raise LabError(f"dpkg-buildpackage failed ({rc}) after {secs / 60:.0f} min; "
                       f"test summary {counts or 'none'}; see {log}\n"
                       + "\n".join(text.splitlines()[-30:]))
    step(f"package: built in {secs / 60:.1f} min; meson test: "
         + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return text, counts, secs


def collect(bdir, srcdir, out, lint_log):
    """A build's results into out, made anew: the binary packages with their
    .buildinfo and .changes from bdir, the source package from srcdir (links
    followed: the orig tarball is one), and the lintian log as lintian.txt."""
    shutil.rmtree(out, ignore_errors=True)
    mkdirs(out)
    for pat in ("*.deb", "*.ddeb", "*.buildinfo", "*.changes"):
        for f in glob.glob(os.path.join(bdir, pat)):
            shutil.copy(f, out)
    for f in glob.glob(os.path.join(srcdir, "*")):
        if os.path.isfile(f):
            shutil.copy(os.path.realpath(f), out)
    shutil.copy(lint_log, os.path.join(out, "lintian.txt"))


def build(stack_dir, jobs=None, keep_root=False):
    base, info = prepare(stack_dir)
    version = info["version"]
    jobs = jobs or os.cpu_count() or 2
    root, bdir = build_root(stack_dir, base, info)
    tag = f"{base['package']}-{version}"
    try:
        log = os.path.join(logs_dir(), f"package-{tag}-build.log")
        text, counts, secs = buildpackage(root, info, tag, jobs)
        lint_log, tags = lintian.run_lintian(root, tag)
        out = outdir(base)
        collect(bdir, info["srcdir"], out, lint_log)
        own = lintian.check(lint_log, LINTIAN_DEBIANS_OWN,
                            label="Debian's own, as on Debian's unmodified package")
        ours_ok = []
        for t in OUR_TESTS:
            # " 132/161 libvirt:bin / NAME   OK" (11.x) or " 130/174 NAME   OK" (9.x)
            hit = [ln for ln in re.findall(rf"^[ \t]*\d+/\d+[ \t]+(?:\S+ / )?{re.escape(t)}"
                                           rf"[ \t].*$", text, re.M)
                   if re.search(r"\sOK\s", ln)]
            if not hit:
                raise LabError(f"the build passed but {t} did not run OK in it; see {log}")
            ours_ok.append(hit[-1])
            step(f"package: our test ran: {' '.join(hit[-1].split())[:110]}")
        debs = sorted(glob.glob(os.path.join(out, "*.deb")))
        with open(os.path.join(out, "SUMMARY"), "w") as fh:
            fh.write(f"package={base['package']}\nversion={version}\nbase={base['version']}\n"
                     f"suite={base['suite']}\nstack={_rel(stack_dir)}\n"
                     f"patches={info['ours']}\ndebian_patches={info['debian_patches']}\n"
                     f"build_minutes={secs / 60:.1f}\nparallel={jobs}\n"
                     + "".join(f"meson_{k.lower().replace(' ', '_')}={v}\n"
                               for k, v in counts.items())
                     + "".join(f"test={' '.join(ln.split())}\n" for ln in ours_ok)
                     + f"lintian_errors={tags['E']}\nlintian_warnings={tags['W']}\n"
                     f"lintian_info={tags['I']}\nlintian_debians_own={' '.join(own)}\n"
                     f"lintian_overrides={' '.join(info['lintian_overrides'])}\n"
                     f"debs={len(debs)}\n")
        step(f"package: {len(debs)} .deb in {_rel(out)}")
        return base, out
    finally:
        if not keep_root:
            root.remove()


def install_check(stack_dir, kvm_guest=None):
    """The source package's autopkgtests against the built .debs: Debian's
    own (debian/tests) and the series' (libvirt-patches/autopkgtest/), in a
    fresh testbed of the suite (autopkgtest.py).  A test that needs an
    isolation the testbed does not offer is skipped, and named.  With
    kvm_guest (kernel, initrd), Debian's KVM test runs too, in a testbed
    given this host's KVM (autopkgtest.run_kvm_test())."""
    base = read_kv(os.path.join(stack_dir, "BASE"))
    version = local_version(base)
    out = outdir(base)
    debs = sorted(d for d in glob.glob(os.path.join(out, "*.deb"))
                  if not os.path.basename(d).split("_")[0].endswith("-dbgsym"))
    dsc = os.path.join(out, f"{base['package']}_{version.split(':')[-1]}.dsc")
    if not debs or not os.path.exists(dsc):
        raise LabError(f"no source and binary packages in {_rel(out)}; run tools/lab package "
                       f"libvirt --stack {_rel(stack_dir)} first")
    tag = f"{base['package']}-{version}"
    log = os.path.join(logs_dir(), f"package-{tag}-autopkgtest.log")
    results = autopkgtest.run_tests(dsc, debs, base["suite"], os.path.join(out, "autopkgtest"),
                                    log)
    if kvm_guest:
        test = autopkgtest.KVM_TEST
        control = autopkgtest.source_control(_debian_tarball(dsc))
        results = [r for r in results if r[0] != test] + autopkgtest.run_kvm_test(
            dsc, debs, base["suite"], os.path.join(out, f"autopkgtest-{test}"),
            os.path.join(logs_dir(), f"package-{tag}-autopkgtest-{test}.log"),
            kvm_guest[0], kvm_guest[1], control)
    # (autopkgtest reports a test it cannot run twice: when it finds it, and
    # in its summary)
    passed = list(dict.fromkeys(n for n, r, _ in results if r == "PASS"))
    skipped = list(dict.fromkeys(n for n, r, _ in results if r != "PASS"))
    summary = os.path.join(out, "SUMMARY")
    keep = ([ln for ln in open(summary) if not ln.startswith("autopkgtest_")]
            if os.path.exists(summary) else [])
    with open(summary, "w") as fh:
        fh.write("".join(keep) + f"autopkgtest_passed={' '.join(passed)}\n"
                 f"autopkgtest_skipped={' '.join(skipped)}\n")
    step(f"install check: {tag}: {len(passed)} autopkgtest(s) passed ({', '.join(passed)}); "
         f"{len(skipped)} skipped for isolation this testbed lacks "
         f"({', '.join(skipped) or 'none'})")


def _debian_tarball(dsc):
    """The debian tarball beside a source package's .dsc."""
    path = dsc[:-len(".dsc")] + ".debian.tar.xz"
    if not os.path.exists(path):
        raise LabError(f"no {_rel(path)}; run tools/lab package libvirt first")
    return path


def command(args):
    if os.geteuid() != 0:
        raise LabError("tools/lab package needs root (apt, mmdebstrap, chroot)")
    # One command from a clean clone: deb-src entries and the tools it needs
    # (mmdebstrap, quilt, dpkg-dev, ...) come from setup, idempotent.
    if args.kvm_guest:
        if args.what != "libvirt" or args.no_install_check or args.prepare_only:
            raise LabError("--kvm-guest is an installation check of libvirt's packages")
        autopkgtest.check_kvm_guest(*args.kvm_guest)
    sources.setup()
    if args.what == "libvirt":
        stack_dir = resolve_stack(args.stack, "libvirt")
        base = read_kv(os.path.join(stack_dir, "BASE"))
        if base.get("package") != "libvirt":
            raise LabError(f"{stack_dir}/BASE is for {base.get('package')}, not libvirt")
        if args.prepare_only:
            _, info = prepare(stack_dir)
            print(info["dsc"])
            return 0
        if not args.install_check_only:
            build(stack_dir, jobs=args.jobs, keep_root=args.keep_root)
        if not args.no_install_check:
            install_check(stack_dir, kvm_guest=args.kvm_guest)
        return 0
    from . import kernel_deb
    stack_dir = resolve_stack(args.stack, "linux")
    return kernel_deb.command(stack_dir, args)
