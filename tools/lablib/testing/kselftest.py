# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab kselftest: the kernel series' selftests in a QEMU TCG guest.

Builds the kernel (stock base or patched, optionally the debug flavour with
KASAN, lockdep and DEBUG_VM), builds our mm selftests and the upstream ones
we rely on as static binaries with the patched work tree's selftests
Makefile (in a shadow tree, so that the work tree stays clean), packs them with
busybox into an initramfs, and boots QEMU TCG with 2 vCPUs on 2 NUMA nodes,
a small RAM and a virtio-blk swap disk.  The guest's /init runs every test
under a timeout, through the tree's run_vmtests.sh (bash) where one of its
categories runs that test alone, and prints kselftest TAP (test output
nested behind '# ');
this side streams it, keeps a log in _build/logs/, and fails when a test
fails, the kernel splats (BUG, WARNING, KASAN, lockdep...), panics, or the
guest does not finish before the watchdog runs out.

The benchmarks ('--bench swapoff', '--bench migrate') boot the same guest:
kbench.py.
"""

import collections
import os
import re
import shutil

from ..common import LabError, ROOT, build_dir, dir_lock, logs_dir, mkdirs, step
from ..common import run as sh
from ..build import kernel
from ..stack import patchqueue, stacks
from ..lab.guest import pack_initramfs, stage_initramfs
from ..results import Counts
from . import qemuboot
from .qemuboot import SPLAT_CHECKERS_RE, Console
from .qemuboot import boot as boot_qemu

MM_DIR = os.path.join("tools", "testing", "selftests", "mm")
VMTESTS = "run_vmtests.sh"
# run_vmtests.sh is a bash script; the guest has busybox sh only.
BASH = "/bin/bash-static"

# Guest shape: 2 vCPUs, one socket and NUMA node each (one socket on two
# nodes makes the scheduler WARN at boot), a swap disk larger than RAM, and a
# scratch disk with an ext4 filesystem for the tests' own swap files.
# The console shows KERN_WARNING and above (loglevel=5): WARN()s, lockdep
# reports and the OOM killer's "invoked oom-killer" lines.
MEMORY_MB = 256
DEBUG_MEMORY_MB = 512
SWAP_MB = 640
# swapoff_test's swap files: twice the guest's RAM (1 GiB for the debug
# guest) and 8 MiB; the disk is sparse and its filesystem made on the host.
SCRATCH_MB = 2048
SCRATCH = "/scratch"
# The fail-safe migration test fills node 1 around a 64 MiB buffer and a
# 32 MiB reserve: nodes of 256 MiB.
MIGRATE_MEMORY_MB = 512

# Tests run in this order: the program (TEST_GEN_FILES of the mm selftests
# Makefile); the run_vmtests.sh category that runs it, or None to run it
# directly; its arguments (direct runs only: run_vmtests.sh has its own);
# a timeout in s; the guest RAM in MiB or None for MEMORY_MB, split evenly
# over the 2 nodes; and whether the guest's swap disk is on while it runs
# (swapoff_test swaps to files of its own on the scratch disk, and its
# fail-safe scenarios need those to be the only swap areas).  A category
# must run that one program alone, so that its exit status is the
# program's result: 'mremap' also runs mremap_test and 'migration' the
# upstream migration test, so mremap_dontunmap and migrate_failsafe_test
# run directly, and so does swapoff_test, which needs -d for the directory
# of its swap files.  Tests with the default shape share one guest; each
# other shape gets a guest of its own, booted afterwards.  Ours first; then
# the upstream mm selftests that exercise the paths our patches touch (swap
# entries in page tables across fork, COW and MADV_PAGEOUT; page table
# walks over populated and remapped ranges).
Test = collections.namedtuple("Test", "name vmtests args timeout memory swap",
                              defaults=(True,))
# The debug kernel (KASAN, lockdep, DEBUG_VM) runs each program this many
# times as long: migrate_failsafe_test took over its 300 s there on
# 2026-11-28 (it ran to its 24th of 26 results), 40 s on the lab kernel
DEBUG_SLOWDOWN = 2
TESTS = [
    Test("swapoff_test", None, f"-d {SCRATCH}", 600, None, swap=False),
    Test("cow", "cow", "", 600, None),
    Test("madv_populate", "madv_populate", "", 120, None),
    Test("mkdirty", "mkdirty", "", 120, None),
    Test("mremap_dontunmap", None, "", 120, None),
    Test("migrate_failsafe_test", None, "", 300, MIGRATE_MEMORY_MB),
]

# The guest's /init (busybox sh): the list of tests in TAP, or a benchmark.
INIT = os.path.join(ROOT, "tools", "guest", "kselftest-init.sh")

# The init's TAP (qemuboot.py parses it): a program starts, its result,
# the subresults of its own TAP nested behind '# '.
PROGRAM_RE = re.compile(r"^# selftests: mm: (\S+)")
RESULT_RE = re.compile(r"^(not ok|ok) (\d+) selftests: mm: (\S+)(.*)$")
SUBRESULT_RE = re.compile(r"^# (not ok|ok) \d+ (.*)$")
CONSOLE = Console("unsteal-kselftest: ", RESULT_RE, SUBRESULT_RE, PROGRAM_RE,
                  SPLAT_CHECKERS_RE)


def kselftest_dir():
    """The test binaries, the initramfs and the swap disk of a run."""
    return os.path.join(build_dir(), "kselftest")


def _tree():
    return patchqueue.ensure_worktree(stacks.get("kernel").dir, quiet_reuse=True)


def build_kernel(flavour, debug):
    if debug and not os.path.exists(os.path.join(kernel.CONFIG_DIR, "debug.config")):
        raise LabError("kernel-patches/config/debug.config is missing")
    return kernel.build(patched=(flavour == "patched"), debug=debug)


def _headers(src):
    """The patched tree's UAPI headers (make headers), for the upstream tests."""
    out = os.path.join(kselftest_dir(), "headers")
    sh(kernel.make_args(src, out) + ["headers"], env=kernel.kenv(), quiet=True,
        log=os.path.join(logs_dir(), "kselftest-headers.log"))
    return os.path.join(out, "usr", "include")


