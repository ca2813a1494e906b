# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench exporter, shortened: that the benchmark measures what it says.

Two fake domains of five vCPU threads (tools/bench/fake-domain.c), scraped
for SECONDS s.  Checks the JSON the benchmark wrote: one scrape per second,
every one 200 with the 10 vCPU series of the fake domains, no counter going
down between scrapes, the exporter's CPU time, RSS and VmHWM present and
plausible, exit status 0 on SIGTERM, and that the exporter and the fake
domains it started are gone afterwards.  The figures themselves are
printed, not compared: they are the benchmark's to report.

Needs neither root nor the lab daemon; needs UNSTEAL_BIN (tests/meson.build
sets it) built with the exporter, and gcc for fake-domain.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import labtest
from labtest import LabError, daemon
from lablib.bench import benchexporter

UNSTEAL = labtest.CONFIG.unsteal_bin
DOMAINS, THREADS, SECONDS = 2, 5, 5


def main(t):
    if not UNSTEAL or not os.access(UNSTEAL, os.X_OK):
        labtest.skip_all("UNSTEAL_BIN is not set or not built (run through meson test)")
    p = subprocess.run([UNSTEAL, "exporter"], capture_output=True, text=True)
    if "no HTTP server" in p.stderr:
        labtest.skip_all("this unsteal is built without the exporter (-Dexporter=disabled)")
    if not shutil.which("gcc") and not os.path.exists(
            os.path.join(labtest.common.build_dir(), "bench", "fake-domain")):
        labtest.skip_all("no gcc to build tools/bench/fake-domain.c")

    with tempfile.TemporaryDirectory(prefix="bench-exporter-") as out:
        # stdout is TAP: the benchmark's table goes to stderr
        try:
            with contextlib.redirect_stdout(sys.stderr):
                benchexporter.run_bench(sizes=[f"{DOMAINS}x{THREADS}:{SECONDS}"], reps=1,
                                        outdir=out, command="test_bench_exporter.py")
            t.ok(True, "the benchmark ran and its checks passed")
        except LabError as e:
            t.ok(False, "the benchmark ran and its checks passed", e)
        path = os.path.join(out, "exporter.json")
        if not t.ok(os.path.exists(path), "it wrote exporter.json"):
            return
        with open(path) as fh:
            res = json.load(fh)
        t.ok(os.path.exists(os.path.join(out, "exporter.md")), "it wrote exporter.md")

    t.eq(len(res["sizes"]), 1, "one size")
    size = res["sizes"][0]
    t.eq((size["domains"], size["threads"], size["seconds"]), (DOMAINS, THREADS, SECONDS),
         "the size asked for")
    run = size["reps"][0]
    sc = run["scrapes"]
    t.eq(len(sc), SECONDS, "one scrape per second")
    t.eq([s["status"] for s in sc], [200] * SECONDS, "every scrape answered 200")
    t.eq([s["vcpu_series"] for s in sc], [DOMAINS * THREADS] * SECONDS,
         f"every scrape had the {DOMAINS * THREADS} vCPU series of the fake domains")
    t.eq(run["decreases"], [], "no counter went down between scrapes")
    t.eq(run["exit_status"], 0, "the exporter exited with status 0 on SIGTERM")
    t.ok(all(s["bytes"] > 0 and s["latency_ms"] > 0 for s in sc),
         "every scrape has its size and latency")
    t.ok(all(isinstance(s["rss_kib"], int) and s["rss_kib"] > 0 for s in sc),
         "every scrape has the exporter's VmRSS")
    t.ok(isinstance(run["hwm_kib"], int) and run["hwm_kib"] >= max(s["rss_kib"] for s in sc),
         f"VmHWM ({run['hwm_kib']} KiB) is at least every VmRSS sampled")
    t.ok(0 <= run["cpu_pct"] < 100 * (os.cpu_count() or 1),
         f"the exporter's mean CPU % is a number within the host's CPUs ({run['cpu_pct']:.2f})")
    t.margin(run["cpu_pct"], 100 * (os.cpu_count() or 1),
             "the exporter's mean CPU % is a number within the host's CPUs", strict=True,
             unit="%")
    t.bound(abs(run["wall_s"] - SECONDS), 2, f"the window lasted {run['wall_s']} s", strict=True,
            unit="s", figure=f"{run['wall_s']} s from {SECONDS} s")
    m = size["summary"]
    t.ok(all(v is not None for v in (m["latency_ms"]["p50"], m["latency_ms"]["p95"],
                                     m["latency_ms"]["max"], m["cpu_pct"]["median"],
                                     m["rss_kib"]["max"], m["hwm_kib"])),
         "the summary has latency, CPU and memory figures")
    t.ok(all(m["checks"].values()), "the summary's checks passed", m["checks"])
    t.ok(all(daemon.gone(pid) for pid in [run["exporter_pid"]] + run["domain_pids"]),
         "the exporter and the fake domains are gone")
    print(f"# {DOMAINS} x {THREADS} vCPU threads, {SECONDS} s: exporter CPU "
          f"{run['cpu_pct']:.2f} %, latency p50 {m['latency_ms']['p50']:.2f} ms, "
          f"/metrics {m['bytes']['median']:.0f} bytes, VmHWM {run['hwm_kib']} KiB", flush=True)


labtest.run(main, lab=False)
