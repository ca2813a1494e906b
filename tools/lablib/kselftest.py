# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab kselftest: the kernel series' selftests in a QEMU TCG guest.

Builds the kernel (stock base or patched, optionally the debug flavour with
KASAN, lockdep and DEBUG_VM), builds our mm selftests and the upstream ones
we rely on as static binaries from the patched work tree, packs them with
busybox into an initramfs, and boots QEMU TCG with 2 vCPUs on 2 NUMA nodes,
a small RAM and a virtio-blk swap disk.  The guest's /init runs every test
under a timeout and prints kselftest TAP (test output nested behind '# ');
this side streams it, keeps a log in _build/logs/, and fails when a test
fails, the kernel splats (BUG, WARNING, KASAN, lockdep...), panics, or the
guest does not finish before the watchdog runs out.

'--bench swapoff' boots the stock and the patched kernel in turn with the
same initramfs, runs tests/kernel/swapoff_bench.c and the swapoff selftest,
and prints the table of docs/kernel-swapoff.md.
"""

import os
import re
import shutil
import statistics

from .common import LabError, ROOT, BUILD, mkdirs, step
from .common import run as sh
from . import kernel, stack, stacks
from .guest import pack_initramfs, stage_initramfs
from .qemuboot import SPLAT_CHECKERS_RE, Console
from .qemuboot import boot as boot_qemu

KS = os.path.join(BUILD, "kselftest")
LOGS = os.path.join(BUILD, "logs")
MM_DIR = os.path.join("tools", "testing", "selftests", "mm")
BENCH_SRC = os.path.join(ROOT, "tests", "kernel", "swapoff_bench.c")

# Guest shape: 2 vCPUs, one socket and NUMA node each (one socket on two
# nodes makes the scheduler WARN at boot), and a swap disk larger than RAM.
# The console shows KERN_WARNING and above (loglevel=5): WARN()s, lockdep
# reports and the OOM killer's "invoked oom-killer" lines.
MEMORY_MB = 256
DEBUG_MEMORY_MB = 512
BENCH_MEMORY_MB = 512
SWAP_MB = 640
# The fail-safe migration test fills node 1 around a 64 MiB buffer and a
# 32 MiB reserve: nodes of 256 MiB.
MIGRATE_MEMORY_MB = 512

# Tests run in this order: (binary, extra sources, arguments, timeout in s,
# guest RAM in MiB or None for MEMORY_MB, split evenly over the 2 nodes).
# Tests with the default shape share one guest; each other shape gets a
# guest of its own, booted afterwards.  Ours first; then the upstream mm
# selftests that exercise the paths our patches touch (swap entries in page
# tables across fork, COW and MADV_PAGEOUT; page table walks over populated
# and remapped ranges).
TESTS = [
    ("swapoff_test", [], "", 600, None),
    ("cow", ["vm_util.c", "thp_settings.c"], "", 600, None),
    ("madv_populate", ["vm_util.c", "thp_settings.c"], "", 120, None),
    ("mkdirty", ["vm_util.c", "thp_settings.c"], "", 120, None),
    ("mremap_dontunmap", ["vm_util.c", "thp_settings.c"], "", 120, None),
    ("migrate_failsafe_test", [], "", 300, MIGRATE_MEMORY_MB),
]
BENCH_IDLE = [0, 100, 1000]
BENCH_RUNS = 5
BENCH_MAPPED_MB = 32        # touched memory every idle process maps (COW-shared)
BENCH_SWAPPED_MB = 16       # paged out by the one process that has swap entries

# The guest's /init (busybox sh): the list of tests in TAP, or a benchmark.
INIT = os.path.join(ROOT, "tools", "guest", "kselftest-init.sh")

# The init's TAP (qemuboot.py parses it): a program starts, its result,
# the subresults of its own TAP nested behind '# '.
PROGRAM_RE = re.compile(r"^# selftests: mm: (\S+)")
RESULT_RE = re.compile(r"^(not ok|ok) (\d+) selftests: mm: (\S+)(.*)$")
SUBRESULT_RE = re.compile(r"^# (not ok|ok) \d+ (.*)$")
MIGRATE_BENCH_MB = 64
MIGRATE_FIT_RE = re.compile(r"migrate-bench: mode=(\w+) mb=(\d+) run=(\d+) ms=([\d.]+) ok=(\d)")
MIGRATE_CASE_RE = re.compile(r"migrate-bench: case=(\w+) run=(\d+) mode=(\w+) ret=(-?\d+) "
                             r"moved=(\d+) of=(\d+) oom=(\d+) intact=(\d)")
BENCH_RE = re.compile(r"swapoff-bench: idle=(\d+) run=(\d+) ms=([\d.]+) "
                      r"walked=(-?\d+) skipped=(-?\d+) ok=(\d)")


def _tree():
    return stack.ensure_worktree(stacks.get("kernel").dir, quiet_reuse=True)


def build_kernel(flavour, debug):
    if debug and not os.path.exists(os.path.join(kernel.CONFIG_DIR, "debug.config")):
        raise LabError("kernel-patches/config/debug.config is missing")
    return kernel.build(patched=(flavour == "patched"), debug=debug)


def _headers(src):
    """The patched tree's UAPI headers (make headers), for the upstream tests."""
    out = os.path.join(KS, "headers")
    sh(kernel.make_args(src, out) + ["headers"], env=kernel.kenv(), quiet=True,
        log=os.path.join(LOGS, "kselftest-headers.log"))
    return os.path.join(out, "usr", "include")


