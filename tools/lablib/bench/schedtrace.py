# SPDX-License-Identifier: GPL-2.0-or-later
"""The scheduler's switch, wake-up and migration events, recorded in a
tracefs instance.

A Recorder works in a tracing instance of its own
(tracefs/instances/unsteal-PID), so it neither reads nor changes the
host's main trace buffer or another user's instance.  If tracefs is not
mounted it is mounted on a private directory for the recording and
unmounted afterwards.  Timestamps use the 'mono' clock (CLOCK_MONOTONIC
seconds, the same on every CPU), so events of different CPUs can be put
in one order and compared with time.monotonic().

    with Recorder() as rec:
        rec.start()               # every CPU switches once, to this thread
        ...
        lines = rec.stop()        # tracefs text, for idlesteal.parse()

rec.visited and rec.stopped are the time.monotonic() seconds at which
every CPU had switched and at which tracing was turned off: the span a
replay can cover, without the Recorder's own set-up and read-back.
"""

import os
import subprocess
import tempfile
import time

from ..common import LabError

EVENTS = ("sched_switch", "sched_wakeup", "sched_wakeup_new", "sched_migrate_task")


def mounted_tracefs():
    """Where tracefs is mounted, or None."""
    with open("/proc/mounts") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "tracefs":
                return fields[1]
    return None


def available():
    """Whether this kernel has tracefs and the events we need."""
    with open("/proc/filesystems") as fh:
        return any(line.split()[-1] == "tracefs" for line in fh if line.strip())


def visit_cpus():
    """Runs the calling thread once on every CPU it may use, and back.

    The replay knows what a CPU runs from its first switch on; an idle CPU
    (NO_HZ) or one that runs a single spinner may switch no task for
    seconds.  Moving onto each CPU right after the recording starts makes
    every CPU switch at once (to this thread), at the cost of a few
    migrations."""
    mask = os.sched_getaffinity(0)
    try:
        for cpu in sorted(mask):
            os.sched_setaffinity(0, {cpu})
    finally:
        os.sched_setaffinity(0, mask)


class Recorder:
    def __init__(self, buffer_kb=16384):
        self.buffer_kb = buffer_kb
        self.mountpoint = None     # set if we mounted tracefs
        self.instance = None
        self.visited = None        # time.monotonic() once every CPU switched
        self.stopped = None        # time.monotonic() as tracing was turned off

    def _write(self, name, value):
        with open(os.path.join(self.instance, name), "w") as fh:
            fh.write(str(value))

    def __enter__(self):
        if not available():
            raise LabError("this kernel has no tracefs (CONFIG_FTRACE): cannot trace the scheduler")
        top = mounted_tracefs()
        if top is None:
            self.mountpoint = tempfile.mkdtemp(prefix="unsteal-tracefs-")
            p = subprocess.run(["mount", "-t", "tracefs", "nodev", self.mountpoint],
                               capture_output=True, text=True)
            if p.returncode != 0:
                os.rmdir(self.mountpoint)
                self.mountpoint = None
                raise LabError(f"cannot mount tracefs: {p.stderr.strip()}")
            top = self.mountpoint
        self.instance = os.path.join(top, "instances", f"unsteal-{os.getpid()}")
        try:
            os.mkdir(self.instance)
            self._write("tracing_on", 0)
            self._write("buffer_size_kb", self.buffer_kb)
            self._write("trace_clock", "mono")
            for ev in EVENTS:
                path = os.path.join("events", "sched", ev, "enable")
                if not os.path.exists(os.path.join(self.instance, path)):
                    raise LabError(f"this kernel has no sched:{ev} tracepoint")
                self._write(path, 1)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start(self):
        self._write("trace", "")
        self._write("tracing_on", 1)
        visit_cpus()
        self.visited = time.monotonic()

    def stop(self):
        """Stops recording; returns the trace's lines.  Raises if the buffer
        overflowed, because a lost event makes the replay wrong."""
        self.stopped = time.monotonic()
        self._write("tracing_on", 0)
        lost = self.overruns()
        if lost:
            raise LabError(f"the trace buffer overflowed ({lost} events lost): "
                           f"record a shorter window or a larger buffer than {self.buffer_kb} KiB")
        with open(os.path.join(self.instance, "trace")) as fh:
            return fh.read().splitlines()

    def overruns(self):
        total = 0
        per_cpu = os.path.join(self.instance, "per_cpu")
        for cpu in os.listdir(per_cpu):
            with open(os.path.join(per_cpu, cpu, "stats")) as fh:
                for line in fh:
                    if line.startswith("overrun:"):
                        total += int(line.split()[1])
        return total

    def __exit__(self, *exc):
        try:
            if self.instance and os.path.isdir(self.instance):
                try:
                    self._write("tracing_on", 0)
                except OSError:
                    pass
                os.rmdir(self.instance)
        finally:
            # The private mount goes even when the instance could not
            self.instance = None
            if self.mountpoint:
                subprocess.run(["umount", self.mountpoint], check=False)
                os.rmdir(self.mountpoint)
                self.mountpoint = None
        return False
