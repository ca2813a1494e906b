# SPDX-License-Identifier: GPL-2.0-or-later
"""A small TAP harness for integration tests against the lab daemon.

Tests read placement and usage from /proc and /sys/fs/cgroup directly, never
through libvirt's own code, so that they check what libvirt did rather than
what it believes it did.  Every test stops the lab (destroying its guests and
removing its cgroups) when it ends, whether it passed or not.
"""

import os
import sys
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from lablib import common, daemon, guest, measure  # noqa: E402,F401
from lablib.common import LabError  # noqa: E402,F401

# stdout is TAP; the lab's progress lines go to stderr.
common.PROGRESS = sys.stderr
from lablib.libvirt import PREFIX  # noqa: E402

CGROOT = "/sys/fs/cgroup"


class TAP:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, what, detail=""):
        self.n += 1
        if cond:
            print(f"ok {self.n} - {what}", flush=True)
        else:
            self.failed += 1
            print(f"not ok {self.n} - {what}", flush=True)
            for line in str(detail).splitlines():
                print(f"# {line}", flush=True)
        return cond

    def skip(self, what, reason):
        """A check that could not be made here; says why (TAP SKIP)."""
        self.n += 1
        print(f"ok {self.n} - {what} # SKIP {reason}", flush=True)

    def eq(self, got, want, what):
        return self.ok(got == want, what, f"got:  {got!r}\nwant: {want!r}")

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)


def skip_all(reason):
    print(f"1..0 # SKIP {reason}", flush=True)
    sys.exit(0)


def require_lab():
    if os.geteuid() != 0:
        skip_all("needs root (run through tools/lab test)")
    if not os.path.exists(os.path.join(PREFIX, "sbin", "virtqemud")):
        skip_all("the patched libvirt is not built (tools/lab build libvirt)")


def thread_cgroup(pid, tid, controller):
    """Path of a thread's cgroup in one v1 controller's hierarchy."""
    with open(f"/proc/{pid}/task/{tid}/cgroup") as fh:
        for line in fh:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller in ctrls.split(","):
                return path
    return None


def cgroup_tasks(controller, path):
    try:
        with open(os.path.join(CGROOT, controller, path.lstrip("/"), "tasks")) as fh:
            return {int(x) for x in fh.read().split()}
    except OSError:
        return set()


def cgroup_value(controller, path, name):
    with open(os.path.join(CGROOT, controller, path.lstrip("/"), name)) as fh:
        return fh.read().strip()


def lab_processes():
    """PIDs of lab daemons and QEMU processes still alive."""
    pids = []
    for name in ("virtqemud", "virtlogd"):
        if daemon._pid(name):
            pids.append(daemon._pid(name))
    return pids + daemon._qemu_pids()


def run(main):
    """Run a test body with a TAP object; always stop the lab afterwards."""
    require_lab()
    print(f"# lab daemon: libvirt stack {common.LIBVIRT_STACK} ({PREFIX})", flush=True)
    tap = TAP()
    try:
        main(tap)
    except Exception:
        tap.ok(False, "test body raised", traceback.format_exc())
    finally:
        try:
            daemon.stop()
        except Exception as e:
            tap.ok(False, "tools/lab stop after the test", e)
    tap.done()