def build_tests(bench=False):
    """Static test binaries from the patched work tree; returns their directory."""
    src = _tree()
    mm = os.path.join(src, MM_DIR)
    out = os.path.join(KS, "bin")
    shutil.rmtree(out, ignore_errors=True)
    mkdirs(out)
    step("kselftest: building the mm selftests as static binaries")
    hdr = _headers(src)
    with open(os.path.join(out, "local_config.h"), "w"):
        pass                                    # no liburing: cow skips those cases
    cflags = ["-static", "-Wall", "-O2", "-U_FORTIFY_SOURCE", f"-I{src}", f"-I{out}",
              "-isystem", hdr, "-isystem", os.path.join(src, "tools", "include", "uapi")]
    log = os.path.join(LOGS, "kselftest-build.log")
    for name, extra, *_ in TESTS:
        srcs = [os.path.join(mm, name + ".c")] + [os.path.join(mm, e) for e in extra]
        if not os.path.exists(srcs[0]):
            raise LabError(f"{srcs[0]} does not exist: is the kernel series applied?")
        sh(["gcc"] + cflags + srcs + ["-lrt", "-lpthread", "-lm", "-o",
                                       os.path.join(out, name)], cwd=mm, quiet=True, log=log)
    if bench:
        sh(["gcc", "-static", "-Wall", "-O2", BENCH_SRC, "-o",
             os.path.join(out, "swapoff_bench")], quiet=True, log=log)
    os.unlink(os.path.join(out, "local_config.h"))
    return out


def build_initramfs(bindir, tests=TESTS):
    stage = stage_initramfs(os.path.join(KS, "initramfs"), INIT)
    shutil.copytree(bindir, os.path.join(stage, "kselftest"))
    with open(os.path.join(stage, "kselftest", "list"), "w") as fh:
        for name, _, args, tmo, *_ in tests:
            fh.write(f"{name} {tmo} {args}\n")
    return pack_initramfs(stage, os.path.join(KS, "initramfs.cpio.gz"), level=1)


def qemu_cmd(image, initrd, swap, memory_mb, append):
    half = memory_mb // 2
    return ["qemu-system-x86_64", "-accel", "tcg", "-nographic", "-no-reboot",
            "-smp", "2,sockets=2,cores=1,threads=1", "-m", f"{memory_mb}M",
            "-object", f"memory-backend-ram,id=m0,size={half}M",
            "-object", f"memory-backend-ram,id=m1,size={memory_mb - half}M",
            "-numa", "node,nodeid=0,cpus=0,memdev=m0",
            "-numa", "node,nodeid=1,cpus=1,memdev=m1",
            "-nic", "none",
            "-drive", f"file={swap},if=virtio,format=raw,cache=unsafe",
            "-kernel", image, "-initrd", initrd,
            "-append", "console=ttyS0 loglevel=5 panic=-1 " + append]


