# SPDX-License-Identifier: GPL-2.0-or-later
"""Subcommand implementations of tools/lab."""

from . import sources, stack, stacks


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
            from .libvirt import build_tree
        else:
            from .kernel import build_tree
        build_each = build_tree
    stack.check(st.dir, build_each=build_each)


def cmd_build(args):
    if args.what in ("libvirt", "all"):
        from . import libvirt
        libvirt.build(stack=stacks.get(args.stack) if args.stack else None)  # None: the lab's
    if args.what in ("kernel", "all"):
        from . import kernel
        kernel.build(patched=not args.stock)
    if args.what in ("src", "all"):
        from . import ownsrc
        ownsrc.build()


def cmd_start(args):
    from . import daemon
    daemon.start(vcpu_cgroup=args.vcpu_cgroup)


def cmd_stop(args):
    from . import daemon
    daemon.stop()


def cmd_status(args):
    from . import daemon
    daemon.status()


def cmd_virsh(args):
    from . import daemon
    return daemon.virsh(args.args, check=False).returncode


def cmd_guest(args):
    from . import guest
    guest.command(args)


def cmd_demo(args):
    from . import demo
    demo.run_demo(seconds=args.seconds)


def cmd_kselftest(args):
    if args.bench:
        from . import kbench
        return kbench.command(args)
    from . import kselftest
    return kselftest.command(args)


def cmd_bench(args):
    from . import bench
    return bench.command(args)


def cmd_package(args):
    from . import package
    return package.command(args)


def cmd_testhost(args):
    from . import testhost
    return testhost.command(args)


def cmd_test(args):
    from . import testrun
    return testrun.run_all(quick=args.quick)


def dispatch(args):
    fn = globals()["cmd_" + args.cmd]
    return fn(args)
