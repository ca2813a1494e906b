# SPDX-License-Identifier: GPL-2.0-or-later
"""What the benchmarks share: option checks, the lab they need, the
programs of tools/bench/ compiled and stopped, medians, and writing their
results.  The benchmark modules import this one; it imports none of them."""

import json
import os
import shlex
import statistics
import subprocess
import sys

from ..common import ROOT, LabError, build_dir, mkdirs, run, step


def command_line():
    """The tools/lab command being run, as the results record it."""
    return "tools/lab " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def check_args(mixes, known, reps, seconds):
    """The mixes to run (all by default), after checking the options."""
    mixes = mixes or list(known)
    for m in mixes:
        if m not in known:
            raise LabError(f"unknown mix {m!r}; known: {', '.join(known)}")
    if reps < 1 or seconds < 1:
        raise LabError("--reps and --seconds must be at least 1")
    return mixes


def prepare_lab(what, stock=False):
    """Set up and build what the lab benchmarks need: the patched libvirt
    (and stock libvirt with stock=True), the guest kernel and initramfs."""
    from ..lab import guest
    from ..build import kernel, libvirt
    from ..stack import sources
    sources.setup()
    libvirt.build()
    if stock:
        libvirt.build_stock()
    kernel.image(patched=True)
    guest.build_initramfs()
    if not libvirt.has_vcpu_cgroup():
        raise LabError(f"bench {what} needs the patched libvirt (vcpu_cgroup in qemu.conf)")


def build_program(name):
    """tools/bench/NAME.c compiled into _build/bench/NAME unless that is newer
    than the source; its path."""
    src = os.path.join(ROOT, "tools", "bench", f"{name}.c")
    binary = os.path.join(build_dir(), "bench", name)
    mkdirs(os.path.dirname(binary))
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(src):
        return binary
    step(f"bench: compiling tools/bench/{name}.c")
    run(["gcc", "-O2", "-Wall", "-Wextra", "-pthread", "-o", binary, src], quiet=True)
    return binary


def close_and_wait(proc, timeout=10):
    """End a child that runs until its stdin closes: close it, wait, and
    kill the child if it is still there after timeout seconds."""
    if proc.poll() is None:
        proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def median(xs):
    """The median of the values that are not None; None if there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def publish(name, results, outdir, markdown, plot=None):
    """Write NAME.json, NAME.md and the plots (if any) into outdir; print the table."""
    results["machine"]["load_after"] = open("/proc/loadavg").read().split()[:3]
    mkdirs(outdir)
    with open(os.path.join(outdir, f"{name}.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    md = markdown(results)
    with open(os.path.join(outdir, f"{name}.md"), "w") as fh:
        fh.write(md + "\n")
    if plot:
        plot(results, outdir)
    print(md)
    print(f"\nresults in {outdir}: {name}.json, {name}.md" + (" and the plots" if plot else ""))
    return results


def republish(name, outdir, markdown, plot):
    """--replot: NAME.md and the plots again from outdir/NAME.json, nothing
    measured; prints the table."""
    path = os.path.join(outdir, f"{name}.json")
    try:
        with open(path) as fh:
            results = json.load(fh)
    except (OSError, ValueError) as e:
        raise LabError(f"--replot: cannot read {path}: {e}")
    md = markdown(results)
    plot(results, outdir)
    with open(os.path.join(outdir, f"{name}.md"), "w") as fh:
        fh.write(md + "\n")
    print(md)