def boot(image, initrd, memory_mb, append, timeout, logname):
    """Boot the guest, stream its console, and collect what it reports."""
    swap = os.path.join(KS, "swap.img")
    mkdirs(KS)
    with open(swap, "wb") as fh:
        fh.truncate(SWAP_MB << 20)
    log = os.path.join(LOGS, logname)
    step(f"kselftest: booting {os.path.basename(image)} ({memory_mb} MiB, 2 NUMA nodes, "
         f"watchdog {timeout}s; console in {os.path.relpath(log, ROOT)})")
    return boot_qemu(qemu_cmd(image, initrd, swap, memory_mb, append), log, timeout, CONSOLE)


def _records(out, line):
    """The benchmarks' lines and swapoff_test's OOM kill counts, into
    out.records: bench (idle, run, ms, walked, skipped, ok), migrate_fit
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
                                     int(m.group(4)), int(m.group(5)), m.group(6) == "1"))
        return True
    m = re.search(r"oom_kill ([+-]\d+)", line)
    if m:
        out.records["oom_kills"].append(int(m.group(1)))
    return False


CONSOLE = Console("unsteal-kselftest: ", RESULT_RE, SUBRESULT_RE, PROGRAM_RE,
                  SPLAT_CHECKERS_RE, _records)


def _verdict(out, flavour, tests=TESTS):
    """(passed, failed) plus a human summary; failures the harness itself saw count too."""
    passed = sum(1 for r in out.results if r.ok)
    failed = sum(1 for r in out.results if not r.ok)
    problems = []
    if out.splats:
        failed += 1
        problems.append(f"the kernel reported {len(out.splats)} problem line(s), first: "
                        f"{out.splats[0]}")
    if not out.done:
        failed += 1
        if out.timed_out:
            problems.append("the guest did not finish before the watchdog (hang?)")
        elif not out.booted:
            problems.append("the guest did not boot to its init")
        else:
            problems.append("the guest stopped before the end of the run (panic or crash?)")
    missing = len(tests) - len(out.results)
    if out.done and missing > 0:
        failed += missing
        problems.append(f"{missing} test(s) did not report a result")
    subok = sum(1 for s in out.subresults if s.ok)
    subbad = [s.description for s in out.subresults if not s.ok]
    skips = sum(1 for s in out.subresults if s.ok and "# SKIP" in s.description)
    step(f"kselftest: {flavour}: {passed} test program(s) passed, {failed} failed; "
         f"subtests: {subok} ok ({skips} skipped), {len(subbad)} not ok")
    for s in subbad:
        print(f"lab: kselftest: not ok: {s}", flush=True)
    for p in problems:
        print(f"lab: kselftest: {p}", flush=True)
    return passed, failed


def _groups(debug):
    """TESTS grouped by guest RAM, in order: [(MiB, [tests])], default shape first."""
    groups = {}
    for t in TESTS:
        memory = t[4] or MEMORY_MB
        if debug:
            memory = max(memory, DEBUG_MEMORY_MB)
        groups.setdefault(memory, []).append(t)
    return list(groups.items())


def run(flavour="patched", debug=False, timeout=None):
    """Build and run the selftests against one kernel; returns (passed, failed).

    One guest per guest shape (see TESTS); the counts add up over the guests."""
    if flavour not in ("stock", "patched"):
        raise LabError(f"unknown kernel flavour {flavour!r}")
    image = build_kernel(flavour, debug)
    bindir = build_tests()
    name = flavour + ("-debug" if debug else "")
    passed = failed = 0
    for i, (memory, tests) in enumerate(_groups(debug)):
        initrd = build_initramfs(bindir, tests)
        limit = timeout
        if limit is None:
            limit = 120 + sum(t[3] for t in tests) // (1 if debug else 2)
        log = f"kselftest-{name}.log" if i == 0 else f"kselftest-{name}-{memory}M.log"
        out = boot(image, initrd, memory, "unsteal.mode=test", limit, log)
        p, f = _verdict(out, f"{name} ({', '.join(t[0] for t in tests)})", tests)
        passed += p
        failed += f
    return passed, failed


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def _subtests(out):
    """'ok / skip / not ok' counts of the nested (subtest) results."""
    ok = sum(1 for s in out.subresults if s.ok and "# SKIP" not in s.description)
    skip = sum(1 for s in out.subresults if s.ok and "# SKIP" in s.description)
    return f"{ok} / {skip} / {len(out.subresults) - ok - skip}"


def bench_swapoff(runs=BENCH_RUNS, idle=None, timeout=1800):
    """swapoff wall time vs idle mms, stock and patched in the same guest shape."""
    idle = idle or BENCH_IDLE
    images = {f: build_kernel(f, False) for f in ("stock", "patched")}
    initrd = build_initramfs(build_tests(bench=True),
                             [t for t in TESTS if t[0] == "swapoff_test"])
    append = (f"unsteal.mode=bench unsteal.runs={runs} unsteal.mapped={BENCH_MAPPED_MB} "
              f"unsteal.swapped={BENCH_SWAPPED_MB} "
              f"unsteal.idle={','.join(str(n) for n in idle)}")
    outs = {}
    for f, image in images.items():
        outs[f] = boot(image, initrd, BENCH_MEMORY_MB, append, timeout,
                       f"kselftest-bench-{f}.log")
        if not outs[f].done:
            raise LabError(f"the {f} guest did not finish the benchmark; see "
                           f"_build/logs/kselftest-bench-{f}.log")
    rows = []
    for n in idle:
        cell = {}
        for f in images:
            samples = [b for b in outs[f].records["bench"] if b[0] == n]
            if len(samples) != runs or not all(b[5] for b in samples):
                raise LabError(f"{f}: benchmark with {n} idle mms: {len(samples)} of {runs} "
                               f"runs reported, data intact in all: "
                               f"{all(b[5] for b in samples)}")
            cell[f] = (_median([b[2] for b in samples]), _median([b[3] for b in samples]),
                       _median([b[4] for b in samples]))
        rows.append((n, cell))
    lines = [
        f"| idle mms ({BENCH_MAPPED_MB} MiB mapped each) | stock ms (median of {runs}) "
        f"| patched ms (median of {runs}) "
        f"| stock / patched | mms walked stock / patched | mms skipped patched |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, c in rows:
        s, p = c["stock"], c["patched"]
        walked_s = "all" if s[1] < 0 else f"{s[1]:.0f}"
        lines.append(f"| {n} | {s[0]:.1f} | {p[0]:.1f} | {s[0] / p[0]:.2f} | "
                     f"{walked_s} / {p[1]:.0f} | {p[2]:.0f} |")
    lines.append("")
    lines.append("| fail-safe scenarios (swapoff_test, same guest) | stock | patched |")
    lines.append("|---|---:|---:|")
    lines.append(f"| OOM kills | {sum(outs['stock'].records['oom_kills'])} | "
                 f"{sum(outs['patched'].records['oom_kills'])} |")
    lines.append(f"| subtests ok / skip / not ok | {_subtests(outs['stock'])} | "
                 f"{_subtests(outs['patched'])} |")
    table = "\n".join(lines)
    path = os.path.join(KS, "bench-swapoff.md")
    with open(path, "w") as fh:
        fh.write(table + "\n")
    print(table, flush=True)
    step(f"kselftest: benchmark table in {os.path.relpath(path, ROOT)}")
    return 0


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
    images = {f: build_kernel(f, False) for f in ("stock", "patched")}
    initrd = build_initramfs(build_tests(), [])
    append = f"unsteal.mode=bench-migrate unsteal.runs={runs} unsteal.mb={mb}"
    outs = {}
    for f, image in images.items():
        outs[f] = boot(image, initrd, MIGRATE_MEMORY_MB, append, timeout,
                       f"kselftest-bench-migrate-{f}.log")
        if not outs[f].done:
            raise LabError(f"the {f} guest did not finish the benchmark; see "
                           f"_build/logs/kselftest-bench-migrate-{f}.log")
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
    table = "\n".join(lines)
    path = os.path.join(KS, "bench-migrate.md")
    with open(path, "w") as fh:
        fh.write(table + "\n")
    print(table, flush=True)
    step(f"kselftest: benchmark table in {os.path.relpath(path, ROOT)}")
    return 0


def command(args):
    if args.bench == "migrate":
        return bench_migrate(runs=args.runs)
    if args.bench:
        return bench_swapoff(runs=args.runs)
    passed, failed = run(args.kernel, debug=args.debug, timeout=args.timeout)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0
