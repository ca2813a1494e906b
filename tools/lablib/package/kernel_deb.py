# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab package kernel: the kernel series on Debian's linux source package.

Debian's kernel handbook documents 'debian/bin/test-patches' for building a
kernel with local patches: in the unpacked source package it applies the
patches on top of Debian's own (with fuzz 0), limits the build to one
flavour, adds a changelog entry (version suffix 'a~test') and builds that
flavour's packages with dpkg-buildpackage.  The full build runs it in a
fresh mmdebstrap root of the BASE's suite, then lintian on the .changes in
that root (lintian.py); lint() reruns that check on an earlier build's
output.

The quick check (--prepare-only, and a stage of 'tools/lab test') needs no
root: unpack the pinned orig and debian tarballs, apply Debian's series with
quilt, apply ours on top the way test-patches does (quilt import + push,
fuzz 0), then resolve the flavour's configuration from Debian's config files
(make olddefconfig on the patched tree) and check the options listed in
kernel-patches/config/package.config.
"""

import glob
import os
import re
import shlex
import shutil
import time

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

from ..common import LabError, build_dir, logs_dir, mkdirs, read_kv, run, step, watch
from . import chroot, lintian
from ..stack import patchqueue, sources, stacks

QUILT_ENV = {"QUILT_PATCHES": "debian/patches", "QUILT_PC": ".pc", "LC_ALL": "C.UTF-8"}
# test-patches' build profiles (no docs, no udebs, no source package, no dbg).
PROFILES = ("nodoc,noudeb,pkg.linux.nosource,pkg.linux.mintools,pkg.linux.nokerneldbg,"
            "pkg.linux.nokerneldbginfo")
# test-patches' changelog entry adds this to Debian's version.
TEST_SUFFIX = "a~test"
# lintian's warnings on the packages of test-patches that the series does
# not cause; any other error or warning fails the kernel build.
LINTIAN_TEST_PATCHES = {
    "package-has-long-file-name":
        "the image package's name comes from the version Debian's test-patches "
        "gives a local build (ABI 6.12+unreleased, suffix a~test), not from anything we chose",
}


def _quilt(args, tree, log):
    return run(["quilt", "--quiltrc", "-"] + args, cwd=tree, env=QUILT_ENV, log=log,
               check=False)


def _workdir(base):
    return os.path.join(build_dir(), "package", f"{base['package']}-{base['version']}")


def unpack(stack_dir, sub="check", partial=False):
    base, paths = sources.fetch_base(stack_dir, which=("orig", "debian"))
    wd = os.path.join(_workdir(base), sub)
    shutil.rmtree(wd, ignore_errors=True)
    tree = os.path.join(wd, base["topdir"])
    mkdirs(tree)
    run(["tar", "-xf", paths["debian"], "-C", tree], quiet=True)
    if partial:
        # Only what quilt and Kconfig read: the files any patch touches, every
        # Kconfig/Makefile/Kbuild file, scripts/ and the architecture's tree.
        # A tenth of the files of the full tree, so the check stays quick.
        touched = set()
        pdirs = [os.path.join(tree, "debian", "patches"), stack_dir]
        for pdir in pdirs:
            for name in patchqueue.read_series(pdir):
                with open(os.path.join(pdir, name), errors="replace") as fh:
                    for line in fh:
                        # quilt applies with -p1: drop the first component.
                        m = re.match(r"^(?:---|\+\+\+) [^/\s]+/(\S+)", line)
                        if m:
                            touched.add(m.group(1))
        top = base["topdir"]
        members = [f"{top}/{t}" for t in sorted(touched)]
        patterns = [f"{top}/Makefile", "*/Kconfig*", "*/Makefile*", "*/Kbuild*",
                    f"{top}/scripts/*", f"{top}/arch/x86/*", f"{top}/include/*"]
        lst = os.path.join(wd, "members")
        with open(lst, "w") as fh:
            fh.write("\n".join(patterns + members) + "\n")
        step(f"kernel package: unpacking what the patches and Kconfig need from "
             f"{os.path.basename(paths['orig'])} ({len(touched)} patched paths)")
        # Paths only new files use are not in the tarball ("Not found in archive").
        p = run(["tar", "-xf", paths["orig"], "-C", tree, "--strip-components=1",
                 "--wildcards", "--wildcards-match-slash", "-T", lst], capture=True,
                check=False)
        other = [ln for ln in p.stderr.splitlines() if ln.strip() and
                 "Not found in archive" not in ln and "Exiting with failure" not in ln]
        if p.returncode not in (0, 2) or other:
            raise LabError(f"unpacking {paths['orig']} failed:\n" + "\n".join(other[-20:]))
    else:
        step(f"kernel package: unpacking {os.path.basename(paths['orig'])} and "
             f"{os.path.basename(paths['debian'])}")
        run(["tar", "-xf", paths["orig"], "-C", tree, "--strip-components=1"], quiet=True)
    return base, paths, wd, tree


def apply_series(stack_dir, tree, base):
    """Debian's patches with quilt, then ours as test-patches applies them (fuzz 0)."""
    log = os.path.join(logs_dir(), f"package-linux-{base['version']}-quilt.log")
    n_deb = len(patchqueue.read_series(os.path.join(tree, "debian", "patches")))
    step(f"kernel package: quilt push -a: Debian's {n_deb} patches")
    if _quilt(["push", "-a", "--fuzz=0", "-q"], tree, log).returncode != 0:
        raise LabError(f"Debian's own patches do not apply to the orig tarball; see {log}")
    patches = patchqueue.read_series(stack_dir)
    for i, name in enumerate(patches, 1):
        rel = f"test/{name}"
        if _quilt(["import", "-P", rel, os.path.join(stack_dir, name)], tree,
                  log + f".{i}").returncode != 0:
            raise LabError(f"quilt import of {name} failed; see {log}.{i}")
        if _quilt(["push", "--fuzz=0"], tree, log + f".{i}").returncode != 0:
            tail = open(log + f".{i}", errors="replace").read().strip().splitlines()[-15:]
            raise LabError(f"patch {i}/{len(patches)} {stack_dir}/{name} does not apply on "
                           f"Debian's patched tree (fuzz 0):\n" + "\n".join(tail))
    step(f"kernel package: {len(patches)} patch(es) of {os.path.basename(stack_dir)} apply on "
         f"Debian's patched tree with fuzz 0")
    return n_deb, len(patches)


