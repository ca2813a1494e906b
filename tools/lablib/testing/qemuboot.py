# SPDX-License-Identifier: GPL-2.0-or-later
"""One QEMU boot: a watchdog, the serial console streamed, logged and parsed.

kselftest.py and testhost.py boot a guest whose program reports on the
serial console in TAP.  boot() runs their QEMU command line (-nographic,
-no-reboot: QEMU exits when the guest powers off, reboots or panics),
kills it when the watchdog runs out, shows every console line on stdout
(or gives it to the caller's show(), when boots run side by side), writes
it to a log, and parses it into an Outcome.  A Console says how the
guest's program speaks; what both programs share:

  MARKER up SECONDS ...          the program runs (SECONDS: guest uptime)
  MARKER N passed, N failed ...  its summary
  MARKER done ...                it finished
  PROGRAM_RE                     a test program starts
  ok N NAME / not ok N NAME ...  a test program's result (RESULT_RE)
  # ok N ... / # not ok N ...    a nested subresult (SUB_RE)

and kernel problem lines (SPLAT_RE) anywhere.  A Console's on_line() sees
every other line first and may keep what it wants in Outcome.records.
"""

import collections
import os
import re
import shlex
import subprocess
import threading
import time

from ..common import mkdirs
from ..results import MEASURE_RE, Skip

# Terminal control sequences (the firmware clears the screen, systemd sets
# modes); they may precede a line of the guest's program.
ESCAPE_RE = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|c)")
# Of a failed subresult, at most this many detail lines are kept
DETAIL_LINES = 3
# An oops, BUG(), WARN() or panic.
SPLAT_RE = re.compile(r"(BUG: |WARNING: |Oops|general protection fault|Kernel panic - not "
                      r"syncing|kernel BUG at)")
# The same, and what the kernel's checkers report (KASAN, UBSAN, lockdep,
# RCU, hung tasks), and faults on other architectures.
SPLAT_CHECKERS_RE = re.compile(
    r"(BUG: |WARNING: |Oops|KASAN: |UBSAN: |general protection fault|"
    r"possible circular locking|possible recursive locking|inconsistent lock state|"
    r"suspicious RCU usage|INFO: task .* blocked|Kernel panic - not syncing|"
    r"kernel BUG at|Unable to handle)")


class Result(collections.namedtuple("Result", "ok number name rest")):
    """A test program's result line; rest is what follows its name."""

    @property
    def skipped(self):
        return "# SKIP" in self.rest


# A nested subresult, with the test program it belongs to (or None).
Sub = collections.namedtuple("Sub", "ok program description")


class Console:
    """How a guest's program speaks on the console.

    marker: what starts its own lines ('unsteal-testhost: '); result_re:
    groups status ('ok', 'not ok'), number, name, rest; sub_re: status,
    description; program_re: the program's name; splat_re: kernel problem
    lines; on_line(out, line): the caller's own lines, True when it took one;
    detail_re: group 1 is a line of detail that follows a failed
    subresult (what the program printed about it)."""

    def __init__(self, marker, result_re, sub_re, program_re, splat_re=SPLAT_RE,
                 on_line=None, detail_re=None):
        self.marker = marker
        self.result_re = result_re
        self.sub_re = sub_re
        self.program_re = program_re
        self.splat_re = splat_re
        self.on_line = on_line
        self.detail_re = detail_re


class Outcome:
    """What one boot reported."""

    def __init__(self):
        self.results = []           # Result, one per test program
        self.subresults = []        # Sub, one per nested result line
        self.details = {}           # index in subresults of a failed one: its detail lines
        self.detail_of = None       # that index while its detail lines may follow
        self.program = None         # the test program that runs now
        self.plan_skips = {}        # program: reason its own TAP plan gave ('1..0 # SKIP ...')
        self.splats = []            # kernel problem lines
        self.info = []              # what followed the marker, line by line
        self.records = collections.defaultdict(list)    # kept by Console.on_line
        self.measured = []          # margin and measured lines (results.measurements())
        self.booted = False         # a marker line came
        self.up_at = None           # seconds after QEMU started of 'MARKER up'
        self.guest_uptime = None    # the guest's uptime then
        self.summary = None
        self.done = False
        self.timed_out = False      # the watchdog killed QEMU
        self.total = None           # seconds QEMU ran


