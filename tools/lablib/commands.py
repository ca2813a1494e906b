# SPDX-License-Identifier: GPL-2.0-or-later
"""Subcommand implementations of tools/lab."""

from .common import LabError
from .stack import sources, stack, stacks


def cmd_setup(args):
    sources.setup()
    for s in stacks.known():
        sources.fetch_base(s.dir, which=("orig", "debian"))


def cmd_fetch(args):
    sources.fetch_base(stacks.get(args.stack).dir,
                       which=("orig", "debian") if args.debian else ("orig",))


def cmd_worktree(args):
    wt = stack.ensure_worktree(stacks.get(args.stack).dir, force=args.force)
    print(wt)


def cmd_export(args):
    stack.export(stacks.get(args.stack).dir)


def cmd_check(args):
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
    stack.check(st.dir, build_each=build_each)
    if st.package == "linux":
        from .build import kcheck
        kcheck.checkpatch(st.dir)
        if args.config_matrix:
            kcheck.configure_matrix(st.dir)
            built, failed = kcheck.build_matrix()
            if failed:
                return 1


def cmd_build(args):
    if args.what in ("libvirt", "all"):
        from .build import libvirt
        libvirt.build(stack=stacks.get(args.stack) if args.stack else None)  # None: the lab's
    if args.what in ("kernel", "all"):
        from .build import kernel
        kernel.build(patched=not args.stock)
    if args.what in ("src", "all"):
        from .build import ownsrc
        ownsrc.build()


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


def cmd_bench(args):
    if args.what == "scale" and not args.in_guest:
        # It boots the test host, a layer above the benchmarks
        from .testing import scalehost
        return scalehost.command(args)
    from .bench import bench
    return bench.command(args)


def cmd_package(args):
    if args.what == "unsteal":
        from .package import upackage
        return upackage.command(args)
    from .package import package
    return package.command(args)


def cmd_testhost(args):
    from .testing import testhost
    return testhost.command(args)


def cmd_test(args):
    from .testing import testrun
    return testrun.run_all(tier=args.tier, quick=args.quick)


def dispatch(args):
    fn = globals()["cmd_" + args.cmd]
    return fn(args)