def _load_toml(path):
    if tomllib is None:
        raise LabError("reading Debian's defines.toml needs Python 3.11 (tomllib)")
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def flavour_configs(tree, arch, flavour, featureset="none"):
    """Debian's config files of one flavour, in the order debian/rules.real merges them."""
    cdir = os.path.join(tree, "debian", "config")
    top = _load_toml(os.path.join(cdir, "defines.toml"))
    kernelarch = None
    for ka in top.get("kernelarch", []):
        if any(d.get("name") == arch for d in ka.get("debianarch", [])):
            kernelarch = ka["name"]
    adefs = _load_toml(os.path.join(cdir, arch, "defines.toml"))
    flavours = {f["name"]: f for f in adefs.get("flavour", [])}
    if flavour not in flavours:
        raise LabError(f"Debian's {arch} has no flavour {flavour!r}; it has: "
                       f"{', '.join(flavours)}")
    files = [os.path.join(cdir, "config")]
    if kernelarch:
        files.append(os.path.join(cdir, f"kernelarch-{kernelarch}", "config"))
    files.append(os.path.join(cdir, arch, "config"))
    for extra in flavours[flavour].get("build", {}).get("config", []):
        files.append(os.path.join(cdir, extra))
    own = os.path.join(cdir, arch, f"config.{flavour}")
    if os.path.exists(own):
        files.append(own)
    if featureset != "none":
        raise LabError("only the featureset 'none' is supported")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise LabError(f"Debian's config files not found: {' '.join(missing)}")
    return files


def _merge(files):
    vals = {}
    for f in files:
        with open(f) as fh:
            for line in fh:
                line = line.strip()
                m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
                if m:
                    vals[m.group(1)] = m.group(2)
                    continue
                m = re.match(r"^# (CONFIG_\w+) is not set$", line)
                if m:
                    vals[m.group(1)] = "n"
    return "".join(f"{k}={v}\n" if v != "n" else f"# {k} is not set\n" for k, v in vals.items())


