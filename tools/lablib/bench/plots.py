# SPDX-License-Identifier: GPL-2.0-or-later
"""PNG plots of the benchmarks' results (matplotlib, Agg backend).

matplotlib is installed from Debian (python3-matplotlib) on first use.
"""

import math
import os

from ..common import step
from ..config import VCPU_CGROUP_MODES


def _pyplot():
    from ..stack import sources
    if os.geteuid() == 0:
        sources.ensure_group("benchmarks", sources.BENCH_PACKAGES, quiet_present=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


MODE_COLOURS = {"per-domain": "#c0504d", "per-host": "#4f81bd",
                "per-domain steal": "#c0504d", "per-domain idle steal": "#e6b9b8",
                "per-host steal": "#4f81bd", "per-host idle steal": "#b9cde5",
                "per-domain-scaled": "#9bbb59",
                "stock": "#7f7f7f", "patched per-domain": "#c0504d",
                "patched per-host": "#4f81bd"}


def sched_shares(results, path):
    """One panel per mix: median CPU share of every vCPU thread, both modes."""
    plt = _pyplot()
    mixes = results["mixes"]
    fig, axes = plt.subplots(len(mixes), 1, figsize=(9, 2.8 * len(mixes)), squeeze=False)
    for ax, mix in zip(axes[:, 0], mixes):
        keys = list(mix["median"]["per-domain"]["threads"])
        xs = range(len(keys))
        for j, mode in enumerate(VCPU_CGROUP_MODES):
            ys = [mix["median"][mode]["threads"][k]["share"] * 100 for k in keys]
            ax.bar([x + (j - 0.5) * 0.38 for x in xs], ys, width=0.38, label=mode,
                   color=MODE_COLOURS[mode])
        ax.set_xticks(list(xs))
        ax.set_xticklabels(keys, fontsize=8)
        ax.set_ylabel("CPU share %")
        ax.set_title(f"{mix['mix']}: {mix['description']}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Median CPU share per vCPU thread on {results['machine']['cpus']} CPUs "
                 f"({results['reps']} x {results['seconds']} s windows per mode)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    step(f"bench: wrote {path}")


def sched_ratios(results, path):
    """Large/small per-vCPU ratio and Jain's index per mix, both modes, every repetition."""
    plt = _pyplot()
    mixes = results["mixes"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for j, mode in enumerate(VCPU_CGROUP_MODES):
        for i, mix in enumerate(mixes):
            x = i + (j - 0.5) * 0.3
            ratios = [r[mode]["ratio"] for r in mix["reps"] if r[mode]["ratio"] is not None]
            jains = [r[mode]["jain"] for r in mix["reps"]]
            if ratios:
                a1.scatter([x] * len(ratios), ratios, s=12, color=MODE_COLOURS[mode],
                           label=mode if i == 0 else None)
                a1.plot([x - 0.12, x + 0.12], [mix["median"][mode]["ratio"]] * 2,
                        color=MODE_COLOURS[mode])
            a2.scatter([x] * len(jains), jains, s=12, color=MODE_COLOURS[mode],
                       label=mode if i == 0 else None)
            a2.plot([x - 0.12, x + 0.12], [mix["median"][mode]["jain"]] * 2,
                    color=MODE_COLOURS[mode])
    for ax, title in ((a1, "large/small per-vCPU share (ideal 1.0)"),
                      (a2, "Jain's fairness index, busy vCPUs (ideal 1.0)")):
        ax.set_xticks(range(len(mixes)))
        ax.set_xticklabels([m["mix"] for m in mixes], fontsize=8)
        ax.axhline(1.0, color="black", lw=0.6, ls=":")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    a1.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    step(f"bench: wrote {path}")


def bars(path, title, ylabel, groups, series, values, errs=None, log=False, size=(8, 3.6)):
    """Grouped bars: values[s][g] for series s in groups g (errs likewise)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=size)
    n = len(series)
    w = 0.8 / n
    for j, s in enumerate(series):
        xs = [i + (j - (n - 1) / 2) * w for i in range(len(groups))]
        ax.bar(xs, values[j], width=w, label=s, color=MODE_COLOURS.get(s),
               yerr=errs[j] if errs else None, capsize=3)
    if log:
        ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    step(f"bench: wrote {path}")


def sched_steal(results, path):
    """Total steal and its idle part per mix, both modes (medians)."""
    mixes = [m["mix"] for m in results["mixes"]]
    series, vals = [], []
    for mode in VCPU_CGROUP_MODES:
        for f, label in (("steal", "steal"), ("idle_steal", "idle steal")):
            series.append(f"{mode} {label}")
            vals.append([m["median"][mode][f] for m in results["mixes"]])
    bars(path, "median total steal and idle steal, vCPU-seconds per second", "vCPUs",
         mixes, series, vals)


def scale_idle_steal(results, path, layouts):
    """bench scale: median exact idle steal per mix and layout, with the
    range of the repetitions as error bars."""
    mixes = results["mixes"]
    groups = [f"{m['mix']}\n{m['cpus']} CPUs, NUMA\nbalancing {'on' if m['numa_balancing'] else 'off'}"
              + ("" if m.get("tuning", "none") == "none" else f"\n{m['tuning']}")
              for m in mixes]
    vals, errs = [], []
    for lay in layouts:
        # No bar where every window was refused (benchscale.add_idle_steal):
        # no median, no range
        med = [m["median"][lay]["idle_steal"] for m in mixes]
        rng = [m["range"][lay].get("idle_steal") for m in mixes]
        vals.append([math.nan if x is None else x for x in med])
        errs.append([[x - r[0] if r else 0.0 for x, r in zip(med, rng)],
                     [r[1] - x if r else 0.0 for x, r in zip(med, rng)]])
    bars(path, f"idle steal, exact (median and range of {results['reps']} repetitions), "
               f"TCG {results['tcg']}-threaded", "vCPUs", groups, list(layouts), vals, errs,
         size=(11, 4.2))


def sched_all(results, outdir, name):
    """The three plots of a share benchmark: NAME-shares, NAME-ratio, NAME-steal."""
    sched_shares(results, os.path.join(outdir, f"{name}-shares.png"))
    sched_ratios(results, os.path.join(outdir, f"{name}-ratio.png"))
    sched_steal(results, os.path.join(outdir, f"{name}-steal.png"))


def host(results, path, layouts):
    """bench host: per mix, the median host idle (%) and busy vCPUs'
    max/min share of each layout, with the range of the runs as error bars."""
    mixes = results["mixes"]
    groups = [m["mix"] for m in mixes]
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, (field, scale, label) in zip(axes, (("host_idle", 100, "host idle, %"),
                                                ("maxmin", 1, "busy vCPUs' max/min share"))):
        n = len(layouts)
        w = 0.8 / n
        for j, lay in enumerate(layouts):
            med, lo, hi = [], [], []
            for m in mixes:
                xs = [r[lay][field] * scale for r in m["runs"] if r[lay][field] is not None]
                x = m["median"][lay][field]
                med.append(math.nan if x is None else x * scale)
                lo.append(med[-1] - min(xs) if xs else 0.0)
                hi.append(max(xs) - med[-1] if xs else 0.0)
            ax.bar([i + (j - (n - 1) / 2) * w for i in range(len(groups))], med, width=w,
                   label=lay, color=MODE_COLOURS.get(lay), yerr=[lo, hi], capsize=3)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, fontsize=8)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"bench host: {results['machine']['cpus']} CPUs, cgroup {results['cgroup']}, "
                 f"median and range of {results['runs']} runs", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    step(f"bench: wrote {path}")