SKIP_RE = re.compile(r"^(.*?)\s*#\s*SKIP\b:?\s*(.*)$", re.I)
# A program that skipped as a whole, in its own nested TAP: '# 1..0 # SKIP reason'
PLAN_SKIP_RE = re.compile(r"^#\s*1\.\.0\s*#\s*SKIP\b:?\s*(.*)$", re.I)


def skips(out):
    """([Skip] of the test programs that skipped as a whole, [Skip] of the
    subresults that skipped) of a boot's Outcome, each with its reason."""
    def split(text):
        m = SKIP_RE.match(text.strip())
        return m.group(1).strip(), m.group(2).strip() or "no reason given"

    programs = []
    for r in out.results:
        if r.skipped:
            what, reason = split(r.rest)
            if reason == "no reason given" and out.plan_skips.get(r.name):
                reason = out.plan_skips[r.name]
            programs.append(Skip(f"{r.name}{' ' + what if what else ''}", reason))
    checks = []
    for s in out.subresults:
        if s.ok and SKIP_RE.match(s.description):
            what, reason = split(s.description)
            checks.append(Skip(f"{s.program or '?'}: {what}" if what else (s.program or "?"),
                               reason))
    return programs, checks


def parse(out, line, t, console):
    """One console line, t seconds after QEMU started, into out."""
    line = ESCAPE_RE.sub("", line.replace("\r", ""))
    # The detail lines that directly follow a failed subresult
    detail = (console.detail_re.match(line)
              if console.detail_re and out.detail_of is not None else None)
    if detail:
        if len(out.details[out.detail_of]) < DETAIL_LINES:
            out.details[out.detail_of].append(detail.group(1).strip())
    else:
        out.detail_of = None
    if console.marker in line:
        body = line.split(console.marker, 1)[1]
        out.booted = True
        if body.startswith("up "):
            out.up_at = t
            out.guest_uptime = float(body.split()[1])
        if re.match(r"\d+ passed, \d+ failed", body):
            out.summary = body
        if body.startswith("done"):
            out.done = True
        out.info.append(body)
        return
    m = console.program_re.match(line)
    if m:
        out.program = m.group(1)
        return
    m = console.result_re.match(line)
    if m:
        out.results.append(Result(m.group(1) == "ok", int(m.group(2)), m.group(3),
                                  m.group(4)))
        return
    m = PLAN_SKIP_RE.match(line)
    if m and out.program:
        out.plan_skips[out.program] = m.group(1).strip()
    m = console.sub_re.match(line)
    if m:
        out.subresults.append(Sub(m.group(1) == "ok", out.program, m.group(2)))
        if m.group(1) != "ok":
            out.detail_of = len(out.subresults) - 1
            out.details[out.detail_of] = []
    m = MEASURE_RE.match(line)
    if m:
        out.measured.append({"source": out.program or "?", "kind": m.group(1),
                             "line": m.group(2).strip()})
    if console.on_line and console.on_line(out, line):
        return
    if console.splat_re.search(line):
        out.splats.append(line.strip())


def boot(cmd, log, timeout, console, timestamps=False, show=None):
    """Run cmd, QEMU with its serial console on stdout, for at most timeout
    seconds; every line goes to log (after the command line; with
    timestamps, each behind the seconds since QEMU started) and to
    show(line), by default to stdout."""
    mkdirs(os.path.dirname(log))
    out = Outcome()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)

    def watchdog():
        out.timed_out = True
        proc.kill()

    timer = threading.Timer(timeout, watchdog)
    timer.start()
    try:
        with open(log, "w") as fh:
            fh.write("$ " + shlex.join(cmd) + "\n")
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                t = time.monotonic() - t0
                fh.write(f"[{t:7.1f}] {line}\n" if timestamps else line + "\n")
                fh.flush()
                if show:
                    show(line)
                else:
                    print(line, flush=True)
                parse(out, line, t, console)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.total = time.monotonic() - t0
    return out
