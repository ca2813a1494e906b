# SPDX-License-Identifier: GPL-2.0-or-later
"""The command line of tools/lab: its parser, the commands and their
Markdown reference.

main() is tools/lab: it loads the configuration (config.load()), builds
the parser, and calls the function that the chosen command's parser set as
func; the modules read the configuration (config.get()) only when called.
Importing this module reads no environment and imports config only; the
other layers are imported inside the functions that need them,
build_parser() included (the choices of the options come from the modules
that declare them).

reference() renders every command's usage and options as Markdown from the
parser; docs/lab.md holds it between the two MARKERS, rewritten by
'tools/lab help --markdown --write' (tests/tools/test_lab_cli.py checks
that it is not stale).
"""

import argparse
import os
import sys

from . import config

PROG = "tools/lab"
DESCRIPTION = "unsteal lab: fetch, patch, build, run and test the unsteal patch stacks."
LAB_MD = os.path.join(config.ROOT, "docs", "lab.md")
MARKERS = ("<!-- BEGIN generated: tools/lab help --markdown --write; "
           "edit tools/lablib/commands.py, not this -->",
           "<!-- END generated: tools/lab help --markdown --write -->")


def main(argv):
    """Run the command line argv (without the program name): its exit
    status; a LabError is printed as 'lab: error: ...' and exits 1."""
    config.load()  # the environment, read once; lablib's functions ask config.get()
    from .common import LabError
    from .stack import stacks
    try:
        ap = build_parser()
        args = ap.parse_args(argv)
        stacks.lab_libvirt()  # refuses an UNSTEAL_LIBVIRT_STACK that names no libvirt stack
        if args.cmd is None:
            ap.print_help()
            return 0
        return args.func(args) or 0
    except LabError as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 1


# ---------------------------------------------------------------- the commands

def cmd_setup(args):
    from .stack import sources, stacks
    sources.setup()
    for s in stacks.known():
        sources.fetch_base(s.dir, which=("orig", "debian"))


def cmd_fetch(args):
    from .stack import sources, stacks
    sources.fetch_base(stacks.get(args.stack).dir,
                       which=("orig", "debian") if args.debian else ("orig",))


def cmd_worktree(args):
    from .stack import patchqueue, stacks
    print(patchqueue.ensure_worktree(stacks.get(args.stack).dir, force=args.force))


def cmd_export(args):
    from .stack import patchqueue, stacks
    patchqueue.export(stacks.get(args.stack).dir)


def cmd_check(args):
    from .common import LabError
    from .stack import patchqueue, stacks
    st = stacks.get(args.stack)
    build_each = None
    if args.build_each:
        # How a stack is built follows from its project, not its key.
        if st.package == "libvirt":
            from .build.libvirt import build_tree
        else:
            from .build.kernel import build_tree
        build_each = build_tree
    if args.config_matrix and st.package != "linux":
        raise LabError(f"--config-matrix: {st.key} is not a kernel stack")
    patchqueue.check(st.dir, build_each=build_each)
    if st.package == "linux":
        from .build import kcheck
        kcheck.checkpatch(st.dir)
        if args.config_matrix:
            kcheck.configure_matrix(st.dir)
            built, failed = kcheck.build_matrix()
            if failed:
                return 1


def cmd_build(args):
    from .stack import stacks
    if args.what in ("libvirt", "all"):
        from .build import libvirt
        if args.stock:
            libvirt.build_stock()
        else:
            libvirt.build(stack=stacks.get(args.stack) if args.stack else None)  # None: the lab's
    if args.what in ("kernel", "all"):
        from .build import kernel
        kernel.build(patched=not args.stock)
    if args.what in ("src", "all"):
        from .build import unsteal_build
        unsteal_build.build()


def cmd_start(args):
    from .lab import daemon
    daemon.start(vcpu_cgroup=args.vcpu_cgroup)


def cmd_stop(args):
    from .lab import daemon
    daemon.stop()


def cmd_status(args):
    from .lab import daemon
    daemon.status()


def cmd_virsh(args):
    from .lab import daemon
    return daemon.virsh(args.args, check=False).returncode


def cmd_guest(args):
    from .lab import guest
    guest.command(args)


def cmd_demo(args):
    from .bench import demo
    demo.run_demo(seconds=args.seconds)


