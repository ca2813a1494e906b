# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench: the performance evidence of docs/performance.md."""

import json
import os
import shlex
import sys

from .common import LabError, mkdirs


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
    from . import demo, guest, kernel, libvirt, sources
    sources.setup()
    libvirt.build()
    if stock:
        libvirt.build_stock()
    kernel.image(patched=True)
    guest.build_initramfs()
    if not demo.series_has_vcpu_cgroup():
        raise LabError(f"bench {what} needs the patched libvirt (vcpu_cgroup in qemu.conf)")


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


def command(args):
    argv = "tools/lab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    what = ["sched", "guests", "control"] if args.what == "all" else [args.what]
    if args.replot and ("wakers" in what or "mixed" in what):
        raise LabError(f"bench {args.what} has no plots to redraw")
    if args.replot:
        for w in what:
            replot(w, args.out)
        return 0
    for w in what:
        if w == "sched":
            from . import benchsched
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds),
                                    ("top_shares", args.top_shares)) if v is not None}
            benchsched.run_bench(mixes=args.mix, outdir=args.out, command=argv, **kw)
        elif w == "guests":
            from . import benchguests
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds))
                  if v is not None}
            benchguests.run_bench(mixes=args.mix, outdir=args.out, command=argv, **kw)
        elif w == "wakers":
            from . import benchguests
            if args.mix and len(args.mix) > 1:
                raise LabError("bench wakers traces one mix at a time")
            kw = {k: v for k, v in (("mix", (args.mix or [None])[0]),
                                    ("seconds", args.seconds)) if v is not None}
            benchguests.run_wakers(outdir=args.out, command=argv, **kw)
        elif w == "mixed":
            from . import benchmixed
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds))
                  if v is not None}
            benchmixed.run_bench(outdir=args.out, command=argv, **kw)
        elif w == "control":
            from . import benchcontrol
            kw = {"reps": args.reps} if args.reps is not None else {}
            benchcontrol.run_bench(outdir=args.out, command=argv, **kw)
        else:
            raise LabError(f"unknown benchmark {w}")
    return 0


def replot(what, outdir):
    from .common import BUILD
    from . import benchcontrol, benchguests, benchsched
    mod = {"sched": benchsched, "guests": benchguests, "control": benchcontrol}[what]
    outdir = outdir or os.path.join(BUILD, "bench", what)
    path = os.path.join(outdir, f"{what}.json")
    try:
        with open(path) as fh:
            results = json.load(fh)
    except (OSError, ValueError) as e:
        raise LabError(f"--replot: cannot read {path}: {e}")
    md = mod.markdown(results)
    mod.plot(results, outdir)
    with open(os.path.join(outdir, f"{what}.md"), "w") as fh:
        fh.write(md + "\n")
    print(md)
