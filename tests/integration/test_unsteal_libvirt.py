# SPDX-License-Identifier: GPL-2.0-or-later
"""unsteal --connect against the lab's virtqemud (vcpu_cgroup = "per-host").

Guests: a busy 2-vCPU guest with default tunables, an idle 1-vCPU guest
with <shares>2048</shares>, and an idle guest defined with 4 vCPUs of
which 1 is online, into which vCPU id 3 is hot-plugged (so its libvirt id
3 differs from its hotplug order 2).

Checked against libvirt's own records, not against unsteal's code:
- the guests are found by libvirt name; no other QEMU process (other lab
  daemons on this host) is reported;
- every vCPU id <-> thread id pair equals the <vcpu id= pid=> pairs of
  libvirt's status XML (_build/prefix/var/run/libvirt/qemu/NAME.xml), and
  the hot-plugged vCPU carries its id and the XML's order;
- tunables default/custom, the cputune text, expected placement equal to
  the actual placement (the rule of the per-host daemon) and libvirt's
  cpu.vcpu_cgroup statistic;
- libvirt_steal_pct (from vcpu.N.delay, over the interval between
  libvirt's two readings) within 10 percentage points of unsteal's
  schedstat steal over its 3 s interval: the two read the same counter
  at slightly different moments, and on a loaded 2-CPU host either reader
  can itself wait ~100 ms for a CPU (about 3 points at 3 s);
- virtqemud stopped mid-run (its QEMU processes keep running): unsteal
  keeps printing, says 'libvirt: connection lost to URI', measures the
  guests from /proc meanwhile, and is connected again within 10 s of
  the daemon's restart; it exits 0 on SIGTERM.
"""

import json
import os
import queue
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import labtest
from labtest import daemon, guest

UNSTEAL = labtest.CONFIG.unsteal_bin


def status_vcpu_tids(name):
    """{libvirt vCPU id: thread id} from libvirt's status XML."""
    root = ET.parse(os.path.join(daemon.lab().rundir, "qemu", f"{name}.xml")).getroot()
    return {int(v.get("id")): int(v.get("pid"))
            for v in root.iter("vcpu") if v.get("pid") is not None}


def live_orders(name):
    """{vCPU id: order} of the enabled vCPUs in the live domain XML."""
    xml = daemon.virsh(["dumpxml", name], capture=True).stdout
    out = {}
    for v in ET.fromstring(xml).iter("vcpu"):
        if v.get("id") is not None and v.get("enabled") == "yes":
            out[int(v.get("id"))] = int(v.get("order")) if v.get("order") else None
    return out


