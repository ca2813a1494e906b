# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench exporter: what `unsteal exporter` costs with many vCPU threads.

Synthetic domains (tools/bench/fake-domain.c) stand in for QEMU: one
process per domain whose comm is "qemu-system-x86", with "-name guest=NAME"
on its command line and threads named "CPU N/KVM", which is all unsteal
looks for in /proc.  Per size DxT (D domains of T vCPU threads each):

  1. start the D domains; their vCPU threads together ask for LOAD_CPUS of
     CPU time (each wakes every 100 ms and runs LOAD_CPUS / (D x T) of it);
  2. start `unsteal exporter --listen 127.0.0.1:0 --interval 2` and wait
     for its first 200 (it answers 503 until its first interval is over);
  3. scrape /metrics once per second for the size's seconds with urllib,
     recording per scrape the HTTP status, the latency (request to the last
     byte), the bytes, the vCPU series of the benchmark's domains (lines
     of unsteal_vcpu_run_seconds_total), and the exporter's VmRSS;
  4. stop the exporter (SIGTERM) and the domains (stdin closed), by PID,
     whatever happened.

Over the scraping window the exporter's CPU time (utime + stime of
/proc/PID/stat, all its threads) gives its mean CPU % (in clock ticks:
0.02 % resolution over 60 s; the run time of its threads' schedstat is
recorded beside it, to the ns, for short runs); VmHWM (from
/proc/PID/status, read before it is stopped) its peak RSS.  Checks per
repetition: every scrape answered 200 with all D x T vCPU series of the
benchmark's domains, and no counter (the *_total series of those domains,
and the host's) went down between consecutive scrapes.  The exporter
samples the whole host: QEMU processes of others (lab guests) add their
series and their cost; their series are counted apart ("vcpu_series_all").

