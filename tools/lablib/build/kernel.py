# SPDX-License-Identifier: GPL-2.0-or-later
"""Build the lab kernel (stock base or patched) from the trimmed config in the repo."""

import hashlib
import os
import re
import shutil

from ..common import LabError, ROOT, build_dir, images_dir, logs_dir, mkdirs, run, step
from ..stack import stacks
from . import CCACHE_DEPEND

CONFIG_DIR = os.path.join(ROOT, "kernel-patches", "config")


def _fragments(debug, extra=()):
    """lab.config, then each extra flavour's NAME.config, then debug.config."""
    frags = [os.path.join(CONFIG_DIR, "lab.config")]
    for name in extra:
        path = os.path.join(CONFIG_DIR, f"{name}.config")
        if not os.path.exists(path):
            raise LabError(f"kernel flavour {name!r}: {path} does not exist")
        frags.append(path)
    if debug:
        frags.append(os.path.join(CONFIG_DIR, "debug.config"))
    return frags


def _merged_fragment(outdir, debug, extra=()):
    text = ""
    for f in _fragments(debug, extra):
        with open(f) as fh:
            text += fh.read() + "\n"
    path = os.path.join(outdir, "unsteal-fragment.config")
    return path, text


def kenv():
    return {"CCACHE_BASEDIR": build_dir(), "CCACHE_NOHASHDIR": "1", "KBUILD_BUILD_USER": "unsteal",
            "KBUILD_BUILD_HOST": "lab", "KBUILD_BUILD_TIMESTAMP": "2000-01-01", **CCACHE_DEPEND}


def make_args(src, outdir):
    return ["make", "-s", "-C", src, f"O={outdir}", "ARCH=x86_64", "CC=ccache gcc",
            "HOSTCC=ccache gcc", f"-j{os.cpu_count() or 2}"]


def configure(src, outdir, debug=False, extra=()):
    mkdirs(outdir)
    frag, text = _merged_fragment(outdir, debug, extra)
    digest = hashlib.sha256(text.encode()).hexdigest()
    stamp = os.path.join(outdir, ".unsteal-config-stamp")
    if os.path.exists(os.path.join(outdir, ".config")) and os.path.exists(stamp) and \
            open(stamp).read() == digest:
        return
    step(f"kernel: configuring {os.path.basename(outdir)} (allnoconfig + "
         f"{', '.join(os.path.basename(f) for f in _fragments(debug, extra))})")
    with open(frag, "w") as fh:
        fh.write(text)
    run(make_args(src, outdir) + ["allnoconfig", f"KCONFIG_ALLCONFIG={frag}"], env=kenv(),
        quiet=True, log=os.path.join(logs_dir(), "kernel-config.log"))
    verify_config(os.path.join(outdir, ".config"), text)
    with open(stamp, "w") as fh:
        fh.write(digest)


def verify_config(dotconfig, fragment_text):
    """Every option the fragment asks for must have that value in the result
    (an option set twice, as a later fragment does over lab.config, by its
    last value, as kconfig takes it)."""
    with open(dotconfig) as fh:
        have = fh.read()
    want = {}
    for line in fragment_text.splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line.strip())
        if m:
            want[m.group(1)] = m.group(2)
    bad = []
    for key, val in want.items():
        if val == "n":
            if re.search(rf"^{key}=[ym]", have, re.M):
                bad.append(f"{key} should be off")
            continue
        if not re.search(rf"^{re.escape(key)}={re.escape(val)}$", have, re.M):
            bad.append(f"{key}={val}")
    if bad:
        raise LabError("the kernel config lacks options the lab needs (a dependency is "
                       "missing from kernel-patches/config/*.config?): " + ", ".join(bad))


def stock_tree(patched_wt):
    """A second work tree of the same repository checked out at the base."""
    path = patched_wt + "-stock"
    if not os.path.isdir(path):
        step(f"kernel: checking out the stock base into {path}")
        run(["git", "worktree", "add", "-f", "--detach", path, "base"], cwd=patched_wt,
            quiet=True)
    return path


def flavour_name(patched=True, debug=False, extra=()):
    """patched|stock, then -NAME per extra fragment, then -debug."""
    return ("patched" if patched else "stock") + "".join(f"-{e}" for e in extra) + \
        ("-debug" if debug else "")


def build(patched=True, debug=False, extra=()):
    """Build a bzImage; extra names more fragments (kernel-patches/config/NAME.config)."""
    from ..stack.patchqueue import ensure_worktree
    wt = ensure_worktree(stacks.get("kernel").dir)
    src = wt if patched else stock_tree(wt)
    flavour = flavour_name(patched, debug, extra)
    outdir = os.path.join(build_dir(), f"kernel-{flavour}")
    configure(src, outdir, debug, extra)
    step(f"kernel: building the {flavour} bzImage with ccache "
         f"(log in _build/logs/kernel-{flavour}.log; about 10 min cold on 2 cores, seconds warm with ccache)")
    run(make_args(src, outdir) + ["bzImage"], env=kenv(),
        log=os.path.join(logs_dir(), f"kernel-{flavour}.log"))
    mkdirs(images_dir())
    dest = os.path.join(images_dir(), f"bzImage-{flavour}")
    shutil.copyfile(os.path.join(outdir, "arch", "x86", "boot", "bzImage"), dest)
    step(f"kernel: {dest}")
    return dest


def build_tree(tree, what):
    """Build a check tree (used by 'tools/lab check kernel --build-each')."""
    outdir = tree + "-out"
    configure(tree, outdir)
    p = run(make_args(tree, outdir) + ["bzImage"], env=kenv(), check=False,
            log=os.path.join(logs_dir(), "check-kernel-build.log"))
    if p.returncode != 0:
        raise LabError(f"the kernel does not build with {what}; see "
                       f"_build/logs/check-kernel-build.log")


def image(patched=True):
    """Path of the built image, building it when missing."""
    flavour = "patched" if patched else "stock"
    path = os.path.join(images_dir(), f"bzImage-{flavour}")
    if not os.path.exists(path):
        return build(patched=patched)
    return path