def cmd_kselftest(args):
    if args.bench:
        from .testing import kbench
        return kbench.command(args)
    from .testing import kselftest
    return kselftest.command(args)


def cmd_testhost(args):
    from .testing import testhost
    return testhost.command(args)


def cmd_bench(args):
    if args.what == "scale" and not args.in_guest:
        # It boots the test host, a layer above the benchmarks
        from .testing import scalehost
        return scalehost.command(args)
    from .bench import bench
    return bench.command(args)


def cmd_package(args):
    if args.what == "unsteal":
        from .package import unsteal_deb
        return unsteal_deb.command(args)
    from .package import libvirt_deb
    return libvirt_deb.command(args)


def cmd_test(args):
    from .testing import testrun
    return testrun.run_all(tier=args.tier, quick=args.quick)


def cmd_help(args):
    from .common import LabError
    ap = build_parser()
    if args.markdown:
        if args.topic:
            raise LabError("help --markdown renders every command; it takes no COMMAND")
        if args.write:
            changed = write_reference(LAB_MD)
            print(f"{os.path.relpath(LAB_MD)}: the reference "
                  + ("rewritten" if changed else "was up to date"))
        else:
            sys.stdout.write(reference(ap))
        return 0
    if args.write:
        raise LabError("--write goes with --markdown")
    p = ap
    for i, word in enumerate(args.topic):
        subs = subcommands(p)
        if word not in subs:
            known = ", ".join(subs) or "none"
            where = " ".join([PROG] + args.topic[:i])
            raise LabError(f"{where} has no command {word!r} (commands: {known})")
        p = subs[word]
    p.print_help()
    return 0


# ---------------------------------------------------------------- the parser

