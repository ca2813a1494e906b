# SPDX-License-Identifier: GPL-2.0-or-later
"""Paths, logging and process helpers shared by every lab subcommand."""

import fcntl
import hashlib
import os
import re
import shlex
import subprocess
import sys
import threading
import time

from . import config

# The checkout: where this file is, not configuration.
ROOT = config.ROOT


# The build and cache directories are configuration (config.py): read when
# a command asks, never when a module is imported, and the same for a run.
def build_dir():
    """The build directory (UNSTEAL_BUILD)."""
    return config.get().build


def cache_dir():
    """The download cache (UNSTEAL_CACHE)."""
    return config.get().cache


def logs_dir():
    """The logs of builds, tests and daemons, in the build directory."""
    return os.path.join(build_dir(), "logs")


def images_dir():
    """Where built images go: the lab kernels' bzImages (build/kernel.py) and
    the guests' initramfs, spin boot sector and balloon guest (lab/guest.py)."""
    return os.path.join(build_dir(), "images")


def sources_dir():
    """The downloaded sources, in the cache."""
    return config.get().sources


class LabError(Exception):
    """An error with a message meant for the operator; printed without a traceback."""


_t0 = time.monotonic()


# Where progress lines go; test harnesses that speak TAP on stdout set stderr.
PROGRESS = sys.stdout


# Threads that report side by side (test host rows) write whole lines.
_progress_lock = threading.Lock()


def step(msg):
    """One line of progress per step, with elapsed time since the command started."""
    el = time.monotonic() - _t0
    with _progress_lock:
        print(f"lab [{int(el) // 60:02d}:{int(el) % 60:02d}] {msg}", file=PROGRESS, flush=True)


def warn(msg):
    print(f"lab: warning: {msg}", file=sys.stderr, flush=True)


def run(cmd, cwd=None, env=None, check=True, quiet=False, capture=False, log=None, input=None):
    """Run a command.  quiet: hide output unless it fails.  log: also tee to a file."""
    if isinstance(cmd, str):
        cmd = ["bash", "-c", cmd]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if capture:
        p = subprocess.run(cmd, cwd=cwd, env=full_env, text=True, input=input,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if check and p.returncode != 0:
            raise LabError(f"command failed ({p.returncode}): {shlex.join(cmd)}\n{p.stderr.strip()}")
        return p
    if quiet or log:
        logpath = log or os.path.join(logs_dir(), "last-command.log")
        os.makedirs(os.path.dirname(logpath), exist_ok=True)
        with open(logpath, "w") as fh:
            p = subprocess.run(cmd, cwd=cwd, env=full_env, stdout=fh, stderr=subprocess.STDOUT,
                               text=True, input=input)
        if check and p.returncode != 0:
            with open(logpath) as fh:
                tail = fh.read().splitlines()[-40:]
            raise LabError(f"command failed ({p.returncode}): {shlex.join(cmd)}\n"
                           f"--- last lines of {logpath} ---\n" + "\n".join(tail))
        return p
    p = subprocess.run(cmd, cwd=cwd, env=full_env, text=True, input=input)
    if check and p.returncode != 0:
        raise LabError(f"command failed ({p.returncode}): {shlex.join(cmd)}")
    return p


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_kv(path):
    """Parse a small key=value file (comments with #)."""
    out = {}
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise LabError(f"{path}:{n}: expected key=value, got {line!r}")
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def require_root(what):
    if os.geteuid() != 0:
        raise LabError(f"{what} needs root (it manages cgroups and daemons)")


def mkdirs(*paths):
    for p in paths:
        os.makedirs(p, exist_ok=True)


def dir_lock(directory, what):
    """Hold DIRECTORY/lock exclusively until the returned file is closed
    (it is a context manager).  Raises LabError at once when another
    process holds it: WHAT names the command that uses the directory."""
    mkdirs(directory)
    lock = open(os.path.join(directory, "lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise LabError(f"another {what} is using {directory}; wait for it to finish")
    return lock


def watch(cmd, log, label, every=60):
    """Run cmd with output to log; a progress line every minute with the log's last line."""
    mkdirs(os.path.dirname(log))
    t0 = time.monotonic()
    with open(log, "w") as fh:
        p = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        while True:
            try:
                rc = p.wait(timeout=every)
                break
            except subprocess.TimeoutExpired:
                last = _last_line(log)
                # ninja's "[N/M] cc ... -o path -c src.c": keep the count and the source.
                m = re.match(r"^(\[\d+/\d+\])\s.*\s(\S+\.\w+)$", last)
                if m:
                    last = f"{m.group(1)} {m.group(2)}"
                step(f"{label}: {int(time.monotonic() - t0) // 60} min; {last[:110]}")
            except KeyboardInterrupt:
                p.terminate()
                p.wait()
                raise
    return rc, time.monotonic() - t0


def _last_line(path):
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 4096))
            lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""
    except OSError:
        return ""