def check_config(stack_dir, tree, base, flavour):
    """The flavour's resolved .config has every option of config/package.config."""
    arch = chroot.host_arch()
    files = flavour_configs(tree, arch, flavour)
    out = os.path.join(os.path.dirname(tree), f"config-{arch}_none_{flavour}")
    shutil.rmtree(out, ignore_errors=True)
    mkdirs(out)
    with open(os.path.join(out, ".config"), "w") as fh:
        fh.write(_merge(files))
    step(f"kernel package: resolving the {flavour} flavour's config ({len(files)} Debian "
         f"config files, make olddefconfig)")
    karch = {"amd64": "x86_64", "arm64": "arm64"}.get(arch, arch)
    run(["make", "-s", "-C", tree, f"O={out}", f"ARCH={karch}", "olddefconfig"],
        log=os.path.join(logs_dir(), f"package-linux-{base['version']}-config.log"))
    have = open(os.path.join(out, ".config")).read()
    want_file = os.path.join(stack_dir, "config", "package.config")
    bad, n = [], 0
    for line in open(want_file):
        m = re.match(r"^(CONFIG_\w+)=(\S+)", line.strip())
        if not m:
            continue
        n += 1
        key, val = m.groups()
        if not re.search(rf"^{key}={re.escape(val)}$", have, re.M):
            got = re.search(rf"^{key}=(\S+)$", have, re.M)
            bad.append(f"{key}={val} (flavour has {got.group(1) if got else 'not set'})")
    if bad:
        raise LabError(f"Debian's {flavour} flavour lacks options {os.path.basename(stack_dir)}/"
                       f"config/package.config needs: " + ", ".join(bad))
    step(f"kernel package: {flavour} flavour has all {n} options of "
         f"{os.path.basename(stack_dir)}/config/package.config")
    return n


def quick_check(stack_dir, flavour="amd64", partial=True):
    """The test-suite stage: the series applies on Debian's tree; the flavour's config fits."""
    base, paths, wd, tree = unpack(stack_dir, sub="check", partial=partial)
    try:
        n_deb, n_ours = apply_series(stack_dir, tree, base)
        n_cfg = check_config(stack_dir, tree, base, flavour)
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    return n_deb, n_ours, n_cfg


def outdir(version, flavour):
    """Where a build of Debian's version (BASE's) and flavour puts its packages."""
    return os.path.join(build_dir(), "packages", f"linux_{version}{TEST_SUFFIX}_{flavour}")


def _tag(version, flavour):
    """The name of a build's logs: _build/logs/package-TAG-*.log."""
    return f"linux-{version}-{flavour}"