def build_parser():
    """The parser of tools/lab: a subparser per command, one per benchmark
    under bench; each command's parser sets func, the cmd_ function above."""
    from .stack import stacks
    from .lab.guest import WORKLOADS
    from .bench.benchmixed import ACTIONS as MIXED_ACTIONS
    from .bench.benchscale import TUNINGS as SCALE_TUNINGS
    from .testing.testhost import VARIANTS
    from .testing.testhostrelease import RELEASES as TESTHOST_RELEASES
    from .testing.testrun import TIERS

    ap = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    top = ap.add_subparsers(dest="cmd", metavar="COMMAND", title="commands")

    def command(sub, name, func, help):
        p = sub.add_parser(name, help=help, description=help)
        if func is not None:  # None: a command of commands (bench)
            p.set_defaults(func=func)
        return p

    def stack_arg(p):
        p.add_argument("stack", metavar="STACK", choices=stacks.keys(),
                       help="which patch stack: " + ", ".join(stacks.keys()))

    command(top, "setup", cmd_setup,
            "add deb-src entries, install build and test dependencies, fetch the pinned "
            "tarballs of every stack")

    p = command(top, "fetch", cmd_fetch, "fetch and verify the pinned base tarballs of a stack")
    stack_arg(p)
    p.add_argument("--debian", action="store_true", help="also fetch Debian's packaging tarball")

    p = command(top, "worktree", cmd_worktree,
                "create _build/src/NAME: the base with the series as commits")
    stack_arg(p)
    p.add_argument("--force", action="store_true", help="recreate it, dropping unexported commits")

    p = command(top, "export", cmd_export, "export the work tree's commits back into the stack")
    stack_arg(p)

    p = command(top, "check", cmd_check,
                "lint the series and check it applies (and builds) in order; kernel: also "
                "checkpatch --strict")
    stack_arg(p)
    p.add_argument("--build-each", action="store_true",
                   help="also build the base and every prefix of the series")
    p.add_argument("--config-matrix", action="store_true",
                   help="kernel: also build the patched kernel in each configuration of "
                        "kernel-patches/config/matrix-*.config (NUMA off, NUMA without "
                        "migration, KSM with memcg)")

    p = command(top, "build", cmd_build, "build the patched libvirt or kernel, or src/")
    p.add_argument("what", choices=["libvirt", "kernel", "src", "all"],
                   help="libvirt: into _build/prefix; kernel: the lab kernel; src: our meson "
                        "project in _build/unsteal-build; all: the three")
    p.add_argument("--stock", action="store_true",
                   help="the base without patches: kernel; libvirt (Debian 13's 11.3.0 into "
                        "_build/prefix-stock, which vcpu_cgroup_inert and bench control "
                        "compare with; tools/lab test builds it)")
    p.add_argument("--stack", metavar="KEY", default=None,
                   choices=[s.key for s in stacks.of_package("libvirt")],
                   help="libvirt: which libvirt stack (default: $UNSTEAL_LIBVIRT_STACK or "
                        "'libvirt')")

    p = command(top, "start", cmd_start, "start the lab's private virtlogd and virtqemud")
    p.add_argument("--vcpu-cgroup", metavar="MODE", choices=list(config.VCPU_CGROUP_MODES),
                   default=None,
                   help="value of qemu.conf's vcpu_cgroup (needs the libvirt series)")

    command(top, "stop", cmd_stop, "destroy lab domains, stop the daemons, remove lab cgroups")
    command(top, "status", cmd_status, "show the lab daemons and domains")

    p = command(top, "virsh", cmd_virsh, "run the prefix's virsh against the lab daemon")
    p.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER,
                   help="virsh's command and arguments")

    p = command(top, "guest", cmd_guest,
                "define/start TCG guests with busy, idle, mixed, spinning or ballooning vCPUs")
    p.add_argument("action", choices=["define", "start", "create", "xml", "destroy"],
                   help="create: a transient guest, waiting until it is ready; define, start, "
                        "destroy: through virsh; xml: print the domain XML")
    p.add_argument("name", metavar="NAME", help="domain name (lab- is prepended when missing)")
    p.add_argument("--vcpus", metavar="N", type=int, default=1, help="vCPUs")
    p.add_argument("--workload", choices=list(WORKLOADS), default="busy",
                   help="busy: a shell loop on every vCPU of a Linux guest; idle: a Linux "
                        "guest that sleeps; mixed: a loop on vCPU 0 only; spin: no OS, every "
                        "vCPU spins with interrupts off; balloon: no Linux, a guest that hands "
                        "memory to the virtio balloon and takes it back")
    p.add_argument("--memory", metavar="MIB", type=int, default=96, help="memory in MiB")
    p.add_argument("--cputune", metavar="K=V,...", default="",
                   help="cputune values, e.g. shares=2048,quota=50000,period=100000")

    p = command(top, "demo", cmd_demo,
                "the main job: 2+1+1 vCPU spinning guests, CPU share and steal per layout")
    p.add_argument("--seconds", metavar="S", type=int, default=20,
                   help="measuring window per mode")

    p = command(top, "kselftest", cmd_kselftest,
                "run the kernel series' selftests in a QEMU TCG guest (docs/kselftest.md)")
    p.add_argument("--kernel", choices=["stock", "patched"], default="patched",
                   help="which kernel to boot (the tests always come from the patched tree)")
    p.add_argument("--debug", action="store_true",
                   help="the debug flavour: KASAN, lockdep, DEBUG_VM (debug.config)")
    p.add_argument("--bench", choices=["swapoff", "migrate"], default=None,
                   help="benchmark instead, stock and patched: swapoff time vs idle mms, "
                        "or NUMA migration time and hostile-case outcomes")
    p.add_argument("--runs", metavar="N", type=int, default=5, help="--bench: runs per data point")
    p.add_argument("--plain", action="store_true",
                   help="run swapoff_test and migrate_failsafe_test with -p: their fail-safe "
                        "scenarios also on a kernel without the series (the stock column)")
    p.add_argument("--timeout", metavar="S", type=int, default=None,
                   help="guest watchdog in seconds")

    p = command(top, "testhost", cmd_testhost,
                "a booted Debian test host: cgroup v1/v2, with and without systemd "
                "(docs/testhost.md)")
    p.add_argument("action", choices=["build", "kernel", "boot"],
                   help="build: the image (and the kernel); kernel: only the kernel; boot: "
                        "boot variants and run integration tests inside")
    p.add_argument("--variant", metavar="V", default="v2-systemd",
                   choices=list(VARIANTS) + ["all"],
                   help="boot: the cgroup/init layout of the test host, or all of them")
    p.add_argument("--tests", metavar="T,...|matrix", default=None,
                   help="boot: comma-separated integration tests (default: all of them), "
                        "or 'matrix': on each variant the list 'tools/lab test' runs there")
    p.add_argument("--timeout", metavar="S", type=int, default=3600,
                   help="boot: watchdog in seconds")
    p.add_argument("--keep", action="store_true",
                   help="boot: keep the run's qcow2 overlay (_build/testhost/run-VARIANT.qcow2)")
    p.add_argument("--kernel", choices=["ours", "debian"], default="ours",
                   help="ours: the patched series with lab.config (the lab kernel, built "
                        "when missing); debian: the release's linux-image-amd64 from the image")
    p.add_argument("--libvirt", choices=["tree", "packages"], default="tree",
                   help="build: tree: our work tree built in a root of the release; "
                        "packages: apt installs the .debs of 'tools/lab package libvirt'")
    p.add_argument("--stock", action="store_true",
                   help="build: also stock libvirt (the base without the series) into the "
                        "image, for vcpu_cgroup_inert on the rows; debian-13 and --libvirt "
                        "tree only, about 10 min more when cold")
    p.add_argument("--release", choices=list(TESTHOST_RELEASES), default=None,
                   help="the image's Debian release: debian-13 (default, the 11.3.0 series, "
                        "what tools/lab test boots) or debian-12 (the 9.0.0 port; its own "
                        "image in _build/testhost-debian-12)")

    bench_parsers(command(top, "bench", None,
                          "benchmarks: scheduler effect, guests, control plane, exporter, "
                          "idle steal at scale (docs/performance.md)"),
                  command, MIXED_ACTIONS, SCALE_TUNINGS)

    p = command(top, "package", cmd_package,
                "rebuild Debian's libvirt or kernel packages with a series, or build "
                "unsteal's own package (docs/packaging.md)")
    p.add_argument("what", choices=["libvirt", "kernel", "unsteal"],
                   help="libvirt, kernel: Debian's source package rebuilt with the stack's "
                        "series; unsteal: our own package, from debian/")
    p.add_argument("--stack", metavar="KEY|DIR", default=None,
                   help="libvirt, kernel: stack key or directory (default: the libvirt or "
                        "kernel stack)")
    p.add_argument("--jobs", metavar="N", type=int, default=None,
                   help="parallel build jobs (default: CPUs)")
    p.add_argument("--prepare-only", action="store_true",
                   help="libvirt, kernel: only assemble the patched source package (no build)")
    p.add_argument("--install-check-only", action="store_true",
                   help="libvirt, unsteal: only rerun the installation check of the built "
                        "packages: the source package's autopkgtests against them")
    p.add_argument("--no-install-check", action="store_true",
                   help="libvirt, unsteal: skip the installation check after the build")
    p.add_argument("--kvm-guest", nargs=2, metavar=("KERNEL", "INITRD"), default=None,
                   help="libvirt: run Debian's smoke-qemu-session too, which boots KERNEL "
                        "and INITRD in a type='kvm' domain, in a testbed given this host's "
                        "/dev/kvm (e.g. /boot/vmlinuz-$(uname -r) /boot/initrd.img-$(uname "
                        "-r))")
    p.add_argument("--keep-root", action="store_true",
                   help="keep the build root under _build/package/ for inspection")
    p.add_argument("--flavour", metavar="F", default="amd64",
                   help="kernel: the flavour to build")

    p = command(top, "test", cmd_test,
                "run the tests of a tier: by default every test (setup, builds, meson test, "
                "libvirt's suite, the test host, the kernel selftests); HACKING.md")
    p.add_argument("--tier", choices=TIERS, default="full",
                   help="unit: the unit tests of src/ and tools/ (seconds, no root, no "
                        "libvirt or kernel build); lab: setup, the builds and every meson "
                        "test of ours on this host; full (default): everything, what CI runs")
    p.add_argument("--quick", action="store_true",
                   help="full: skip libvirt's own suite of the daemon's stack, the other "
                        "libvirt stack's syntax-check, the test host and its scale smoke run")

    p = command(top, "help", cmd_help, "show this help, or a command's")
    p.add_argument("topic", metavar="COMMAND", nargs="*",
                   help="the command (and bench's subcommand) to show, as 'help bench scale'")
    p.add_argument("--markdown", action="store_true",
                   help="print every command's usage and options as Markdown (the reference "
                        "in docs/lab.md)")
    p.add_argument("--write", action="store_true",
                   help="with --markdown: rewrite docs/lab.md's reference instead of printing")
    return ap


