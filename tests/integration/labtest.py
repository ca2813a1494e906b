# SPDX-License-Identifier: GPL-2.0-or-later
"""A small TAP harness for integration tests against the lab daemon.

Tests read placement and usage from /proc and /sys/fs/cgroup directly, never
through libvirt's own code, so that they check what libvirt did rather than
what it believes it did.  Every test stops the lab (destroying its guests and
removing its cgroups) when it ends, whether it passed or not.
"""

import functools
import os
import re
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from lablib import config  # noqa: E402

# The environment tests/meson.build (or the test host's runner) set, read once.
CONFIG = config.load()

from lablib import common  # noqa: E402,F401
from lablib.lab import cgroupfs, measure  # noqa: E402,F401
from lablib.lab import daemon as lab_daemon, guest as lab_guest  # noqa: E402
from lablib.stack import stacks  # noqa: E402,F401
from lablib.common import LabError  # noqa: E402,F401

# stdout is TAP; the lab's progress lines go to stderr.
common.PROGRESS = sys.stderr

# Which host the tests run on is said here, once, and passed to the lab:
# the test host's runner sets UNSTEAL_TESTHOST=1 (config.testhost).  There
# guests boot no OS and the daemon gets longer to answer (nested TCG).
GUEST_HOST = lab_guest.TEST_HOST if CONFIG.testhost else lab_guest.DEVELOPMENT_HOST
DAEMON_TIMEOUT = 600 if CONFIG.testhost else lab_daemon.START_TIMEOUT


class _Bound:
    """A lab module whose named functions get keyword arguments bound, so
    that a test calls guest.create(...) or daemon.start(...) the same way on
    either host."""

    def __init__(self, module, **bound):
        self._module = module
        self._bound = bound

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if name in self._bound:
            return functools.partial(attr, **self._bound[name])
        return attr


guest = _Bound(lab_guest, **{name: {"host": GUEST_HOST} for name in
                             ("create", "domain_xml", "wait_console")})
daemon = _Bound(lab_daemon, start={"timeout": DAEMON_TIMEOUT})
from lablib.build.libvirt import lab_prefix  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from taplib import TAP, skip_all, within  # noqa: E402,F401

# The libvirt install the lab daemon runs.
PREFIX = lab_prefix()

CGROOT = "/sys/fs/cgroup"


def require_lab():
    if os.geteuid() != 0:
        skip_all("needs root (run through tools/lab test)")
    if not os.path.exists(os.path.join(PREFIX, "sbin", daemon.lab().daemon)):
        skip_all("the patched libvirt is not built (tools/lab build libvirt)")


def controller_dir(controller):
    """Mount point of the hierarchy with `controller`: its v1 hierarchy or the v2 one."""
    return cgroupfs.hierarchy(controller) or os.path.join(CGROOT, controller)


def has_controller(controller):
    """Whether the host has `controller`, in a v1 hierarchy or on v2."""
    return cgroupfs.hierarchy(controller) is not None


def is_v2(controller):
    return os.path.exists(os.path.join(controller_dir(controller), "cgroup.controllers"))


def thread_cgroup(pid, tid, controller):
    """Path of a thread's cgroup in `controller`'s hierarchy (v1 or v2)."""
    v2 = is_v2(controller)
    with open(f"/proc/{pid}/task/{tid}/cgroup") as fh:
        for line in fh:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            if (v2 and hid == "0") or (not v2 and controller in ctrls.split(",")):
                return path
    return None


def domain_sub(dom, controller="cpu"):
    """Where libvirt puts a domain's vcpuN/emulator groups: the domain's group,
    or its 'libvirt' child where libvirt makes one (cgroup v2)."""
    sub = f"{dom}/libvirt"
    return sub if os.path.isdir(os.path.join(controller_dir(controller), sub.lstrip("/"))) \
        else dom


def cgroup_tasks(controller, path):
    name = "cgroup.threads" if is_v2(controller) else "tasks"
    try:
        with open(os.path.join(controller_dir(controller), path.lstrip("/"), name)) as fh:
            return {int(x) for x in fh.read().split()}
    except OSError:
        return set()


# cgroup v2 spelling of the v1 files the tests read: (file, field of its line).
V2_FILES = {"cpu.cfs_quota_us": ("cpu.max", 0), "cpu.cfs_period_us": ("cpu.max", 1),
            "cpu.shares": ("cpu.weight", 0)}


def cgroup_value(controller, path, name):
    field = None
    if is_v2(controller) and name in V2_FILES:
        name, field = V2_FILES[name]
    with open(os.path.join(controller_dir(controller), path.lstrip("/"), name)) as fh:
        value = fh.read().strip()
    return value if field is None else value.split()[field]


