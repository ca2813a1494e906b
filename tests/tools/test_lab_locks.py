# SPDX-License-Identifier: GPL-2.0-or-later
"""Lab commands that share a build directory refuse to run twice at once.

Two 'tools/lab kselftest' runs (or a run and a '--bench') share the test
binaries, the initramfs and the swap disk in _build/kselftest: the second
one overwrites them under the first one's guest, which then reports
corrupt pages and failed swapons that are not the kernel's.  Both take
_build/kselftest/lock, and the second one must stop with a clear error
before it builds or boots anything.

Another process holds the lock here (a child python that flocks the file
and sleeps), as a concurrent run would.  The kernel build and the
benchmarks are replaced by stand-ins that record that they were reached.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

tap.setup("unsteal-lab-locks-test-")
ok = tap.ok

from lablib.common import LabError, dir_lock  # noqa: E402
from lablib.testing import kbench, kselftest, testhost  # noqa: E402

HOLDER = r'''
import fcntl, os, sys, time
os.makedirs(sys.argv[1], exist_ok=True)
f = open(os.path.join(sys.argv[1], "lock"), "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
'''


PROBE = r'''
import fcntl, os, sys
f = open(os.path.join(sys.argv[1], "lock"), "w")
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("held")
'''


def elsewhere(directory):
    """'held' or 'free': whether another process could take DIRECTORY/lock now."""
    return subprocess.run([sys.executable, "-c", PROBE, directory], stdout=subprocess.PIPE,
                          text=True, check=True).stdout.strip()


class Reached(Exception):
    """Raised by a stand-in: the command got past its lock."""


def hold(directory):
    """Another process holding DIRECTORY/lock; stop it with release()."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, directory],
                         stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "held":
        raise RuntimeError("the lock holder did not start")
    return p


def release(p):
    p.kill()
    p.wait()


def attempt(fn):
    """('refused', message), ('reached', '') or ('other', repr)."""
    try:
        fn()
    except LabError as e:
        return "refused", str(e)
    except Reached:
        return "reached", ""
    except Exception as e:  # noqa: BLE001 - reported as a finding
        return "other", repr(e)
    return "other", "returned"


def stand_in(*args, **kwargs):
    calls.append(args)
    raise Reached()


calls = []
kselftest.build_kernel = stand_in
kbench.bench_swapoff = stand_in
kbench.bench_migrate = stand_in


class Args:
    bench = "swapoff"
    runs = 1


# The helper itself: exclusive, named in the message, free again once closed.
scratch = os.path.join(tap.WORK, "scratch")
first = dir_lock(scratch, "tools/lab something")
what, msg = attempt(lambda: dir_lock(scratch, "tools/lab something"))
ok(what == "refused" and "another tools/lab something is using" in msg and scratch in msg,
   "dir_lock: a second holder is refused with the command's name and the directory", msg)
first.close()
what, msg = attempt(lambda: dir_lock(scratch, "tools/lab something").close())
ok(what == "other" and msg == "returned", "dir_lock: free again once the holder closes it", msg)

# kselftest and its benchmarks, while another process holds _build/kselftest/lock.
holder = hold(kselftest.kselftest_dir())
try:
    what, msg = attempt(lambda: kselftest.run("patched"))
    ok(what == "refused" and "tools/lab kselftest" in msg and not calls,
       "kselftest.run refuses while another run holds _build/kselftest, before building",
       f"{what}: {msg}; stand-ins reached: {len(calls)}")
    what, msg = attempt(lambda: kbench.command(Args()))
    ok(what == "refused" and not calls,
       "kselftest --bench refuses while another run holds _build/kselftest",
       f"{what}: {msg}; stand-ins reached: {len(calls)}")
    what, msg = attempt(lambda: kselftest.run("patched", debug=True))
    ok(what == "refused" and not calls, "the debug flavour refuses too",
       f"{what}: {msg}")
finally:
    release(holder)

# Once the other run has ended, both go ahead (to the stand-ins).
what, msg = attempt(lambda: kselftest.run("patched"))
ok(what == "reached", "kselftest.run goes ahead once the other run has ended", f"{what}: {msg}")
what, msg = attempt(lambda: kbench.command(Args()))
ok(what == "reached", "kselftest --bench goes ahead once the other run has ended",
   f"{what}: {msg}")
# ... and a run that failed has let go of the lock.
what, msg = attempt(lambda: kselftest.run("patched"))
ok(what == "reached", "a run that raised has released the lock", f"{what}: {msg}")

# The test host's lock is the same helper on its own directory.
holder = hold(testhost.testhost_dir())
try:
    what, msg = attempt(testhost.host_lock)
    ok(what == "refused" and "tools/lab testhost" in msg,
       "testhost.host_lock refuses while another testhost run holds it", f"{what}: {msg}")
finally:
    release(holder)
lock = testhost.host_lock()
ok(not lock.closed, "testhost.host_lock is taken once it is free")

# The threads of one command share it (the matrix's lanes run the scale
# smoke run, which takes it too); another process stays refused until the
# last holder of this one has closed it.
what, msg = attempt(lambda: testhost.host_lock().close())
ok(what == "other" and msg == "returned",
   "testhost.host_lock: a second holder in the same process shares it", f"{what}: {msg}")
second = testhost.host_lock()
lock.close()
lock.close()
ok(elsewhere(testhost.testhost_dir()) == "held",
   "testhost.host_lock: still held while one holder of the process has not closed it "
   "(closing one holder twice counts once)")
second.close()
ok(elsewhere(testhost.testhost_dir()) == "free",
   "testhost.host_lock: free for another process once the last holder closed it")

sys.exit(tap.end())