def bench_parsers(bench, command, mixed_actions, scale_tunings):
    """The benchmarks, each a subcommand of bench with the options it reads."""
    sub = bench.add_subparsers(dest="what", metavar="WHAT", title="benchmarks", required=True)

    def opt_out(p, what):
        p.add_argument("--out", metavar="DIR", default=None,
                       help=f"results directory (default _build/bench/{what}; docs/performance "
                            f"to publish)")

    def opt_reps(p, default):
        p.add_argument("--reps", metavar="N", type=int, default=None,
                       help=f"repetitions per mode (default {default})")

    def opt_seconds(p, default):
        p.add_argument("--seconds", metavar="S", type=int, default=None,
                       help=f"measuring window in seconds (default {default})")

    def opt_mix(p, help):
        p.add_argument("--mix", metavar="M", action="append", default=None, help=help)

    def opt_replot(p):
        p.add_argument("--replot", action="store_true",
                       help="redraw tables and plots from the results in --out, measure nothing")

    p = command(sub, "sched", cmd_bench,
                "the scheduler's effect: synthetic CPU-bound domains in libvirt's two layouts")
    opt_mix(p, "only this mix (repeatable; default all)")
    opt_reps(p, 5)
    opt_seconds(p, 10)
    opt_out(p, "sched")
    p.add_argument("--top-shares", metavar="N", type=int, default=None,
                   help="cpu.shares of the benchmark's top group (default 10240)")
    opt_replot(p)

    p = command(sub, "guests", cmd_bench,
                "real TCG guests, vcpu_cgroup switched between windows")
    opt_mix(p, "only this mix (repeatable; default all)")
    opt_reps(p, 5)
    opt_seconds(p, 20)
    opt_out(p, "guests")
    opt_replot(p)

    p = command(sub, "control", cmd_bench,
                "control-plane latency of stock vs patched libvirt (stock built from the base "
                "into _build/prefix-stock)")
    opt_reps(p, 10)
    opt_out(p, "control")
    opt_replot(p)

    p = command(sub, "all", cmd_bench, "sched, guests and control, one after the other")
    opt_mix(p, "sched, guests: only this mix (repeatable; default all)")
    opt_reps(p, "each benchmark's")
    opt_seconds(p, "each benchmark's")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="results directory of each (default _build/bench/WHAT)")
    p.add_argument("--top-shares", metavar="N", type=int, default=None,
                   help="sched: cpu.shares of the benchmark's top group (default 10240)")
    opt_replot(p)

    p = command(sub, "wakers", cmd_bench,
                "who wakes the vCPU threads of a guests mix, traced with perf; no plots")
    p.add_argument("--mix", metavar="M", default=None,
                   help="the mix of bench guests to trace (default 2-1-1-linux)")
    opt_seconds(p, 15)
    opt_out(p, "wakers")

    p = command(sub, "mixed", cmd_bench,
                "what a quota or cpu_shares on one guest means among four others, per domain "
                "and per host; no plots")
    p.add_argument("--action", metavar="A", action="append", default=None, choices=mixed_actions,
                   help="only this action on noisy (repeatable; default all): cap "
                        "(vcpu_quota=50000, does not bind), cap-binds (vcpu_quota=20000), "
                        "shares-half, shares-double, shares-4x")
    opt_reps(p, 3)
    p.add_argument("--windows", metavar="N", type=int, default=None,
                   help="measuring windows back to back per measurement, before and after "
                        "each action (default 3); more holds each setting longer")
    opt_seconds(p, 4)
    opt_out(p, "mixed")

    p = command(sub, "tuned", cmd_bench,
                "what a group of its own costs a tuned domain whose cap does not bind, "
                "synthetic; no plots")
    opt_reps(p, 3)
    opt_seconds(p, 5)
    opt_out(p, "tuned")

    p = command(sub, "exporter", cmd_bench,
                "CPU, memory and scrape latency of unsteal exporter with many synthetic vCPU "
                "threads; no root, no plots")
    p.add_argument("--mix", metavar="DxT[:S]", action="append", default=None,
                   help="a size: D domains of T threads, scraped once a second for S seconds "
                        "(default: --seconds) (repeatable; default 20x10 and 100x20:20)")
    opt_reps(p, 1)
    p.add_argument("--seconds", metavar="S", type=int, default=None,
                   help="scraping time per size without :S (default 60)")
    opt_out(p, "exporter")

    p = command(sub, "scale", cmd_bench,
                "idle steal on a test host of 8 and 16 CPUs in 2 NUMA nodes (TCG), "
                "per-domain, per-domain with vCPU-scaled weights and per-host")
    opt_mix(p, "only this mix (repeatable; default all four: seed-4-2-2 and seed-like on 8 "
               "CPUs, exact-16 and over-16 on 16)")
    opt_reps(p, "6; a multiple of 3, so that the layouts' order balances")
    opt_seconds(p, 10)
    opt_out(p, "scale")
    p.add_argument("--numa-balancing", choices=["off", "on", "both"], default="both",
                   help="kernel.numa_balancing in the test host (default both, each mix once "
                        "with each)")
    p.add_argument("--tuning", metavar="T", action="append", default=None,
                   choices=list(scale_tunings),
                   help="run every mix again under this host tuning (repeatable; default "
                        "none): " + "; ".join(f"{k}, {v}" for k, v in scale_tunings.items()
                                              if k != "none"))
    p.add_argument("--tcg", choices=["single", "multi"],
                   help="QEMU's TCG threads, one for all vCPUs or one per vCPU (default: "
                        "single)")
    p.add_argument("--smoke", action="store_true",
                   help="the quick run of tools/lab test: 4 CPUs, the smoke mix, one 2-s "
                        "window per layout, the image as built (into _build/bench/scale-smoke)")
    p.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    opt_replot(p)

    p = command(sub, "host", cmd_bench,
                "the three layouts with synthetic domains on this host (cgroup v1 or v2), in "
                "a cgroup subtree of its own: what an operator runs before deploying")
    opt_mix(p, "only this mix (repeatable; default all: 2-1-1, seed-4-2-2, over, "
               "many-small, capped, seed-like, sized by the host's CPU count)")
    p.add_argument("--runs", metavar="N", type=int, default=6,
                   help="runs, each measuring every layout once; a multiple of 3, so that "
                        "the order balances (default 6)")
    opt_seconds(p, 10)
    opt_out(p, "host")
    p.add_argument("--quick", action="store_true",
                   help="the run of tools/lab test: 2-1-1 and capped (or --mix), 3 runs of "
                        "2-s windows, any CPU count, no plot (into _build/bench/host-quick)")
    p.add_argument("--few-cpus", action="store_true",
                   help="run on a host with fewer than 4 CPUs")
    p.add_argument("--beside-vms", action="store_true",
                   help="run although QEMU processes run on this host (recorded)")
    p.add_argument("--trace", action="store_true",
                   help="also the exact idle steal from a scheduler trace (tracefs), kept "
                        "only for windows whose trace agrees with schedstat")
    opt_replot(p)


