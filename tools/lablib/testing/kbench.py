# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab kselftest --bench: the kernel series' two benchmarks.

Both boot the stock and then the patched kernel in the kselftest guest
(kselftest.py: the same initramfs, QEMU shape and console), with
unsteal.mode= on the kernel command line telling the guest's /init
(tools/guest/kselftest-init.sh) to run a benchmark before the tests:

  --bench swapoff   tests/kernel/swapoff_bench.c: swapoff wall time vs
                    idle mms, then the swapoff selftest for its OOM kill
                    counts; the table of docs/kernel-swapoff.md
  --bench migrate   migrate_failsafe_test -b: move_pages(2) time when the
                    buffer fits, outcome when it does not; the table of
                    docs/kernel-migrate.md

The guest prints one line per run ('swapoff-bench: ...', 'migrate-bench:
...'); CONSOLE keeps them in Outcome.records, and the tables are written
to _build/kselftest/bench-*.md.
"""

import os
import re
import statistics

from ..common import LabError, ROOT, logs_dir, mkdirs, step
from ..common import run as sh
from . import kselftest as ks
from .qemuboot import Console

BENCH_SRC = os.path.join(ROOT, "tests", "kernel", "swapoff_bench.c")
BENCH_MEMORY_MB = 512
BENCH_IDLE = [0, 100, 1000]
# 10,000 idle mms take about 1 GiB (page tables, kernel stacks, task and mm
# structures): a guest of their own, without the selftest afterwards.
BENCH_LARGE_IDLE = [10000]
BENCH_LARGE_MEMORY_MB = 2048
BENCH_RUNS = 5
BENCH_MAPPED_MB = 32        # touched memory every idle process maps (COW-shared)
BENCH_SWAPPED_MB = 16       # paged out by the one process that has swap entries
MIGRATE_BENCH_MB = 64

MIGRATE_FIT_RE = re.compile(r"migrate-bench: mode=(\w+) mb=(\d+) run=(\d+) ms=([\d.]+) ok=(\d)")
MIGRATE_CASE_RE = re.compile(r"migrate-bench: case=(\w+) run=(\d+) mode=(\w+) ret=(-?\d+) "
                             r"moved=(\d+) of=(\d+) oom=(\d+) intact=(\d)")
BENCH_RE = re.compile(r"swapoff-bench: idle=(\d+) run=(\d+) ms=([\d.]+) "
                      r"walked=(-?\d+) skipped=(-?\d+) ptkb_idle=(-?\d+) "
                      r"ptkb_swapped=(-?\d+) ok=(\d)")
# A page-table page of 4 KiB holds 512 entries: entries per kB of VmPTE.
PT_ENTRIES_PER_KB = 1024 // 8


def _records(out, line):
    """The benchmarks' lines and swapoff_test's OOM kill counts, into
    out.records: bench (idle, run, ms, walked, skipped, page-table kB of the
    idle processes, of the swapped one, ok), migrate_fit
    (mode, MiB, run, ms, ok), migrate_case (case, run, mode, ret, moved, of,
    oom, intact), oom_kills (one per fail-safe scenario)."""
    m = MIGRATE_FIT_RE.search(line)
    if m:
        out.records["migrate_fit"].append((m.group(1), int(m.group(2)), int(m.group(3)),
                                           float(m.group(4)), m.group(5) == "1"))
        return True
    m = MIGRATE_CASE_RE.search(line)
    if m:
        g = m.groups()
        out.records["migrate_case"].append((g[0], int(g[1]), g[2], int(g[3]), int(g[4]),
                                            int(g[5]), int(g[6]), g[7] == "1"))
        return True
    m = BENCH_RE.search(line)
    if m:
        out.records["bench"].append((int(m.group(1)), int(m.group(2)), float(m.group(3)),
                                     int(m.group(4)), int(m.group(5)), int(m.group(6)),
                                     int(m.group(7)), m.group(8) == "1"))
        return True
    m = re.search(r"oom_kill ([+-]\d+)", line)
    if m:
        out.records["oom_kills"].append(int(m.group(1)))
    return False



# The kselftest guest's console, and the benchmarks' own lines.
CONSOLE = Console(ks.CONSOLE.marker, ks.RESULT_RE, ks.SUBRESULT_RE, ks.PROGRAM_RE,
                  ks.CONSOLE.splat_re, _records)


def build_tests():
    """The selftests (kselftest.build_tests) and swapoff_bench, in one directory."""
    out = ks.build_tests()
    mkdirs(logs_dir())
    sh(["gcc", "-static", "-Wall", "-O2", BENCH_SRC, "-o", os.path.join(out, "swapoff_bench")],
       quiet=True, log=os.path.join(logs_dir(), "kselftest-bench-build.log"))
    return out


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def _subtests(out):
    """'ok / skip / not ok' counts of the nested (subtest) results."""
    ok = sum(1 for s in out.subresults if s.ok and "# SKIP" not in s.description)
    skip = sum(1 for s in out.subresults if s.ok and "# SKIP" in s.description)
    return f"{ok} / {skip} / {len(out.subresults) - ok - skip}"


def _boot_each(images, initrd, memory_mb, append, timeout, log):
    """Each kernel of IMAGES booted in turn with the same initramfs, guest
    shape and command line: {flavour: Outcome}.  LOG is the console log's
    name with {f} for the flavour."""
    outs = {}
    for f, image in images.items():
        name = log.format(f=f)
        outs[f] = ks.boot(image, initrd, memory_mb, append, timeout, name, CONSOLE)
        if not outs[f].done:
            raise LabError(f"the {f} guest did not finish the benchmark; see _build/logs/{name}")
    return outs


def _boot_swapoff(images, initrd, memory_mb, runs, idle, timeout, suffix=""):
    """Both kernels through swapoff_bench in one guest shape: {flavour: Outcome}."""
    append = (f"unsteal.mode=bench unsteal.runs={runs} unsteal.mapped={BENCH_MAPPED_MB} "
              f"unsteal.swapped={BENCH_SWAPPED_MB} "
              f"unsteal.idle={','.join(str(n) for n in idle)}")
    return _boot_each(images, initrd, memory_mb, append, timeout,
                      "kselftest-bench-{f}" + suffix + ".log")


def _swapoff_cell(out, f, n, runs):
    """Medians for N idle mms: ms, walked, skipped, page-table entries of the
    mms walked (the stock kernel walks every mm on the list: it has no skip)."""
    samples = [b for b in out.records["bench"] if b[0] == n]
    if len(samples) != runs or not all(b[7] for b in samples):
        raise LabError(f"{f}: benchmark with {n} idle mms: {len(samples)} of {runs} "
                       f"runs reported, data intact in all: {all(b[7] for b in samples)}")
    walked = _median([b[3] for b in samples])
    pt_kb = [b[6] + (b[5] if b[3] < 0 or b[3] > 1 else 0) for b in samples]
    return (_median([b[2] for b in samples]), walked, _median([b[4] for b in samples]),
            _median(pt_kb) * PT_ENTRIES_PER_KB)


def bench_swapoff(runs=BENCH_RUNS, idle=None, large=None, timeout=3600):
    """swapoff wall time vs idle mms, stock and patched in the same guest shape;
    the large counts in a bigger guest of their own."""
    idle = idle or BENCH_IDLE
    large = BENCH_LARGE_IDLE if large is None else large
    images = {f: ks.build_kernel(f, False) for f in ("stock", "patched")}
    bindir = build_tests()
    # swapoff_test skips its fail-safe scenarios on a kernel without the
    # feature; -p runs them there too, for the stock kernel's OOM kills.
    initrd = ks.build_initramfs(bindir, [ks.plain_test(t) for t in ks.TESTS
                                         if t.name == "swapoff_test"])
    outs = _boot_swapoff(images, initrd, BENCH_MEMORY_MB, runs, idle, timeout)
    shapes = [(n, outs, BENCH_MEMORY_MB) for n in idle]
    if large:
        initrd = ks.build_initramfs(bindir, [])
        louts = _boot_swapoff(images, initrd, BENCH_LARGE_MEMORY_MB, runs, large, timeout,
                              f"-{BENCH_LARGE_MEMORY_MB}M")
        shapes += [(n, louts, BENCH_LARGE_MEMORY_MB) for n in large]
    lines = [
        f"| idle mms ({BENCH_MAPPED_MB} MiB mapped each) | guest MiB | stock ms "
        f"(median of {runs}) | patched ms (median of {runs}) | stock / patched "
        f"| mms walked stock / patched | mms skipped patched "
        f"| page-table entries walked, stock / patched | TCG ns per entry saved |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, o, memory in shapes:
        s, p = (_swapoff_cell(o[f], f, n, runs) for f in ("stock", "patched"))
        walked_s = "all" if s[1] < 0 else f"{s[1]:.0f}"
        saved = s[3] - p[3]
        per_entry = f"{(s[0] - p[0]) * 1e6 / saved:.1f}" if n and saved > 0 else "-"
        lines.append(f"| {n} | {memory} | {s[0]:.1f} | {p[0]:.1f} | {s[0] / p[0]:.2f} | "
                     f"{walked_s} / {p[1]:.0f} | {p[2]:.0f} | {s[3]:,.0f} / {p[3]:,.0f} | "
                     f"{per_entry} |")
    lines.append("")
    lines.append("| fail-safe scenarios (swapoff_test, same guest) | stock | patched |")
    lines.append("|---|---:|---:|")
    lines.append(f"| OOM kills | {sum(outs['stock'].records['oom_kills'])} | "
                 f"{sum(outs['patched'].records['oom_kills'])} |")
    lines.append(f"| subtests ok / skip / not ok | {_subtests(outs['stock'])} | "
                 f"{_subtests(outs['patched'])} |")
    return _publish("bench-swapoff.md", lines)


MIGRATE_CASES = {
    "nofit": "does not fit (64 MiB to move, 16 MiB room above high wmark + 32 MiB reserve)",
    "concurrent": "concurrent allocator (64 MiB to move, 68 MiB room, 44 MiB allocated on "
                  "the target meanwhile)",
}


def _migrate_result(ret):
    """What move_pages(2) returned, as a table cell."""
    if ret == -12:
        return "ENOMEM"
    if ret < 0:
        return f"errno {-ret}"
    return "returned 0" if ret == 0 else "returned N>0 (pages not moved)"


def bench_migrate(runs=BENCH_RUNS, mb=MIGRATE_BENCH_MB, timeout=1800):
    """Moving a buffer between the nodes: time when it fits, outcome when it does not."""
    images = {f: ks.build_kernel(f, False) for f in ("stock", "patched")}
    initrd = ks.build_initramfs(ks.build_tests(), [])
    append = f"unsteal.mode=bench-migrate unsteal.runs={runs} unsteal.mb={mb}"
    outs = _boot_each(images, initrd, ks.MIGRATE_MEMORY_MB, append, timeout,
                      "kselftest-bench-migrate-{f}.log")
    lines = [f"| move {mb} MiB node 0 -> 1 with move_pages(2), it fits | runs ok "
             f"| median ms (of {runs}) | min ms | max ms |",
             "|---|---:|---:|---:|---:|"]
    for f, mode in (("stock", "plain"), ("patched", "plain"), ("patched", "failsafe")):
        fit = outs[f].records["migrate_fit"]
        ms = [r[3] for r in fit if r[0] == mode]
        ok = sum(1 for r in fit if r[0] == mode and r[4])
        if len(ms) != runs or ok != runs:
            raise LabError(f"{f}/{mode}: {len(ms)} of {runs} runs reported, {ok} moved "
                           f"everything intact; see _build/logs/kselftest-bench-migrate-{f}.log")
        label = f"{f} kernel, " + ("MPOL_MF_FAILSAFE" if mode == "failsafe" else "plain")
        lines.append(f"| {label} | {ok}/{runs} | {_median(ms):.1f} | {min(ms):.1f} "
                     f"| {max(ms):.1f} |")
    lines += ["", f"| hostile case ({runs} runs each) | kernel | result (runs) "
              f"| pages moved, median (of {mb * 256}) | OOM kills | data intact |",
              "|---|---|---|---:|---:|---:|"]
    for case, label in MIGRATE_CASES.items():
        for f in ("stock", "patched"):
            rs = [r for r in outs[f].records["migrate_case"] if r[0] == case]
            if len(rs) != runs:
                raise LabError(f"{f}: {case}: {len(rs)} of {runs} runs reported")
            mode = "MPOL_MF_FAILSAFE" if rs[0][2] == "failsafe" else "plain"
            results = {}
            for r in rs:
                results[_migrate_result(r[3])] = results.get(_migrate_result(r[3]), 0) + 1
            res = ", ".join(f"{k} ({n})" for k, n in sorted(results.items()))
            lines.append(f"| {label} | {f}, {mode} | {res} | "
                         f"{_median([r[4] for r in rs]):.0f} | {sum(r[6] for r in rs)} | "
                         f"{sum(1 for r in rs if r[7])}/{runs} |")
    return _publish("bench-migrate.md", lines)


def command(args):
    with ks.lock():
        if args.bench == "migrate":
            return bench_migrate(runs=args.runs)
        return bench_swapoff(runs=args.runs)


def _publish(name, lines):
    """Writes a benchmark's table to _build/kselftest/NAME and shows it."""
    table = "\n".join(lines)
    path = os.path.join(ks.kselftest_dir(), name)
    with open(path, "w") as fh:
        fh.write(table + "\n")
    print(table, flush=True)
    step(f"kselftest: benchmark table in {os.path.relpath(path, ROOT)}")
    return 0
