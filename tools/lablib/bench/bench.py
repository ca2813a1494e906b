# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench: the performance evidence of docs/performance.md."""

import os

from ..common import LabError
from .benchkit import command_line, republish


def command(args):
    """tools/lab bench WHAT: args has the options of WHAT's parser only
    (tools/lablib/commands.py); --replot is for the benchmarks with plots."""
    argv = command_line()
    what = ["sched", "guests", "control"] if args.what == "all" else [args.what]
    if getattr(args, "replot", False):
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
            kw = {k: v for k, v in (("mix", args.mix), ("seconds", args.seconds))
                  if v is not None}
            benchguests.run_wakers(outdir=args.out, command=argv, **kw)
        elif w == "mixed":
            from . import benchmixed
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds),
                                    ("windows", args.windows)) if v is not None}
            benchmixed.run_bench(outdir=args.out, command=argv, only=args.action, **kw)
        elif w == "tuned":
            from . import benchtuned
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds))
                  if v is not None}
            benchtuned.run_bench(outdir=args.out, command=argv, **kw)
        elif w == "exporter":
            from . import benchexporter
            kw = {k: v for k, v in (("sizes", args.mix), ("reps", args.reps),
                                    ("seconds", args.seconds)) if v is not None}
            benchexporter.run_bench(outdir=args.out, command=argv, **kw)
        elif w == "scale":
            # Inside the test host (tools/lablib/testing/scalehost.py boots it)
            from . import benchscale
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds))
                  if v is not None}
            balancing = {"off": [0], "on": [1], "both": [0, 1]}[args.numa_balancing]
            if not args.out:
                raise LabError("bench scale --in-guest: --out DIR, where the records go")
            return benchscale.run_in_guest(args.mix, balancing=balancing, out=args.out,
                                           tunings=args.tuning, **kw)
        elif w == "host":
            from . import benchhost
            benchhost.run_bench(mixes_wanted=args.mix, runs=args.runs,
                                seconds=10 if args.seconds is None else args.seconds, outdir=args.out, command=argv,
                                quick=args.quick, few_cpus=args.few_cpus,
                                beside_vms=args.beside_vms, trace=args.trace)
        elif w == "control":
            from . import benchcontrol
            kw = {"reps": args.reps} if args.reps is not None else {}
            benchcontrol.run_bench(outdir=args.out, command=argv, **kw)
        else:
            raise LabError(f"unknown benchmark {w}")
    return 0


def replot(what, outdir):
    from ..common import build_dir
    from . import benchcontrol, benchguests, benchhost, benchsched
    mod = {"sched": benchsched, "guests": benchguests, "control": benchcontrol,
           "host": benchhost}[what]
    republish(what, outdir or os.path.join(build_dir(), "bench", what), mod.markdown, mod.plot)