def shadow_tree(src, dest):
    """A tree for the selftests Makefile outside the kernel work tree: a copy
    of tools/testing/selftests/mm, symlinks to the rest of the selftests
    directory, tools/include and mm/gup_test.h.  The mm Makefile writes
    local_config.h and local_config.mk next to itself (check_config.sh); here
    they are ours, written before make runs: no liburing, so cow skips those
    cases, as a static build on a host without liburing.a needs.  Returns the
    copy's mm directory."""
    shutil.rmtree(dest, ignore_errors=True)
    selftests = os.path.dirname(MM_DIR)
    mkdirs(os.path.join(dest, selftests), os.path.join(dest, "tools"), os.path.join(dest, "mm"))
    for entry in os.listdir(os.path.join(src, selftests)):
        if entry != "mm":
            os.symlink(os.path.join(src, selftests, entry), os.path.join(dest, selftests, entry))
    os.symlink(os.path.join(src, "tools", "include"), os.path.join(dest, "tools", "include"))
    os.symlink(os.path.join(src, "mm", "gup_test.h"), os.path.join(dest, "mm", "gup_test.h"))
    mm = os.path.join(dest, MM_DIR)
    shutil.copytree(os.path.join(src, MM_DIR), mm, symlinks=True)
    with open(os.path.join(mm, "local_config.h"), "w") as fh:
        fh.write("/* unsteal lab: no liburing */\n")
    with open(os.path.join(mm, "local_config.mk"), "w") as fh:
        fh.write("IOURING_EXTRA_LIBS =\n")
    return mm