Needs no root: unsteal reads the /proc files of our own processes.  The
binary is UNSTEAL_BIN when set (tests/meson.build sets it), else our build
in _build/unsteal-build, brought up to date first.
"""

import os
import re
import shlex
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from .. import config
from ..common import LabError, build_dir, step
from ..lab import measure
from .benchkit import build_program, close_and_wait, median, publish
from .benchsched import machine_info

# DxT or DxT:SECONDS; without SECONDS a size runs --seconds (default 60).
# The second size shows how the exporter grows with ten times the threads.
SIZES = ("20x10", "100x20:20")
SECONDS = 60
INTERVAL = 2          # the exporter's --interval
SCRAPE_EVERY = 1.0    # seconds between scrapes
LOAD_CPUS = 0.4       # CPU time all vCPU threads of a size ask for together
MAX_THREADS = 1024    # per domain: fake-domain's limit
HTTP_TIMEOUT = 10
VCPU_SERIES = "unsteal_vcpu_run_seconds_total"
LISTENING = re.compile(r"serving /metrics on (\S+), sampling every")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_size(spec, seconds):
    """'DxT' or 'DxT:S' -> (domains, threads, seconds)."""
    m = re.fullmatch(r"(\d+)x(\d+)(?::(\d+))?", spec)
    if not m:
        raise LabError(f"bench exporter: size {spec!r}: expected DOMAINSxTHREADS[:SECONDS], "
                       "e.g. 20x10 or 100x20:20")
    d, t = int(m.group(1)), int(m.group(2))
    s = int(m.group(3)) if m.group(3) else seconds
    if d < 1 or not 1 <= t <= MAX_THREADS or s < 1:
        raise LabError(f"bench exporter: size {spec!r}: at least 1 domain, 1 to {MAX_THREADS} "
                       "threads per domain and 1 s")
    return d, t, s


def unsteal_binary():
    """The analyser to run: UNSTEAL_BIN, else our build (updated first)."""
    path = config.get().unsteal_bin
    if not path:
        from ..build import unsteal_build
        unsteal_build.build()
        path = os.path.join(unsteal_build.unsteal_builddir(), "src", "unsteal")
    if not os.access(path, os.X_OK):
        raise LabError(f"bench exporter: {path} is not an executable unsteal")
    return path


def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def tasks_run_seconds(pid):
    """Run time of a process's live threads (schedstat, ns): finer than
    utime + stime (clock ticks) for short windows."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def proc_status_kib(pid, *keys):
    """Fields of /proc/PID/status in KiB (VmRSS, VmHWM)."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return [out.get(k) for k in keys]


def parse_metrics(text):
    """{(name, ((label, value), ...)): value} of the sample lines."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name, _, labels = series.partition("{")
        try:
            out[(name, tuple(LABEL.findall(labels)))] = float(value)
        except ValueError:
            pass
    return out


class FakeDomains:
    """D fake-domain processes of T vCPU threads; stop() ends every one started."""

    def __init__(self, binary, domains, threads, duty):
        self.procs = []
        self.names = [f"bench-exporter-{os.getpid()}-{i}" for i in range(domains)]
        try:
            for name in self.names:
                self.procs.append(subprocess.Popen(
                    [binary, "-name", f"guest={name}", str(threads), f"{duty:.6g}"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            for name, p in zip(self.names, self.procs):
                if p.stdout.readline().strip() != "ready":
                    raise LabError(f"bench exporter: fake-domain {name} did not start its "
                                   f"{threads} threads (exit status {p.poll()})")
        except BaseException:
            self.stop()
            raise

    @property
    def pids(self):
        return [p.pid for p in self.procs]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.stdin.close()
        for p in self.procs:
            close_and_wait(p)
            p.stdout.close()


class Exporter:
    """unsteal exporter on a free port of 127.0.0.1, its stderr collected."""

    def __init__(self, binary):
        self.stderr = []
        self.url = None
        self._bound = threading.Event()
        self.proc = subprocess.Popen(
            [binary, "exporter", "--listen", "127.0.0.1:0", "--interval", str(INTERVAL)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._bound.wait(15) or self.url is None:
            self.stop()
            raise LabError("bench exporter: unsteal exporter did not say where it listens: "
                           + " / ".join(self.stderr[-5:]))

    def _read(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))
            m = LISTENING.search(line)
            if m and self.url is None:
                self.url = f"http://{m.group(1)}/metrics"
                self._bound.set()
        self._bound.set()

    def scrape(self):
        """(status, latency in s, body)."""
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=HTTP_TIMEOUT) as r:
                body = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            body, status = e.read(), e.code
        except (urllib.error.URLError, OSError) as e:
            return None, time.monotonic() - t0, str(e).encode()
        return status, time.monotonic() - t0, body

    def wait_first_sample(self, timeout):
        """Seconds until /metrics first answers 200."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise LabError(f"bench exporter: unsteal exporter exited "
                               f"({self.proc.returncode}): " + " / ".join(self.stderr[-5:]))
            if self.scrape()[0] == 200:
                return time.monotonic() - t0
            time.sleep(0.1)
        raise LabError(f"bench exporter: /metrics did not answer 200 within {timeout} s")

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def check_counters(prev, cur, domains):
    """Counters of the benchmark's domains and of the host that went down
    from prev to cur (parsed expositions): a list of descriptions."""
    down = []
    for key, v in cur.items():
        name, labels = key
        if not name.endswith("_total"):
            continue
        dom = dict(labels).get("domain")
        if (dom in domains or not labels) and key in prev and v < prev[key]:
            down.append(f"{name}{dict(labels)}: {prev[key]} -> {v}")
    return down


def run_once(fake, unsteal, domains, threads, seconds, duty):
    """One repetition of one size: the scrapes and the exporter's cost."""
    names = set()
    dom = exp = None
    try:
        dom = FakeDomains(fake, domains, threads, duty)
        names = set(dom.names)
        exp = Exporter(unsteal)
        pid = exp.proc.pid
        first = exp.wait_first_sample(INTERVAL * 3 + 10)
        scrapes, decreases, prev = [], [], None
        cpu0, run0, w0 = proc_cpu_seconds(pid), tasks_run_seconds(pid), time.monotonic()
        for k in range(seconds):
            delay = w0 + k * SCRAPE_EVERY - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            at = time.monotonic() - w0
            status, latency, body = exp.scrape()
            text = body.decode(errors="replace")
            cur = parse_metrics(text) if status == 200 else {}
            ours = {(dict(lb)["domain"], dict(lb).get("vcpu")) for (n, lb) in cur
                    if n == VCPU_SERIES and dict(lb).get("domain") in names}
            every = sum(1 for (n, lb) in cur if n == VCPU_SERIES)
            if prev is not None and cur:
                decreases += check_counters(prev, cur, names)
            prev = cur or prev
            rss, = proc_status_kib(pid, "VmRSS")
            scrapes.append({"t": round(at, 3), "status": status,
                            "latency_ms": round(latency * 1000, 3), "bytes": len(body),
                            "vcpu_series": len(ours), "vcpu_series_all": every,
                            "rss_kib": rss, "cpu_s": round(proc_cpu_seconds(pid) - cpu0, 2)})
        delay = w0 + seconds * SCRAPE_EVERY - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        cpu, wall = proc_cpu_seconds(pid) - cpu0, time.monotonic() - w0
        ran = tasks_run_seconds(pid) - run0
        rss, hwm = proc_status_kib(pid, "VmRSS", "VmHWM")
        tasks = len(os.listdir(f"/proc/{pid}/task"))
    finally:
        status = exp.stop() if exp else None
        if dom:
            dom.stop()
    want = domains * threads
    return {"first_200_s": round(first, 3), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "cpu_pct": 100 * cpu / wall, "cpu_pct_schedstat": 100 * ran / wall,
            "rss_end_kib": rss, "hwm_kib": hwm,
            "exporter_threads": tasks, "exit_status": status,
            "exporter_pid": exp.proc.pid, "domain_pids": dom.pids, "scrapes": scrapes,
            "checks": {"all_200": all(s["status"] == 200 for s in scrapes),
                       "all_series": all(s["vcpu_series"] == want for s in scrapes),
                       "monotonic": not decreases,
                       "exit_0": status == 0},
            "decreases": decreases[:20], "stderr": exp.stderr[-10:]}


def summarise(reps):
    """Medians and ranges of one size's repetitions, over their scrapes."""
    sc = [s for r in reps for s in r["scrapes"]]
    lat = [s["latency_ms"] for s in sc]
    size = [s["bytes"] for s in sc]
    rss = [s["rss_kib"] for s in sc if s["rss_kib"] is not None]
    cpu = [r["cpu_pct"] for r in reps]
    # CPU % per second between consecutive scrapes: the sampling every
    # INTERVAL s shows as every other second busier
    per_s = [100 * (b["cpu_s"] - a["cpu_s"]) / (b["t"] - a["t"])
             for r in reps for a, b in zip(r["scrapes"], r["scrapes"][1:]) if b["t"] > a["t"]]
    return {"scrapes": len(sc), "ok": sum(s["status"] == 200 for s in sc),
            "latency_ms": {"p50": measure.percentile(lat, 50),
                           "p95": measure.percentile(lat, 95),
                           "min": min(lat, default=None), "max": max(lat, default=None)},
            "bytes": {"median": median(size), "min": min(size, default=None),
                      "max": max(size, default=None)},
            "vcpu_series": {"min": min((s["vcpu_series"] for s in sc), default=None),
                            "max": max((s["vcpu_series"] for s in sc), default=None)},
            "vcpu_series_all_max": max((s["vcpu_series_all"] for s in sc), default=None),
            "cpu_pct": {"median": median(cpu), "min": min(cpu), "max": max(cpu)},
            "cpu_pct_per_s": {"median": median(per_s), "max": max(per_s, default=None)},
            "rss_kib": {"first": median(r["scrapes"][0]["rss_kib"] for r in reps
                                        if r["scrapes"]),
                        "median": median(rss), "max": max(rss, default=None)},
            "hwm_kib": max(r["hwm_kib"] for r in reps),
            "first_200_s": median(r["first_200_s"] for r in reps),
            "checks": {k: all(r["checks"][k] for r in reps) for k in reps[0]["checks"]}}


def _mib(kib):
    return "n/a" if kib is None else f"{kib / 1024:.1f}"


def markdown(results):
    lines = ["| domains x vCPU threads | scrapes (200) | /metrics bytes | latency ms p50 / p95 "
             "/ max | exporter CPU % (range) | CPU % per 1 s, max | RSS MiB first / max "
             "| VmHWM MiB | checks |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in results["sizes"]:
        m = s["summary"]
        lat, cpu = m["latency_ms"], m["cpu_pct"]
        ok = [k for k, v in m["checks"].items() if not v]
        lines.append(
            f"| {s['domains']} x {s['threads']} = {s['domains'] * s['threads']} "
            f"| {m['scrapes']} ({m['ok']}) | {m['bytes']['median']:.0f} "
            f"| {lat['p50']:.2f} / {lat['p95']:.2f} / {lat['max']:.2f} "
            f"| {cpu['median']:.2f} ({cpu['min']:.2f}-{cpu['max']:.2f}) "
            f"| {m['cpu_pct_per_s']['max']:.0f} "
            f"| {_mib(m['rss_kib']['first'])} / {_mib(m['rss_kib']['max'])} "
            f"| {_mib(m['hwm_kib'])} | {'pass' if not ok else 'FAIL: ' + ', '.join(ok)} |")
    mc = results["machine"]
    lines += ["",
              f"`unsteal exporter --interval {results['interval']}` scraped every "
              f"{results['scrape_every']:g} s for "
              + ", ".join(f"{s['seconds']} s ({s['domains']} x {s['threads']})"
                          for s in results["sizes"])
              + f", {results['reps']} repetition(s) per size; the vCPU threads together ask "
              f"for {results['load_cpus']} CPU.  Latency and RSS over all scrapes; exporter "
              "CPU %: the mean over each repetition's window (median and range of the "
              "repetitions; 100 % = one CPU); 'checks': every scrape 200 with every vCPU "
              "series, no counter going down, exit status 0 on SIGTERM.",
              "",
              f"Machine: {mc['cpus']} CPUs ({mc['cpu_model']}), kernel {mc['kernel']}, "
              f"load {' '.join(mc['load_before'])} before and "
              f"{' '.join(mc.get('load_after', ['?']))} after.  Other QEMU processes on the "
              f"host: up to {results['other_vcpu_series']} vCPU series.",
              "",
              f"Reproduce: `{results['command']}`"]
    return "\n".join(lines)


def run_bench(sizes=None, reps=1, seconds=SECONDS, outdir=None, command=None):
    """Every size, reps times; the results, published into outdir.  Raises
    LabError after publishing when a check failed."""
    if reps < 1 or seconds < 1:
        raise LabError("--reps and --seconds must be at least 1")
    parsed = [parse_size(s, seconds) for s in (sizes or SIZES)]
    outdir = outdir or os.path.join(build_dir(), "bench", "exporter")
    command = command or "tools/lab bench exporter"
    if config.get().unsteal_bin:
        command = f"UNSTEAL_BIN={shlex.quote(config.get().unsteal_bin)} {command}"
    unsteal = unsteal_binary()
    fake = build_program("fake-domain")
    total = sum(s for _, _, s in parsed) * reps
    step(f"bench: exporter: {len(parsed)} size(s) x {reps} repetition(s), about "
         f"{total // 60} min {total % 60} s of scraping; unsteal: {unsteal}")
    results = {"command": command, "machine": machine_info(), "unsteal": unsteal,
               "interval": INTERVAL, "scrape_every": SCRAPE_EVERY, "load_cpus": LOAD_CPUS,
               "reps": reps, "sizes": []}
    for d, t, s in parsed:
        duty = 100 * LOAD_CPUS / (d * t)
        runs = []
        for r in range(reps):
            runs.append(run_once(fake, unsteal, d, t, s, duty))
            m = runs[-1]
            lat = [x["latency_ms"] for x in m["scrapes"]]
            step(f"bench: exporter: {d} x {t} vCPU threads, repetition {r + 1}/{reps}: "
                 f"CPU {m['cpu_pct']:.2f} % ({m['cpu_pct_schedstat']:.3f} % by schedstat), "
                 f"latency p50 {measure.percentile(lat, 50):.2f} ms, "
                 f"VmHWM {_mib(m['hwm_kib'])} MiB, checks "
                 + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in m["checks"].items()))
        results["sizes"].append({"domains": d, "threads": t, "seconds": s,
                                 "duty_pct": duty, "reps": runs, "summary": summarise(runs)})
    results["other_vcpu_series"] = max(
        (x["summary"]["vcpu_series_all_max"] or 0) - x["domains"] * x["threads"]
        for x in results["sizes"])
    publish("exporter", results, outdir, markdown)
    failed = [f"{x['domains']}x{x['threads']}: {k}" for x in results["sizes"]
              for k, v in x["summary"]["checks"].items() if not v]
    if failed:
        raise LabError("bench exporter: checks failed: " + "; ".join(failed)
                       + f" (details in {outdir}/exporter.json)")
    return results
