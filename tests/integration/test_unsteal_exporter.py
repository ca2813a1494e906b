# SPDX-License-Identifier: GPL-2.0-or-later
"""unsteal exporter against real lab guests, scraped as Prometheus would.

Two spinning guests (2 + 1 vCPUs, three CPU hogs on the host's CPUs,
sharing the per-host group, so that each waits about a third of the time)
under the lab daemon, and 'unsteal exporter --connect LAB-URI' on a free port of
127.0.0.1, sampling every INTERVAL seconds:

- counters against the kernel: over a window of WINDOW seconds, each vCPU's
  run and wait counters, and its idle + busy wait counters, grow by what the
  thread's /proc schedstat grew by, within 2 % (20 ms below 1 s).  Both ends of the window
  are taken the moment a new sample appears on /metrics (polled every
  POLL s), with schedstat read right then, so the exporter's and the test's
  windows differ by milliseconds, not by up to one sampling interval;
- every _total series present in two scrapes in a row never decreased;
- the vCPU series carry domain, vcpu and the libvirt UUID;
- a guest killed with SIGKILL is gone from the next scrapes, and a guest
  started afterwards appears in them;
- 'promtool check metrics' (Debian's prometheus package; tools/lab setup
  extracts promtool from it) finds nothing to say about a real scrape.
"""

import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import labtest
from labtest import daemon, guest, measure
from lablib.stack import sources

UNSTEAL = labtest.CONFIG.unsteal_bin
INTERVAL = 0.5
WINDOW = 10
POLL = 0.01
# 2 % of a counter that grew by less than a second is a few ms: closer than
# the two windows' ends can be lined up (the exporter's sample takes a few
# ms to read every thread); below 1 s the bound is 20 ms.
FLOOR = 0.02
TOTAL = re.compile(r"^(unsteal_\w+_total)(\{[^}]*\})? (\S+)$", re.M)
VCPU = re.compile(r'^unsteal_vcpu_(run|wait|idle_wait|busy_wait)_seconds_total'
                  r'\{domain="([^"]+)",vcpu="(\d+)"(?:,uuid="([^"]+)")?\} (\S+)$', re.M)