def report(*args):
    p = subprocess.run([UNSTEAL, "report", "--json", "--no-timestamp",
                        "--connect", daemon.lab().uri] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p, [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


class Stream:
    """unsteal report running in the background, one JSON line per interval."""

    def __init__(self, interval):
        self.p = subprocess.Popen([UNSTEAL, "report", "--json", "--no-timestamp",
                                   "--interval", str(interval), "--connect", daemon.lab().uri],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            if line.startswith("{"):
                self.q.put(json.loads(line))
        self.q.put(None)

    def wait_for(self, pred, timeout):
        """The first report satisfying pred within timeout, or None."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                r = self.q.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                break
            if r is None:
                return None
            if pred(r):
                return r
        return None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait()


def main(t):
    if not os.access(UNSTEAL, os.X_OK):
        t.ok(False, "the unsteal binary is built", UNSTEAL)
        return
    daemon.stop()
    daemon.start(vcpu_cgroup="per-host", quiet=True)
    dflt = guest.create("ul-default", vcpus=2, workload="busy")
    tuned = guest.create("ul-tuned", vcpus=1, workload="idle", cputune={"shares": "2048"})
    hot = guest.create("ul-hot", vcpus=1, workload="idle", max_vcpus=4)
    ph = daemon.virsh(["setvcpu", hot, "3", "--enable", "--live"], check=False, capture=True)
    t.ok(ph.returncode == 0, "vCPU id 3 is hot-plugged into the 4-vCPU guest", ph.stderr)
    names = [dflt, tuned, hot]
    time.sleep(1)

    p, reps = report("--interval", "3", "--count", "1")
    t.ok(p.returncode == 0 and len(reps) == 1, "unsteal report --connect exits 0 with one line",
         p.stderr)
    if not reps:
        return
    rep = reps[0]
    t.eq(rep["libvirt"], "connected", "the report says libvirt is connected")
    doms = {d["name"]: d for d in rep["domains"]}
    lab_names = set(daemon.lab_domains())
    t.ok(set(names) <= set(doms), "the lab guests are found by their libvirt names", sorted(doms))
    t.ok(set(doms) <= lab_names, "only the connected daemon's domains are reported",
         f"reported {sorted(doms)}, daemon {sorted(lab_names)}")
    if not set(names) <= set(doms):
        return

    for n in names:
        want = status_vcpu_tids(n)
        got = {v["id"]: v["tid"] for v in doms[n]["vcpu"]}
        t.eq(got, want, f"{n}: vCPU id -> thread id equals libvirt's status XML")
        lv = doms[n]["libvirt"] or {}
        t.eq(doms[n]["pid"], guest.qemu_pid(n), f"{n}: the QEMU pid is libvirt's")
        t.ok(len(lv.get("uuid", "")) == 36, f"{n}: the domain's UUID is reported", lv)
    orders = live_orders(hot)
    hv = {v["id"]: v for v in doms[hot]["vcpu"]}
    t.eq(sorted(hv), [0, 3], "the hot-plugged guest reports vCPU ids 0 and 3")
    t.eq(hv.get(3, {}).get("order"), orders.get(3),
         "vCPU 3 carries the hotplug order of the live XML")
    t.ok(orders.get(3) is not None and orders.get(3) != 3,
         "the hotplug order differs from the vCPU id (the mapping uses the id)", orders)

    lvd, lvt = doms[dflt]["libvirt"] or {}, doms[tuned]["libvirt"] or {}
    t.eq((lvd.get("tunables"), lvd.get("cputune"), lvd.get("expected_placement")),
         ("default", "", "shared"), "default tunables: expected placement shared")
    t.eq((lvt.get("tunables"), lvt.get("cputune"), lvt.get("expected_placement")),
         ("custom", "shares=2048", "own"), "shares=2048: custom, expected placement own")
    for n in names:
        lv = doms[n]["libvirt"] or {}
        t.eq(doms[n]["placement"], lv.get("expected_placement"),
             f"{n}: actual placement equals the expected one")
        t.eq(lv.get("vcpu_cgroup"),
             "per-host" if lv.get("expected_placement") in ("shared", "nested")
             else "per-domain", f"{n}: libvirt's cpu.vcpu_cgroup agrees")
    for v in doms[dflt]["vcpu"]:
        ls = v["libvirt_steal_pct"]
        t.bound(None if ls is None else abs(ls - v["steal_pct"]), 10,
                f"{dflt} vCPU {v['id']}: vcpu.{v['id']}.delay steal within 10 points of schedstat",
                unit="points", figure=f"unsteal {v['steal_pct']}, libvirt {ls}")

    # The daemon goes away and comes back while unsteal runs.
    s = Stream(1)
    try:
        first = s.wait_for(lambda r: r["libvirt"] == "connected", 15)
        t.ok(first is not None, "streaming: connected at first")
        daemon.terminate(daemon.pid(), daemon.lab().daemon)
        lost = s.wait_for(lambda r: r["libvirt"] == "disconnected", 15)
        t.ok(lost is not None, "virtqemud stopped: unsteal reports libvirt disconnected")
        if lost:
            t.ok(any(x.startswith(f"libvirt: connection lost to {daemon.lab().uri}")
                     for x in lost["skipped"]), "the skip says 'libvirt: connection lost'",
                 lost["skipped"])
            names_lost = {d["name"] for d in lost["domains"]}
            t.ok(set(names) <= names_lost,
                 "meanwhile the guests are measured from /proc (by their -name)",
                 sorted(names_lost))
        more = s.wait_for(lambda r: r["libvirt"] == "disconnected", 5)
        t.ok(more is not None and s.p.poll() is None,
             "unsteal keeps running without the daemon")
        daemon.start(vcpu_cgroup="per-host", quiet=True)
        back = s.wait_for(lambda r: r["libvirt"] == "connected", 10)
        t.ok(back is not None, "after the daemon's restart unsteal is connected again")
        if back:
            t.ok(set(names) <= {d["name"] for d in back["domains"]},
                 "the guests are libvirt's again", [d["name"] for d in back["domains"]])
    finally:
        rc = s.stop()
    t.eq(rc, 0, "unsteal exits 0 on SIGTERM")


labtest.run(main)