def make_tests(hdr, mm, out, names):
    """Static binaries of names built by the mm selftests Makefile in mm (a
    shadow tree), against the UAPI headers in hdr, into out."""
    mkdirs(out)
    sh(["make", "-C", mm, f"-j{os.cpu_count() or 2}", f"OUTPUT={out}",
        f"KHDR_INCLUDES=-isystem {hdr}", "USERLDFLAGS=-static"] +
       [os.path.join(out, n) for n in names], quiet=True,
       log=os.path.join(logs_dir(), "kselftest-build.log"))


def build_tests():
    """The mm selftests of TESTS, static, built by the patched work tree's
    selftests Makefile, and its run_vmtests.sh; returns their directory."""
    src = _tree()
    out = os.path.join(kselftest_dir(), "bin")
    shutil.rmtree(out, ignore_errors=True)
    mkdirs(out)
    for t in TESTS:
        if not os.path.exists(os.path.join(src, MM_DIR, t.name + ".c")):
            raise LabError(f"{os.path.join(src, MM_DIR, t.name)}.c does not exist: is the "
                           f"kernel series applied?")
    step("kselftest: building the mm selftests (static) with the selftests Makefile")
    hdr = _headers(src)
    mm = shadow_tree(src, os.path.join(kselftest_dir(), "tree"))
    make_tests(hdr, mm, out, [t.name for t in TESTS])
    shutil.copy2(os.path.join(mm, VMTESTS), os.path.join(out, VMTESTS))
    return out


def build_initramfs(bindir, tests=TESTS, slowdown=1):
    """busybox, bash as /bin/bash, the binaries and the list the init reads:
    'NAME TIMEOUT CATEGORY SWAP ARGS...', CATEGORY '-' for a direct run,
    SWAP 'on' or 'off' for the guest's swap disk; each test's timeout times
    slowdown."""
    if not os.path.exists(BASH):
        raise LabError(f"{BASH} is missing (run_vmtests.sh needs bash in the guest): install "
                       f"bash-static, or run tools/lab setup")
    stage = stage_initramfs(os.path.join(kselftest_dir(), "initramfs"), INIT)
    shutil.copy2(BASH, os.path.join(stage, "bin", "bash"))
    shutil.copytree(bindir, os.path.join(stage, "kselftest"))
    with open(os.path.join(stage, "kselftest", "list"), "w") as fh:
        for t in tests:
            if t.vmtests and t.args:
                raise LabError(f"{t.name}: arguments are for direct runs only")
            fh.write(f"{t.name} {t.timeout * slowdown} {t.vmtests or '-'} "
                     f"{'on' if t.swap else 'off'} {t.args}\n")
    return pack_initramfs(stage, os.path.join(kselftest_dir(), "initramfs.cpio.gz"), level=1)


def qemu_cmd(image, initrd, swap, scratch, memory_mb, append):
    half = memory_mb // 2
    return ["qemu-system-x86_64", "-accel", "tcg", "-nographic", "-no-reboot",
            "-smp", "2,sockets=2,cores=1,threads=1", "-m", f"{memory_mb}M",
            "-object", f"memory-backend-ram,id=m0,size={half}M",
            "-object", f"memory-backend-ram,id=m1,size={memory_mb - half}M",
            "-numa", "node,nodeid=0,cpus=0,memdev=m0",
            "-numa", "node,nodeid=1,cpus=1,memdev=m1",
            "-nic", "none",
            "-drive", f"file={swap},if=virtio,format=raw,cache=unsafe",
            "-drive", f"file={scratch},if=virtio,format=raw,cache=unsafe",
            "-kernel", image, "-initrd", initrd,
            "-append", "console=ttyS0 loglevel=5 panic=-1 " + append]