def subcommands(parser):
    """{name: parser} of the commands under parser, in their order ({} if none)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def commands(parser=None, path=()):
    """[(path, parser)] of every command and subcommand, depth first."""
    parser = parser or build_parser()
    out = []
    for name, p in subcommands(parser).items():
        out.append((path + (name,), p))
        out += commands(p, path + (name,))
    return out


# ---------------------------------------------------------------- the reference

WIDTH = 88  # of the usage lines


def _metavar(a):
    if isinstance(a.metavar, tuple):
        return " ".join(a.metavar)
    if a.metavar is not None:
        return a.metavar
    if a.choices is not None:
        return "|".join(a.choices)
    return a.dest.upper() if a.option_strings else a.dest


def _shown(parser):
    """The arguments of parser that its help shows, without -h and subcommands."""
    return [a for a in parser._actions
            if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
            and not isinstance(a, argparse._SubParsersAction)]


def _synopsis_words(parser):
    words = []
    for a in _shown(parser):
        if a.option_strings:
            flag = a.option_strings[-1]
            w = flag if a.nargs == 0 else f"{flag} {_metavar(a)}"
            words.append(f"[{w}]..." if isinstance(a, argparse._AppendAction) else f"[{w}]")
        elif a.nargs == argparse.REMAINDER:
            words.append(f"{_metavar(a)}...")
        elif a.nargs == "*":
            words.append(f"[{_metavar(a)}...]")
        elif a.nargs == "?":
            words.append(f"[{_metavar(a)}]")
        else:
            words.append(_metavar(a))
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            words.append(a.metavar + " ...")
    return words


def synopsis(parser):
    """The usage of parser, wrapped at WIDTH, continued lines indented."""
    lines, line = [], parser.prog
    for w in _synopsis_words(parser):
        if len(line) + 1 + len(w) > WIDTH and line.strip() != parser.prog:
            lines.append(line)
            line = "    " + w
        else:
            line += " " + w
    return "\n".join(lines + [line])


def _md(text):
    """Help text as Markdown text: what Markdown would take for markup escaped."""
    for c in "\\*<":
        text = text.replace(c, "\\" + c)
    return text


def _cell(text):
    """Text in a cell of a Markdown table."""
    return text.replace("|", "\\|")


def _meaning(a):
    text = a.help or ""
    extra = []
    if a.choices is not None and a.metavar is not None \
            and not all(str(c) in text for c in a.choices):
        extra.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
    if isinstance(a, argparse._AppendAction) and "repeatable" not in text:
        extra.append("repeatable")
    if a.default not in (None, False, "", argparse.SUPPRESS) and "default" not in text:
        extra.append(f"default `{a.default}`")
    text = _md(text)
    if extra:
        text += (" (" if text else "") + "; ".join(extra) + (")" if text else "")
    return text


def _argument_rows(parser):
    rows = []
    for a in _shown(parser):
        if a.option_strings:
            name = ", ".join(a.option_strings)
            name = name if a.nargs == 0 else f"{name} {_metavar(a)}"
        else:
            name = _metavar(a)
        rows.append(f"| `{_cell(name)}` | {_cell(_meaning(a))} |")
    return rows


def reference(parser=None):
    """Every command's usage and options as Markdown: a table of the
    commands, then a section per command and per subcommand."""
    parser = parser or build_parser()
    def table(head, path, parser):
        rows = [f"| [`{name}`](#{'-'.join(path + (name,))}) | {_cell(_md(p.description))} |"
                for name, p in subcommands(parser).items()]
        return ["", f"| {head} | what it does |", "| --- | --- |"] + rows if rows else []

    out = [f"Usage: `{PROG} COMMAND [ARGUMENT...]`; `{PROG} help COMMAND...` and "
           f"`{PROG} COMMAND... --help` show a command's part of this on the terminal."]
    out += table("command", (), parser)
    for path, p in commands(parser):
        # The heading's anchor is path joined by '-': the links above
        about = _md(p.description)
        out += ["", f"### {' '.join(path)}", "", about[:1].upper() + about[1:] + ".", "",
                "```", synopsis(p), "```"]
        out += table(" ".join(path) + " WHAT", path, p)
        rows = _argument_rows(p)
        if rows:
            out += ["", "| argument | meaning |", "| --- | --- |"] + rows
    return "\n".join(out) + "\n"


def generated_section(text):
    """The text between MARKERS in text (a document), or None without them."""
    begin, end = text.find(MARKERS[0]), text.find(MARKERS[1])
    if begin < 0 or end < begin:
        return None
    return text[begin + len(MARKERS[0]):end].strip("\n") + "\n"


def write_reference(path, parser=None):
    """Rewrite the reference between MARKERS in the Markdown file at path;
    True when it changed."""
    with open(path) as fh:
        text = fh.read()
    if generated_section(text) is None:
        from .common import LabError
        raise LabError(f"{path}: no section between {MARKERS[0]} and {MARKERS[1]}")
    head, rest = text.split(MARKERS[0], 1)
    _, tail = rest.split(MARKERS[1], 1)
    new = head + MARKERS[0] + "\n" + reference(parser) + MARKERS[1] + tail
    if new == text:
        return False
    with open(path + ".tmp", "w") as fh:
        fh.write(new)
    os.replace(path + ".tmp", path)
    return True
