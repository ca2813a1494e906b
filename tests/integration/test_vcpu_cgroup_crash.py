# SPDX-License-Identifier: GPL-2.0-or-later
"""The daemon killed while it places vCPUs, and virsh while it does.

A placement change is a live move of vCPUs on cgroup v1 (schedinfo
--live with a quota, and back), and the start of a sharing domain on
cgroup v2, where placement is chosen at start.

- virsh list, called back to back while placement changes run one after
  another, waits no longer than it does while the same operations run on
  the stock path (a domain with cpu_shares, in its own groups, on v1; the
  start of a capped domain, in its own group, on v2): its 90th percentile
  at most 1.5 times stock's and 0.5 s, its slowest answer at most 3 times
  stock's slowest and 1 s.  Stock libvirt too keeps a starting domain
  locked while QEMU starts, and virsh list locks every domain, so an
  absolute bound measures the machine (1.49 s on a 2-core CI machine for
  what took 0.77 s on another).  The slowest answer alone is a poor
  statistic on the test host, where one call of 60-70 takes twice the
  median on either side (0.91 s median, 2.03 s slowest on the stock path
  against 0.86 s and 1.74 s for ours on v2-machined, 2026-11-27); the
  90th percentile is about the seventh slowest of them.  On the test
  host, whose CPUs are QEMU TCG CPUs, the comparison could not be gated:
  two matrix runs of 2026-11-27 read a 90th percentile of 1.06 and 1.79 s
  (stock 0.97 and 1.09 s), the second 0.35 s inside its bound, half the
  spread of the two readings.  It is not measured there (its six domain
  starts took minutes of the matrix for two printed figures): the
  development host measures and gates it, for the live moves of cgroup
  v1; the starts of v2 have only the figures above;
- the daemon killed with SIGKILL at several points of a placement change
  restarts with every domain that was running still running (the same QEMU
  process), each in a valid cgroup: its vCPU threads all in the per-host
  group or all in their own groups, where the placement rule puts them
  (cgroup v1) or where the domain started (v2), as domstats says; vCPU 0
  still pinned as configured, and the domain's memory limit in place.  A
  domain whose start was interrupted either runs in a valid cgroup or is
  gone with its group and its QEMU process.
"""

import os
import signal
import statistics
import subprocess
import threading
import time

import labtest
import vcpucg
from labtest import PREFIX, daemon, guest, measure

# Where the daemon dies: before QEMU runs, while it is started, and (250-400
# ms on the TCG test host) after machined registered the domain but before
# the start finished, the reconnect's hardest case.
DELAYS = (0.0, 0.02, 0.1, 0.25, 0.3, 0.4)
LIMIT_KIB = 768 * 1024
VIRSH = os.path.join(PREFIX, "bin", "virsh")
# how long an interrupted start's cgroup may take to go after its QEMU process
GROUP_GONE_S = 10
# virsh list during placement changes: CHANGES of them on each side, and
# how much slower than on the stock path its 90th percentile and its
# slowest answer may be
CHANGES = 3
LIST_SLOWER = 1.5
LIST_MARGIN_S = 0.5
SLOWEST_SLOWER = 3
SLOWEST_MARGIN_S = 1.0


def virsh_argv(*args):
    return [VIRSH, "-c", daemon.lab().uri] + list(args)


def memory_limit(name):
    """The hard limit in the domain's memory group, in bytes."""
    dom = vcpucg.domain_group(name)
    if vcpucg.V2:
        return labtest.cgroup_value("memory", labtest.domain_sub(dom, "memory")
                                    if vcpucg.MACHINED else dom, "memory.max")
    pid = guest.qemu_pid(name)
    return labtest.cgroup_value("memory", labtest.thread_cgroup(pid, pid, "memory"),
                                "memory.limit_in_bytes")


def pinned(name, vcpu=0):
    tid = guest.vcpu_tids(name)[vcpu]
    with open(f"/proc/{guest.qemu_pid(name)}/task/{tid}/status") as fh:
        for line in fh:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return None