def boot(image, initrd, memory_mb, append, timeout, logname, console=CONSOLE):
    """Boot the guest, stream its console, and collect what it reports
    (console: how to read it; kbench.py adds its benchmarks' lines)."""
    swap = os.path.join(kselftest_dir(), "swap.img")
    scratch = os.path.join(kselftest_dir(), "scratch.img")
    mkdirs(kselftest_dir())
    for path, mb in ((swap, SWAP_MB), (scratch, SCRATCH_MB)):
        with open(path, "wb") as fh:
            fh.truncate(mb << 20)
    sh(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "nodiscard", scratch],
       quiet=True, log=os.path.join(logs_dir(), "kselftest-mkfs.log"))
    log = os.path.join(logs_dir(), logname)
    step(f"kselftest: booting {os.path.basename(image)} ({memory_mb} MiB, 2 NUMA nodes, "
         f"watchdog {timeout}s; console in {os.path.relpath(log, ROOT)})")
    return boot_qemu(qemu_cmd(image, initrd, swap, scratch, memory_mb, append), log, timeout,
                     console)


def _verdict(out, flavour, tests=TESTS):
    """Counts of one guest's test programs, printed; failures the harness
    itself saw count too, and every skip is kept with its reason."""
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
    skipped_programs, skipped_checks = qemuboot.skips(out)
    return Counts(passed - len(skipped_programs), failed, skipped_programs, skipped_checks,
                  [f"not ok: {s}" for s in subbad] + problems)


# The series' own programs, which take -p: run their fail-safe scenarios on
# a kernel without the series too, as plain operations (the stock column of
# docs/kernel-swapoff.md and docs/kernel-migrate.md).
PLAIN_ARG = "-p"
OURS = ("swapoff_test", "migrate_failsafe_test")


def plain_test(t):
    """One of OURS run directly with -p as well as its own arguments."""
    return t._replace(vmtests=None, args=f"{t.args} {PLAIN_ARG}".strip())


def _selection(plain):
    """TESTS, or with plain our programs run directly with -p."""
    if not plain:
        return list(TESTS)
    return [plain_test(t) if t.name in OURS else t for t in TESTS]


def _groups(debug, tests):
    """The tests grouped by guest RAM, in order: [(MiB, [tests])], default shape first."""
    groups = {}
    for t in tests:
        memory = t.memory or MEMORY_MB
        if debug:
            memory = max(memory, DEBUG_MEMORY_MB)
        groups.setdefault(memory, []).append(t)
    return list(groups.items())


def run(flavour="patched", debug=False, timeout=None, plain=False):
    """Build and run the selftests against one kernel; returns Counts.

    One guest per guest shape (see TESTS); the counts add up over the guests.
    plain: our programs with -p (on the stock kernel their fail-safe
    scenarios then run and are expected to fail: what that kernel does)."""
    if flavour not in ("stock", "patched"):
        raise LabError(f"unknown kernel flavour {flavour!r}")
    with lock():
        return _run(flavour, debug, timeout, plain)


# What a run shares with any other: the test binaries, the initramfs and the
# disks in kselftest_dir().  A second run at the same time would overwrite them under
# the first one's guest.
def lock():
    return dir_lock(kselftest_dir(), "tools/lab kselftest run")


def _run(flavour, debug, timeout, plain):
    image = build_kernel(flavour, debug)
    bindir = build_tests()
    name = flavour + ("-debug" if debug else "")
    counts = Counts()
    if plain:
        name += "-plain"
    slowdown = DEBUG_SLOWDOWN if debug else 1
    for i, (memory, tests) in enumerate(_groups(debug, _selection(plain))):
        initrd = build_initramfs(bindir, tests, slowdown)
        limit = timeout
        if limit is None:
            limit = 120 + sum(t.timeout * slowdown for t in tests) // (1 if debug else 2)
        log = f"kselftest-{name}.log" if i == 0 else f"kselftest-{name}-{memory}M.log"
        out = boot(image, initrd, memory, "unsteal.mode=test", limit, log)
        counts = counts + _verdict(out, f"{name} ({', '.join(t.name for t in tests)})", tests)
    return counts


def command(args):
    c = run(args.kernel, debug=args.debug, timeout=args.timeout, plain=args.plain)
    print(f"{c.passed} passed, {c.failed} failed, {len(c.skipped)} skipped", flush=True)
    return 1 if c.failed else 0
