# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench: the performance evidence of docs/performance.md."""

import shlex
import sys

from .common import LabError


def command(args):
    argv = "tools/lab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    what = ["sched", "guests", "control"] if args.what == "all" else [args.what]
    for w in what:
        if w == "sched":
            from . import benchsched
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds))
                  if v is not None}
            benchsched.run_bench(mixes=args.mix, outdir=args.out, command=argv, **kw)
        elif w == "guests":
            from . import benchguests
            kw = {k: v for k, v in (("reps", args.reps), ("seconds", args.seconds))
                  if v is not None}
            benchguests.run_bench(mixes=args.mix, outdir=args.out, command=argv, **kw)
        elif w == "control":
            from . import benchcontrol
            kw = {"reps": args.reps} if args.reps is not None else {}
            benchcontrol.run_bench(outdir=args.out, command=argv, **kw)
        else:
            raise LabError(f"unknown benchmark {w}")
    return 0