def quota_set(name):
    p = vcpucg.schedinfo(name, live=True)
    for line in p.stdout.splitlines():
        if line.startswith("vcpu_quota"):
            return int(line.split(":", 1)[1]) > 0
    return False


def check_valid(t, name, pid, what):
    t.eq(guest.qemu_pid(name), pid, f"{what}: {name} still runs, the same QEMU process")
    shared, own = vcpucg.all_shared(name), vcpucg.all_own(name)
    nested = vcpucg.all_nested(name)
    t.ok(shared + own + nested == 1, f"{what}: {name}'s vCPUs are all in one valid place",
         vcpucg.placement_report(name))
    if not vcpucg.V2:
        # a vCPU quota alone nests the vCPUs in the shared group on v1
        t.ok((nested if quota_set(name) else shared),
             f"{what}: {name} is where the rule puts it", vcpucg.placement_report(name))
    t.eq(vcpucg.domstats(name).get("cpu.vcpu_cgroup"),
         "per-host" if shared or nested else "per-domain",
         f"{what}: domstats says where {name} is")
    t.eq(pinned(name), "0", f"{what}: {name}'s vCPU 0 is still pinned to CPU 0")
    t.eq(memory_limit(name), str(LIMIT_KIB * 1024), f"{what}: {name}'s memory limit holds")