class Exporter:
    def __init__(self):
        self.proc = subprocess.Popen(
            [UNSTEAL, "exporter", "--listen", "127.0.0.1:0", "--interval", str(INTERVAL),
             "--connect", daemon.lab().uri],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"serving /metrics on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.stop()
            raise labtest.LabError(f"unsteal exporter did not say where it serves: {line!r}")
        self.url = f"http://127.0.0.1:{m.group(1)}/metrics"
        # Whatever else it says goes to the test's output, so that the pipe never fills.
        threading.Thread(target=self._relay, daemon=True).start()

    def _relay(self):
        for line in self.proc.stderr:
            print(f"# exporter: {line.rstrip()}", flush=True)

    def scrape(self):
        try:
            with urllib.request.urlopen(self.url, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, ""

    def fresh(self, timeout=10):
        """The first exposition of a sample taken after this call, and the
        monotonic time it was seen (within POLL of its appearing)."""
        _, old = self.scrape()
        old = vcpu_counters(old)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            code, text = self.scrape()
            seen = time.monotonic()
            if code == 200 and vcpu_counters(text) != old:
                return text, seen
            time.sleep(POLL)
        raise labtest.LabError(f"no new sample on /metrics within {timeout} s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def vcpu_counters(text):
    """{(domain, vcpu, counter): seconds} and the UUID label of each vCPU."""
    return {(m.group(2), int(m.group(3)), m.group(1)): float(m.group(5))
            for m in VCPU.finditer(text)}


def uuids(text):
    return {(m.group(2), int(m.group(3))): m.group(4) for m in VCPU.finditer(text)}


def totals(text):
    return {(m.group(1), m.group(2) or ""): float(m.group(3)) for m in TOTAL.finditer(text)}


def domains_in(text):
    return {m.group(2) for m in VCPU.finditer(text)}


def check_monotonic(t, a, b, what):
    ta, tb = totals(a), totals(b)
    common = set(ta) & set(tb)
    down = sorted(k for k in common if tb[k] < ta[k])
    t.ok(common and not down, f"{what}: no _total series decreased ({len(common)} series in both)",
         "\n".join(f"{k}: {ta[k]} -> {tb[k]}" for k in down[:10]))


def check_window(t, exp, names):
    threads = {(n, i): (guest.qemu_pid(n), tid)
               for n in names for i, tid in guest.vcpu_tids(n).items()}
    a, _ = exp.fresh()
    s0 = {k: measure.schedstat(*v) for k, v in threads.items()}
    time.sleep(WINDOW)
    b, _ = exp.fresh()
    s1 = {k: measure.schedstat(*v) for k, v in threads.items()}
    ca, cb = vcpu_counters(a), vcpu_counters(b)
    for (n, i) in sorted(threads):
        run_ss = (s1[(n, i)][0] - s0[(n, i)][0]) / 1e9
        wait_ss = (s1[(n, i)][1] - s0[(n, i)][1]) / 1e9

        def delta(counter):
            key = (n, i, counter)
            return cb[key] - ca[key] if key in ca and key in cb else None

        run_ex, wait_ex = delta("run"), delta("wait")
        idle_ex, busy_ex = delta("idle_wait"), delta("busy_wait")
        if not t.ok(None not in (run_ex, wait_ex, idle_ex, busy_ex),
                    f"{n} vCPU {i}: four counters in both scrapes"):
            continue
        for what, ex in (("run", run_ex), ("wait", wait_ex),
                         ("idle + busy wait", idle_ex + busy_ex)):
            ss = run_ss if what == "run" else wait_ss
            t.ok(abs(ex - ss) <= max(0.02 * ss, FLOOR),
                 f"{n} vCPU {i}: {what} over {WINDOW} s within 2 % of schedstat",
                 f"exporter {ex:.4f} s, schedstat {ss:.4f} s")
        print(f"# {n} vCPU {i}: run {run_ex:.3f}/{run_ss:.3f} s, wait {wait_ex:.3f}/{wait_ss:.3f}"
              f" s (exporter/schedstat); idle {idle_ex:.3f} s, busy {busy_ex:.3f} s", flush=True)
    return a, b


def main(t):
    if not os.access(UNSTEAL, os.X_OK):
        t.ok(False, "the unsteal binary is built", UNSTEAL)
        return
    promtool = sources.promtool()
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    big = guest.create("ex-big", vcpus=2, workload="spin")
    small = guest.create("ex-small", vcpus=1, workload="spin")
    exp = Exporter()
    try:
        a, b = check_window(t, exp, [big, small])
        check_monotonic(t, a, b, "the window's two scrapes")
        c, _ = exp.fresh()
        check_monotonic(t, b, c, "the next sample")

        want = {(big, 0), (big, 1), (small, 0)}
        ids = uuids(c)
        t.ok(want <= set(ids), "every vCPU of both guests has its series", sorted(ids))
        for name in (big, small):
            uuid = daemon.virsh(["domuuid", name], capture=True).stdout.strip()
            t.eq({ids.get((name, i)) for i in range(2) if (name, i) in ids}, {uuid},
                 f"{name}: the vCPU series carry libvirt's UUID")

        if promtool is None:
            t.ok(False, "promtool is available", "tools/lab setup extracts it")
        else:
            p = subprocess.run([promtool, "check", "metrics"], input=c, capture_output=True,
                               text=True, timeout=60)
            t.ok(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
                 "promtool check metrics: a real scrape is clean",
                 (p.stdout + p.stderr)[-2000:])

        os.kill(guest.qemu_pid(small), signal.SIGKILL)
        labtest.wait_for(lambda: small not in domains_in(exp.fresh()[0]), timeout=15)
        d, _ = exp.fresh()
        t.ok(small not in domains_in(d) and big in domains_in(d),
             "a guest killed with SIGKILL disappears, the other stays", sorted(domains_in(d)))
        check_monotonic(t, c, d, "across the kill")
        late = guest.create("ex-late", vcpus=1, workload="spin")
        labtest.wait_for(lambda: late in domains_in(exp.fresh()[0]), timeout=15)
        e, _ = exp.fresh()
        t.ok(late in domains_in(e), "a guest started later appears", sorted(domains_in(e)))
        check_monotonic(t, d, e, "across the new guest")
    finally:
        rc = exp.stop()
    t.eq(rc, 0, "SIGTERM stops the exporter with status 0")


labtest.run(main)
