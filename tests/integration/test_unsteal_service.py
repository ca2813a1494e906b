# SPDX-License-Identifier: GPL-2.0-or-later
"""unsteal's Debian package as an operator gets it: the unsteal-exporter
service under systemd.

Runs in the test host (docs/testhost.md), whose image has the .deb of
'tools/lab package unsteal' installed with dpkg; elsewhere it skips.  It
checks that the service, enabled by the package, came up at boot with the
package's default arguments (/etc/default/unsteal-exporter), as a transient
user of its own without capabilities (DynamicUser), and that this user can
read what unsteal needs: a spinning lab guest started afterwards shows up
on http://127.0.0.1:9984/metrics with growing run counters for both its
vCPUs.  It prints systemd-analyze security's exposure score and requires
it below 5 (systemd calls 2.0-4.9 "OK"); a restart with a bad --listen
fails and says why in the journal, and the service comes back with the
default.
"""

import os
import re
import subprocess
import time
import urllib.request

import labtest
from labtest import daemon, guest

UNIT = "unsteal-exporter.service"
URL = "http://127.0.0.1:9984/metrics"
DROPIN = "/run/systemd/system/unsteal-exporter.service.d/bad-listen.conf"


def systemctl(*args):
    return subprocess.run(["systemctl", "--no-pager"] + list(args), capture_output=True,
                          text=True, timeout=60)


def prop(name):
    return systemctl("show", "-P", name, UNIT).stdout.strip()


def scrape():
    try:
        with urllib.request.urlopen(URL, timeout=5) as r:
            return r.read().decode()
    except OSError:
        return ""


def run_counters(text, name):
    pat = re.compile(r'^unsteal_vcpu_run_seconds_total\{domain="' + re.escape(name)
                     + r'",vcpu="(\d+)"[^}]*\} (\S+)$', re.M)
    return {int(m.group(1)): float(m.group(2)) for m in pat.finditer(text)}


def main(t):
    t.eq(prop("UnitFileState"), "enabled", "the package enabled the service")
    t.ok(labtest.wait_for(lambda: prop("ActiveState") == "active", timeout=30),
         "the service is active after boot", systemctl("status", UNIT).stdout)
    pid = int(prop("MainPID") or 0)
    status = open(f"/proc/{pid}/status").read() if pid else ""
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
    capeff = re.search(r"^CapEff:\s+(\w+)", status, re.M)
    t.ok(uid and int(uid.group(1)) != 0, "it runs as a user of its own, not root",
         uid.group(0) if uid else status[:200])
    t.ok(capeff and int(capeff.group(1), 16) == 0, "with no capabilities",
         capeff.group(0) if capeff else "")
    cmd = open(f"/proc/{pid}/cmdline").read().split("\0") if pid else []
    t.ok("--listen" in cmd and "127.0.0.1:9984" in cmd,
         "with the default arguments of /etc/default/unsteal-exporter", cmd)

    p = subprocess.run(["systemd-analyze", "security", "--no-pager", UNIT],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([\d.]+) (\S+)", p.stdout)
    print(f"# systemd-analyze security: {m.group(1)} {m.group(2)}" if m else
          f"# systemd-analyze security: {p.stdout[-300:]}", flush=True)
    t.ok(m and float(m.group(1)) < 5.0, "systemd-analyze security: exposure below 5",
         p.stdout[-1500:])

    daemon.stop()
    daemon.start(quiet=True)
    name = guest.create("svc-spin", vcpus=2, workload="spin")
    t.ok(labtest.wait_for(lambda: len(run_counters(scrape(), name)) == 2, timeout=20),
         "the guest's two vCPUs appear on /metrics", scrape()[-1500:])
    first = run_counters(scrape(), name)
    time.sleep(3)
    later = run_counters(scrape(), name)
    t.ok(first and all(later.get(i, 0) > v for i, v in first.items()),
         "their run counters grow: the service's user reads the guest's threads",
         f"{first} -> {later}")

    # A bad address: the start fails, and the journal says why.
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as fh:
        fh.write('[Service]\nEnvironment=UNSTEAL_EXPORTER_ARGS="--listen nonsense"\n'
                 'EnvironmentFile=\n')
    try:
        systemctl("daemon-reload")
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        r = systemctl("restart", UNIT)
        t.ok(labtest.wait_for(lambda: prop("ActiveState") in ("failed", "activating"),
                              timeout=10),
             "with --listen nonsense the service does not stay up",
             r.stderr + prop("ActiveState"))
        log = subprocess.run(["journalctl", "--no-pager", "-u", UNIT, "--since", since],
                             capture_output=True, text=True, timeout=60).stdout
        t.ok("expected ADDR:PORT" in log, "the journal says what --listen expects", log[-1500:])
    finally:
        os.unlink(DROPIN)
        systemctl("daemon-reload")
        systemctl("reset-failed", UNIT)
        systemctl("restart", UNIT)
    t.ok(labtest.wait_for(lambda: bool(run_counters(scrape(), name)), timeout=20),
         "back with the default, it serves the guest again")


if not labtest.CONFIG.testhost or not os.path.exists("/run/systemd/system") \
        or not os.path.exists(f"/usr/lib/systemd/system/{UNIT}"):
    labtest.skip_all("needs the test host with systemd and the unsteal package "
                     "(tools/lab testhost --variant v2-systemd)")
labtest.run(main)