def change(a, tuned=False):
    """A placement change, as a virsh process: a live move of a's vCPUs on
    v1, the start of a sharing domain on v2.  tuned: the same operation on
    the stock path (a is then a domain with cpu_shares on v1; on v2 the
    domain started has a quota, which gives it its own group)."""
    if vcpucg.V2:
        xml = os.path.join(daemon.lab().dir, "vk-c.xml")
        with open(xml, "w") as fh:
            fh.write(guest.domain_xml("lab-vk-c", 1, "idle",
                                      cputune={"quota": "50000"} if tuned else None))
        return subprocess.Popen(virsh_argv("create", xml), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    setting = "vcpu_quota=-1" if quota_set(a) else "vcpu_quota=50000"
    return subprocess.Popen(virsh_argv("schedinfo", a, "--live", "--set", setting),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def undo_change(a):
    if vcpucg.V2:
        daemon.virsh(["destroy", "lab-vk-c"], check=False, capture=True)


def list_times(a, tuned):
    """How long each virsh list took, called back to back while CHANGES
    changes (change()) run one after another; a failed one counts as
    infinitely slow."""
    finished = threading.Event()

    def changes():
        try:
            for _ in range(CHANGES):
                change(a, tuned).wait()
                undo_change(a)
        finally:
            finished.set()

    th = threading.Thread(target=changes, daemon=True)
    th.start()
    times = []
    while not finished.is_set():
        t0 = time.monotonic()
        p = subprocess.run(virsh_argv("list"), capture_output=True, text=True)
        times.append(time.monotonic() - t0 if p.returncode == 0 else float("inf"))
    th.join()
    return times


def check_list_latency(t, a, tuned_dom):
    """virsh list during placement changes, beside the same operations on
    the stock path (tuned_dom on v1)."""
    stock = list_times(tuned_dom, tuned=True)
    ours = list_times(a, tuned=False)
    def p90(times):
        return measure.percentile(times, 90)

    for what, times in (("changes on the stock path", stock), ("placement changes", ours)):
        print(f"# virsh list during {CHANGES} {what}: {len(times)} calls, median "
              f"{statistics.median(times):.2f} s, 90th percentile {p90(times):.2f} s, "
              f"slowest {max(times):.2f} s", flush=True)
    checks = [
        (p90(ours), p90(stock) * LIST_SLOWER + LIST_MARGIN_S,
         "virsh list waits during placement changes no longer than on the stock path "
         f"(90th percentile {p90(ours):.2f} s; stock {p90(stock):.2f} s", "90th percentile"),
        (max(ours), max(stock) * SLOWEST_SLOWER + SLOWEST_MARGIN_S,
         f"and its slowest answer is no outlier (slowest {max(ours):.2f} s; "
         f"stock {max(stock):.2f} s", "slowest"),
    ]
    for got, bound, what, figure in checks:
        t.bound(got, bound, f"{what}, allowed {bound:.2f} s)", unit="s", figure=figure)


def check_interrupted_start(t, what):
    """cgroup v2: the domain whose start was interrupted runs in a valid
    cgroup, or is gone with its group and process."""
    c = "lab-vk-c"
    try:
        pid = guest.qemu_pid(c)
    except labtest.LabError:
        pid = None
    if pid and os.path.exists(f"/proc/{pid}"):
        t.ok(vcpucg.all_shared(c), f"{what}: the interrupted start runs, below the partition",
             vcpucg.placement_report(c))
        daemon.virsh(["destroy", c], check=False, capture=True)
        return
    left = subprocess.run(["pgrep", "-f", "guest=lab-vk-c"], capture_output=True, text=True)
    t.eq(left.stdout.strip(), "", f"{what}: the interrupted start left no QEMU process")
    top = os.path.join(labtest.controller_dir("cpu"), vcpucg.DOMAINS.lstrip("/"))

    def stray():
        return [d for d in os.listdir(top) if "vk\\x2dc" in d or "vk-c" in d] \
            if os.path.isdir(top) else []

    # With machined the group is a scope, which systemd stops
    # asynchronously once libvirt asked machined to terminate the machine
    # (measured: gone by the first look in every run on the TCG test host).
    # Stock libvirt never asks when the reconnect fails before it finds the
    # cgroup; the scope then stays until reboot.
    t0 = time.monotonic()
    gone = labtest.wait_for(lambda: not stray(), timeout=GROUP_GONE_S)
    waited = time.monotonic() - t0
    t.ok(gone, f"{what}: and no cgroup (gone after {waited:.1f} s, "
               f"{GROUP_GONE_S} s allowed)", f"left: {stray()}")
    t.margin(waited if gone else None, GROUP_GONE_S, f"{what}: and no cgroup", unit="s",
             figure="until it was gone")


def main(t):
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    a = guest.create("vk-a", vcpus=2, workload="idle")
    b = guest.create("vk-b", vcpus=1, workload="idle", cputune={"quota": "50000"})
    for n in (a, b):
        for args in (["vcpupin", n, "0", "0", "--live"],
                     ["memtune", n, "--hard-limit", str(LIMIT_KIB), "--live"]):
            p = daemon.virsh(args, check=False, capture=True)
            t.ok(p.returncode == 0, f"{' '.join(args[:1])} {n}", p.stderr)
    pids = {n: guest.qemu_pid(n) for n in (a, b)}
    for n in (a, b):
        check_valid(t, n, pids[n], "before")

    # v1: the stock path's live change is on a domain in its own groups
    tuned = None if vcpucg.V2 else guest.create("vk-s", vcpus=1, workload="idle",
                                                cputune={"shares": "2048"})
    if tuned:
        t.ok(vcpucg.all_own(tuned), f"{tuned} (cpu_shares) has its vCPUs in its own groups",
             vcpucg.placement_report(tuned))
    if not labtest.CONFIG.testhost:
        check_list_latency(t, a, tuned)
    if tuned:
        daemon.virsh(["destroy", tuned], capture=True)

    for delay in DELAYS:
        what = f"SIGKILL {int(delay * 1000)} ms into a placement change"
        proc = change(a)
        time.sleep(delay)
        killed = daemon.pid()
        os.kill(killed, signal.SIGKILL)
        proc.wait()
        try:
            os.waitpid(killed, 0)   # the lab started it: reap it
        except ChildProcessError:
            pass
        daemon.start(vcpu_cgroup="per-host", quiet=True)
        for n in (a, b):
            check_valid(t, n, pids[n], what)
        if vcpucg.V2:
            check_interrupted_start(t, what)


labtest.run(main)