def lint(path, stack_dir=None, root=None, tag=None):
    """lintian on a kernel build's output: path is its directory (every
    .changes in it) or one .changes.  Runs in root (the build's), or in a
    fresh root of the suite of stack_dir's BASE (default: the kernel stack),
    removed afterwards.  The log goes to _build/logs/package-TAG-lintian.log
    (TAG from the directory's name unless given) and into the directory as
    lintian.txt.  Fails on an error or warning LINTIAN_TEST_PATCHES does not
    explain; returns ({'E', 'W', 'I': counts}, [explained tags])."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        out = path
        files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(out, "*.changes")))
    else:
        out, files = os.path.dirname(path), [os.path.basename(path)]
    if not files or not all(f.endswith(".changes") and os.path.isfile(os.path.join(out, f))
                            for f in files):
        raise LabError(f"{path}: no .changes of a kernel build to run lintian on")
    if tag is None:
        m = re.fullmatch(rf"linux_(.+){re.escape(TEST_SUFFIX)}_(.+)", os.path.basename(out))
        tag = _tag(*m.groups()) if m else f"linux-{os.path.basename(out)}"
    own = root is None
    if own:
        base = read_kv(os.path.join(stack_dir or stacks.default("linux").dir, "BASE"))
        root = chroot.Root(chroot.base_tarball(base["suite"]),
                           os.path.join(_workdir(base), "lint-root"))
    try:
        # the directory as /lint in the root, for this command only
        lint_log, tags = lintian.run_lintian(root, tag, files=shlex.join(files), cwd="/lint",
                                             binds=[(out, "/lint")], what="kernel package")
    finally:
        if own:
            root.remove()
    shutil.copy(lint_log, os.path.join(out, "lintian.txt"))
    found = lintian.check(lint_log, LINTIAN_TEST_PATCHES, what="kernel package")
    return tags, found


def build(stack_dir, flavour="amd64", jobs=None, keep_root=False):
    """Full build of one flavour's image package with test-patches in a build
    root, then lintian on it (lint())."""
    base, paths = sources.fetch_base(stack_dir, which=("orig", "debian"))
    jobs = jobs or os.cpu_count() or 2
    patches = patchqueue.read_series(stack_dir)
    rootdir = os.path.join(_workdir(base), "root")
    root = chroot.Root(chroot.base_tarball(base["suite"]), rootdir)
    logs = logs_dir()
    tag = _tag(base["version"], flavour)
    try:
        bdir = os.path.join(rootdir, "build")
        mkdirs(os.path.join(bdir, "patches"))
        for p in paths.values():
            shutil.copy(p, bdir)
        for name in patches:
            shutil.copy(os.path.join(stack_dir, name), os.path.join(bdir, "patches", name))
        run(["chown", "-R", "2000:2000", bdir])
        step(f"kernel package: unpacking the source package in the {base['suite']} root")
        root.run(f"cd /build && mkdir src && tar -xf {os.path.basename(paths['orig'])} -C src "
                 f"--strip-components=1 && tar -xf {os.path.basename(paths['debian'])} -C src",
                 user="builder", log=os.path.join(logs, f"package-{tag}-unpack.log"))
        step(f"kernel package: installing Build-Depends (profiles {PROFILES}) and test-patches' "
             f"tools")
        root.run(f"apt-get update -q && apt-get install -y -q devscripts quilt && "
                 f"cd /build && apt-get build-dep -y -q -P {PROFILES} ./src",
                 log=os.path.join(logs, f"package-{tag}-deps.log"))
        # test-patches expects the tree dpkg-source -x leaves: Debian's own
        # series applied with quilt (debian/rules source checks for .pc).
        step("kernel package: applying Debian's patch series (quilt push -a)")
        root.run("cd /build/src && QUILT_PATCHES=debian/patches QUILT_PC=.pc "
                 "quilt --quiltrc - push -a -q",
                 user="builder", log=os.path.join(logs, f"package-{tag}-quilt.log"))
        log = os.path.join(logs, f"package-{tag}-build.log")
        step(f"kernel package: debian/bin/test-patches -f {flavour} -j {jobs} "
             f"({len(patches)} patches); log: {os.path.relpath(log, build_dir())}")
        plist = " ".join(f"../patches/{n}" for n in patches)
        script = (f"cd /build/src && export DEBEMAIL=dev@unsteal.invalid "
                  f"DEBFULLNAME='Unsteal Developers' && "
                  f"bash debian/bin/test-patches -f {flavour} -j {jobs} {plist}")
        rc, secs = watch(root.argv(script, user="builder", net=False), log,
                          "kernel package: building")
        if rc != 0:
            raise LabError(f"test-patches failed ({rc}) after {secs / 60:.0f} min; see {log}")
        out = outdir(base["version"], flavour)
        shutil.rmtree(out, ignore_errors=True)
        mkdirs(out)
        for f in glob.glob(os.path.join(bdir, "*.deb")) + glob.glob(
                os.path.join(bdir, "*.buildinfo")) + glob.glob(os.path.join(bdir, "*.changes")):
            shutil.copy(f, out)
        debs = glob.glob(os.path.join(out, "linux-image-*.deb"))
        if not debs:
            raise LabError(f"test-patches built no linux-image package; see {log}")
        # in the build root, as libvirt's and unsteal's builds run it
        tags, explained = lint(out, root=root, tag=tag)
        with open(os.path.join(out, "SUMMARY"), "w") as fh:
            fh.write(f"package=linux\nbase={base['version']}\nflavour={flavour}\n"
                     f"patches={len(patches)}\nbuild_minutes={secs / 60:.1f}\n"
                     f"parallel={jobs}\n"
                     f"lintian_errors={tags['E']}\nlintian_warnings={tags['W']}\n"
                     f"lintian_info={tags['I']}\nlintian_explained={' '.join(explained)}\n"
                     f"finished={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        step(f"kernel package: built in {secs / 60:.1f} min: "
             f"{', '.join(os.path.basename(d) for d in debs)} "
             f"in {os.path.relpath(out, build_dir())}")
    finally:
        if not keep_root:
            root.remove()


def command(stack_dir, args):
    if args.prepare_only:
        quick_check(stack_dir, flavour=args.flavour)
        return 0
    if args.install_check_only or args.no_install_check:
        raise LabError("--install-check-only and --no-install-check are for libvirt")
    build(stack_dir, flavour=args.flavour, jobs=args.jobs, keep_root=args.keep_root)
    return 0