def lab_processes():
    """PIDs of lab daemons and QEMU processes still alive."""
    pids = [daemon.pid(name) for name in (daemon.lab().daemon, "virtlogd")]
    return [p for p in pids if p] + daemon.qemu_pids()


def processes_named(comm):
    """PIDs of the processes whose name (/proc/PID/comm) is comm."""
    pids = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if pid.isdigit() and fh.read().strip() == comm:
                    pids.append(pid)
        except OSError:
            pass
    return pids


def bench_setup():
    """What a benchmark's smoke test needs: root, the v1 cpu hierarchy (its
    mount point, returned) and the spinner built; skips the test otherwise."""
    from lablib.bench import benchsched
    if os.geteuid() != 0:
        skip_all("needs root (run through tools/lab test)")
    try:
        mount = benchsched.cpu_mount()
    except LabError as e:
        skip_all(str(e))
    benchsched.build_spinner()
    return mount


def check_bench_cleanup(t, mount):
    """The benchmark removed its cgroup tree and stopped its vcpu-spin processes."""
    from lablib.bench import benchsched
    t.ok(not os.path.exists(os.path.join(mount, benchsched.BENCH_GROUP)),
         "the benchmark removed its cgroup tree")
    t.eq(processes_named("vcpu-spin"), [], "no vcpu-spin process is left")


def daemon_log_end():
    """Where the lab daemon's log ends now, for daemon_log_messages()."""
    path = os.path.join(common.logs_dir(), "virtqemud.log")
    return os.path.getsize(path) if os.path.exists(path) else 0


def daemon_log_messages(since, levels=("warning", "error")):
    """(level, module, message) of each line the lab daemon logged at one
    of levels after the offset since (daemon_log_end())."""
    try:
        with open(os.path.join(common.logs_dir(), "virtqemud.log"), errors="replace") as fh:
            fh.seek(since)
            text = fh.read()
    except OSError:
        return []
    found = (re.search(r": (\w+) : (\w+):\d+ : (.*)", line) for line in text.splitlines())
    return [m.groups() for m in found if m and m.group(1) in levels]


def wait_for(cond, timeout=10):
    """Polls cond() every 0.1 s until it is true or `timeout` s passed; its
    last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def has_machined():
    """Whether D-Bus can activate systemd-machined (libvirt asks the same)."""
    try:
        p = subprocess.run(["busctl", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                            "org.freedesktop.DBus", "ListActivatableNames"],
                           capture_output=True, text=True)
    except OSError:
        return False
    return p.returncode == 0 and "org.freedesktop.machine1" in p.stdout


def _tail(path, lines=12):
    try:
        with open(path, errors="replace") as fh:
            return fh.read().splitlines()[-lines:]
    except OSError:
        return []


def diagnose(since):
    """Why a domain went away: the end of the QEMU log and console of every
    lab domain written to since `since`, and of the kernel log."""
    lab = daemon.lab().dir
    logs = [os.path.join(lab, f) for f in sorted(os.listdir(lab))
            if f.startswith("console-")] if os.path.isdir(lab) else []
    qlogs = os.path.join(PREFIX, "var", "log", "libvirt", "qemu")
    if os.path.isdir(qlogs):
        logs += [os.path.join(qlogs, f) for f in sorted(os.listdir(qlogs))]
    out = []
    for path in logs:
        try:
            if os.path.getmtime(path) < since:
                continue
        except OSError:
            continue
        out.append(f"{path}:")
        out += [f"  {line}" for line in _tail(path)]
    p = subprocess.run(["dmesg"], capture_output=True, text=True)
    if p.returncode == 0:
        out.append("kernel log:")
        out += [f"  {line}" for line in p.stdout.splitlines()[-15:]]
    return "\n".join(out)


def run(main, lab=True):
    """Run a test body with a TAP object; always stop the lab afterwards.
    lab=False: a test that needs neither the lab daemon nor root; the lab
    is then neither required nor stopped."""
    if lab:
        require_lab()
        print(f"# lab daemon: libvirt stack {stacks.lab_libvirt().key} ({PREFIX})", flush=True)
    tap = TAP()
    start = time.time()
    try:
        main(tap)
    except Exception:
        tap.ok(False, "test body raised",
               traceback.format_exc() + (diagnose(start) if lab else ""))
    finally:
        try:
            if lab:
                daemon.stop()
        except Exception as e:
            tap.ok(False, "tools/lab stop after the test", e)
    tap.done()
