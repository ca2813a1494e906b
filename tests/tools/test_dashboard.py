# SPDX-License-Identifier: GPL-2.0-or-later
"""docs/grafana/unsteal.json and docs/prometheus/unsteal-rules.yml against unsteal.

The dashboard: valid JSON, unique panel ids, the Prometheus data source
taken from the template variable DS_PROMETHEUS in every panel and
target, an expression in every target, variables that exist, and rate
windows of $__rate_interval.  The rules file: the alert of docs/unsteal.md
("PromQL"), unchanged, and 'promtool check rules' on it and on the
dashboard's expressions (turned into recording rules, Grafana's variables
replaced) when promtool is installed (Debian: prometheus), else SKIP.

Every metric name (unsteal_...) in an expression of either file must be in
a real exposition: the unsteal binary (UNSTEAL_BIN, set by
tests/meson.build) runs 'report --prometheus' on two fixture trees written
here (cgroup v2, two domains of 2 and 1 vCPUs, a shared vCPU group that
was throttled and a group with a quota), and what goes into rate() must be
a counter there.  The metric check first runs on a misspelt name and must
find it.  Recording rule names (with ':') in the dashboard must be
recorded by the rules file.

Usage: UNSTEAL_BIN=BUILD/src/unsteal test_dashboard.py
"""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

# The real cache, where tools/lab setup puts promtool, before tap.setup()
# points UNSTEAL_CACHE at a scratch directory.
sys.path.insert(0, os.path.join(tap.ROOT, "tools"))
from lablib import config  # noqa: E402
CACHE = config.from_environ(os.environ).cache
WORK = tap.setup("unsteal-dashboard-test-")
from lablib.stack import sources  # noqa: E402

ok = tap.ok
DASHBOARD = os.path.join(tap.ROOT, "docs", "grafana", "unsteal.json")
RULES = os.path.join(tap.ROOT, "docs", "prometheus", "unsteal-rules.yml")
DOC = os.path.join(tap.ROOT, "docs", "unsteal.md")
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
UUID = "0f5c7a4e-2b61-4d8e-9a3c-5e1d2f6b7a80"

# ---------------------------------------------------------------- fixture

CG_LINE = "0::{}\n"


def write(root, rel, content):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)


def task(root, pid, tid, comm, run_ns, wait_ns, cpus, cgroup):
    base = f"proc/{pid}/task/{tid}"
    write(root, f"{base}/comm", comm + "\n")
    write(root, f"{base}/schedstat", f"{run_ns} {wait_ns} 1\n")
    write(root, f"{base}/status", f"Name:\t{comm}\nTgid:\t{pid}\nPid:\t{tid}\n"
          f"Cpus_allowed_list:\t{cpus}\n")
    write(root, f"{base}/cgroup", CG_LINE.format(cgroup))


def cgroup(root, path, periods, throttled, throttled_us, quota):
    d = "sys/fs/cgroup" + path
    write(root, f"{d}/cpu.stat", f"usage_usec 100\nnr_periods {periods}\n"
          f"nr_throttled {throttled}\nthrottled_usec {throttled_us}\n")
    write(root, f"{d}/cpu.max", f"{quota} 100000\n")
    write(root, f"{d}/cpu.pressure", f"some avg10=0.00 avg60=0.00 avg300=0.00 "
          f"total={throttled_us}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def fixture(root, s):
    """Sample s (0 or 1) of a 2-CPU host, 2 s apart."""
    write(root, "proc/uptime", f"{100 + 2 * s}.00 100.00\n")
    write(root, "proc/stat", [
        "cpu  2000 0 0 2000 0 0 0 0 0 0\ncpu0 1000 0 0 1000 0 0 0 0 0 0\n"
        "cpu1 1000 0 0 1000 0 0 0 0 0 0\n",
        "cpu  2250 0 0 2130 20 0 0 0 0 0\ncpu0 1150 0 0 1050 0 0 0 0 0 0\n"
        "cpu1 1100 0 0 1080 20 0 0 0 0 0\n"][s])
    write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
    # alpha: 2 vCPUs in a shared group, throttled; its UUID from -uuid
    write(root, "proc/100/comm", "qemu-system-x86\n")
    write(root, "proc/100/cmdline", "\0".join([
        "/usr/bin/qemu-system-x86_64", "-name", "guest=alpha,debug-threads=on",
        "-uuid", UUID, ""]))
    task(root, 100, 100, "qemu-system-x86", 1000, 0, "0-1",
         "/machine/alpha.libvirt-qemu/emulator")
    task(root, 100, 101, "CPU 0/KVM", [10**9, 25 * 10**8][s], [5 * 10**8, 9 * 10**8][s],
         "0-1", "/machine/vcpus.partition")
    task(root, 100, 102, "CPU 1/KVM", [10**9, 26 * 10**8][s], [10**8, 3 * 10**8][s],
         "0-1", "/machine/vcpus.partition")
    # beta: 1 vCPU in its own group with a quota of half a CPU
    write(root, "proc/200/comm", "qemu-kvm\n")
    write(root, "proc/200/cmdline", "/usr/libexec/qemu-kvm\0-name\0beta\0")
    task(root, 200, 200, "qemu-kvm", 1000, 0, "0-1", "/machine/beta.libvirt-qemu/emulator")
    task(root, 200, 201, "CPU 0/TCG", [5 * 10**9, 52 * 10**8][s], [10**9, 16 * 10**8][s],
         "1", "/machine/beta.libvirt-qemu/vcpu0")
    cgroup(root, "/machine/vcpus.partition", [100, 120][s], [10, 15][s],
           [10**6, 15 * 10**5][s], "max")
    cgroup(root, "/machine/beta.libvirt-qemu/vcpu0", [50, 70][s], [2, 4][s],
           [10**5, 3 * 10**5][s], "50000")
    for dom in ("alpha", "beta"):
        cgroup(root, f"/machine/{dom}.libvirt-qemu/emulator", 0, 0, 0, "max")


def exposition():
    """{metric: type} of the samples unsteal exposes for the fixture, or None."""
    unsteal = config.get().unsteal_bin
    if not unsteal:
        ok(False, "UNSTEAL_BIN names the unsteal binary", "set by tests/meson.build")
        return None
    trees = [os.path.join(WORK, f"s{s}") for s in (0, 1)]
    for s, root in enumerate(trees):
        fixture(root, s)
    p = subprocess.run([unsteal, "report", "--prometheus", "--root", trees[0],
                        "--root", trees[1]], capture_output=True, text=True, timeout=60)
    ok(p.returncode == 0 and p.stderr == "",
       "unsteal report --prometheus on the fixture trees: exit 0, nothing skipped",
       f"exit {p.returncode}\n{p.stderr}")
    types, samples = {}, {}
    for line in p.stdout.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            types[m.group(1)] = m.group(2)
        elif line and not line.startswith("#"):
            name = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0)
            samples[name] = types.get(name, "untyped")
    for name in ("unsteal_vcpu_idle_wait_seconds_total", "unsteal_cgroup_throttled_seconds_total",
                 "unsteal_cgroup_quota_cpus", "unsteal_domain_info"):
        ok(name in samples, f"the fixture's exposition has {name}", p.stdout)
    return samples


# ---------------------------------------------------------------- PromQL names

STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
IDENT = re.compile(r"(?<![A-Za-z0-9_:$.])[A-Za-z_:][A-Za-z0-9_:]*")
RATE_ARG = re.compile(r"\b(?:rate|irate|increase)\(\s*([A-Za-z_:][A-Za-z0-9_:]*)")


def names(expr):
    """(metric names unsteal_..., recording rule names with ':') in expr."""
    idents = IDENT.findall(STRING.sub('""', expr))
    metrics = {i for i in idents if i.startswith("unsteal_") and ":" not in i}
    recorded = {i for i in idents if ":" in i}
    return metrics, recorded


def check_names(what, exprs, exposed, recorded_by_rules):
    """Metrics in exprs that unsteal does not expose, rate() of non-counters,
    recording rules the rules file does not define."""
    problems = []
    for expr in exprs:
        metrics, recorded = names(expr)
        for m in sorted(metrics - set(exposed)):
            problems.append(f"{what}: {m} is not in unsteal's exposition: {expr}")
        for r in sorted(recorded - set(recorded_by_rules)):
            problems.append(f"{what}: {r} is not recorded by the rules file: {expr}")
        for m in RATE_ARG.findall(expr):
            if m in exposed and exposed[m] != "counter":
                problems.append(f"{what}: rate() of {m}, a {exposed[m]}: {expr}")
    return problems


# ---------------------------------------------------------------- rules file

def indentation(line):
    return len(line) - len(line.lstrip())


def rules(text):
    """[(kind, name, expr)] of a rules file: alert/record and its expr
    (inline or a '|' / '>' block).  Enough YAML for this file."""
    out, lines, i = [], text.splitlines(), 0
    name = None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*(?:- )?(alert|record):\s*(\S+)", line)
        if m:
            name = (m.group(1), m.group(2))
        m = re.match(r"(\s*)(?:- )?expr:\s*(.*)$", line)
        if m:
            indent, rest = len(m.group(1)), m.group(2).strip()
            if rest[:1] in ("|", ">"):
                block = []
                while i + 1 < len(lines) and (not lines[i + 1].strip()
                                              or indentation(lines[i + 1]) > indent):
                    i += 1
                    block.append(lines[i].strip())
                rest = " ".join(b for b in block if b)
            elif rest[:1] in ('"', "'"):
                rest = rest[1:-1]
            out.append((name[0] if name else None, name[1] if name else None, rest))
        i += 1
    return out


def doc_alert():
    """The alert rule of docs/unsteal.md's "An alert rule on idle steal" block,
    from '- alert:' to its end."""
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    m = re.search(r"An alert rule on idle steal:\s*```yaml\n(.*?)```", doc, re.S)
    if not m:
        return doc, None
    block = m.group(1)
    start = block.find("      - alert:")
    return doc, block[start:] if start >= 0 else None


# promtool on PATH, or the one tools/lab setup takes out of Debian's prometheus
# package (lablib/stack/sources.py)
PROMTOOL = sources.promtool(CACHE)


def promtool(path):
    p = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, (p.stdout + p.stderr).strip()


# ---------------------------------------------------------------- dashboard

def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def grafana_to_promql(expr):
    """A dashboard expression as Prometheus sees it: variables replaced."""
    expr = expr.replace("$__rate_interval", "5m")
    return re.sub(r"\$\{\w+\}|\$\w+", ".*", expr)


# 0. The checks find what they should (else all below could pass vacuously).
bad = check_names("self-test", ["rate(unsteal_vcpu_idle_wait_second_total[5m])",
                                "rate(unsteal_host_cpus[5m])",
                                "instance:unsteal_nothing:sum_rate5m"],
                  {"unsteal_vcpu_idle_wait_seconds_total": "counter", "unsteal_host_cpus": "gauge"},
                  set())
ok(len(bad) == 3 and "unsteal_vcpu_idle_wait_second_total" in bad[0]
   and "a gauge" in bad[1] and "instance:unsteal_nothing:sum_rate5m" in bad[2],
   "the name check finds a misspelt metric, rate() of a gauge and an unknown recording rule",
   "\n".join(bad))
ok(names('label_values(unsteal_domain_vcpus{instance=~"unsteal_x"}, domain)')
   == ({"unsteal_domain_vcpus"}, set()),
   "names are taken outside strings, from label_values() too")

exposed = exposition()

# 1. The dashboard
try:
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    ok(True, "docs/grafana/unsteal.json is valid JSON")
except (OSError, ValueError) as e:
    ok(False, "docs/grafana/unsteal.json is valid JSON", e)
    sys.exit(tap.end())

ok(isinstance(dash.get("schemaVersion"), int) and dash["schemaVersion"] >= 36
   and dash.get("title") and dash.get("uid"),
   "a title, a uid and a schemaVersion of Grafana 9 or later",
   {k: dash.get(k) for k in ("title", "uid", "schemaVersion")})

variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
dsvar = variables.get("DS_PROMETHEUS", {})
ok(dsvar.get("type") == "datasource" and dsvar.get("query") == "prometheus",
   "template variable DS_PROMETHEUS picks a Prometheus data source", dsvar)
inst = variables.get("instance", {})
ok(inst.get("type") == "query"
   and re.sub(r"\s", "", str(inst.get("query"))) == "label_values(unsteal_host_cpus,instance)",
   "template variable instance: label_values(unsteal_host_cpus, instance)", inst)
queryvars = [v for v in variables.values() if v.get("type") == "query"]
ok(all(v.get("datasource") == DS for v in queryvars),
   "query variables use the DS_PROMETHEUS data source",
   [v.get("name") for v in queryvars if v.get("datasource") != DS])

panels = list(all_panels(dash.get("panels", [])))
ids = [p.get("id") for p in panels]
ok(panels and all(isinstance(i, int) for i in ids) and len(set(ids)) == len(ids),
   "panel ids are unique integers", ids)
graphs = [p for p in panels if p.get("type") != "row"]
ok(graphs and all(p.get("datasource") == DS for p in graphs),
   "every panel uses the data source ${DS_PROMETHEUS}",
   [(p.get("id"), p.get("datasource")) for p in graphs if p.get("datasource") != DS])
ok(all(not p.get("targets") for p in panels if p.get("type") == "row"), "rows have no queries")
gridbad = [p.get("id") for p in panels
           if not {"x", "y", "w", "h"} <= set(p.get("gridPos", {}))
           or p["gridPos"]["x"] + p["gridPos"]["w"] > 24]
ok(not gridbad, "every panel has a gridPos inside the 24 columns", gridbad)

targets = [(p, t) for p in graphs for t in p.get("targets", [])]
ok(all(p.get("targets") for p in graphs), "every panel has a query",
   [p.get("id") for p in graphs if not p.get("targets")])
ok(all(isinstance(t.get("expr"), str) and t["expr"].strip() for _, t in targets),
   "every target has an expr", [(p.get("id"), t.get("refId")) for p, t in targets
                                if not str(t.get("expr", "")).strip()])
ok(all(t.get("datasource", DS) == DS for _, t in targets),
   "targets use the panel's data source",
   [(p.get("id"), t.get("refId")) for p, t in targets if t.get("datasource", DS) != DS])
refbad = [p.get("id") for p in graphs
          if len({t.get("refId") for t in p.get("targets", [])}) != len(p.get("targets", []))
          or not all(t.get("refId") for t in p.get("targets", []))]
ok(not refbad, "refIds are set and unique in each panel", refbad)

exprs = [t["expr"] for _, t in targets if isinstance(t.get("expr"), str)]
varexprs = [str(v.get("query")) for v in queryvars]
used = set(re.findall(r"\$\{?(\w+)", " ".join(exprs + varexprs)))
ok(all(u in variables or u.startswith("__") for u in used),
   "expressions use only the dashboard's variables", sorted(used))
windows = [(w, e) for e in exprs for w in re.findall(r"\[([^\]]*)\]", e)]
ok(windows and all(w == "$__rate_interval" for w, _ in windows),
   "every range is [$__rate_interval]", [x for x in windows if x[0] != "$__rate_interval"])
for name in ("unsteal_vcpu_idle_wait_seconds_total", "unsteal_vcpu_busy_wait_seconds_total",
             "unsteal_host_idle_seconds_total", "unsteal_vcpu_run_seconds_total",
             "unsteal_domain_vcpus", "unsteal_cgroup_throttled_seconds_total",
             "unsteal_domain_info"):
    ok(any(name in names(e)[0] for e in exprs), f"the dashboard shows {name}")
ok(any(e.lstrip().startswith("topk(") for e in exprs), "the dashboard has a topk of domains")
ok(any(p.get("type") == "table" and any("unsteal_domain_info" in t.get("expr", "")
                                         for t in p.get("targets", [])) for p in graphs),
   "a placement table from unsteal_domain_info")

# 2. The rules file
with open(RULES, encoding="utf-8") as f:
    rules_text = f.read()
rule_list = rules(rules_text)
recorded = {n for k, n, _ in rule_list if k == "record"}
ok(any(k == "alert" and n == "UnstealDomainIdleSteal" for k, n, _ in rule_list)
   and all(e for _, _, e in rule_list),
   "the rules file has the alert UnstealDomainIdleSteal; every rule has an expr", rule_list)
doc, alert = doc_alert()
ok(alert is not None and alert in rules_text,
   "the alert of docs/unsteal.md is in the rules file, unchanged", alert)
ok("grafana/unsteal.json" in doc and "prometheus/unsteal-rules.yml" in doc,
   "docs/unsteal.md points to the dashboard and the rules file")

# 3. Every metric exists in unsteal's exposition
if exposed is not None:
    problems = check_names("dashboard", exprs + varexprs, exposed, recorded)
    ok(not problems, "every metric of the dashboard is in unsteal's exposition (and rate() "
       "takes counters)", "\n".join(problems))
    problems = check_names("rules", [e for _, _, e in rule_list], exposed, recorded)
    ok(not problems, "every metric of the rules file is in unsteal's exposition (and rate() "
       "takes counters)", "\n".join(problems))

# 4. promtool
if PROMTOOL:
    rc, out = promtool(RULES)
    ok(rc == 0, "promtool check rules docs/prometheus/unsteal-rules.yml", out)
    dash_rules = os.path.join(WORK, "dashboard-rules.yml")
    with open(dash_rules, "w", encoding="utf-8") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for p, t in targets:
            f.write(f"      - record: dashboard:panel{p.get('id')}:{t.get('refId')}\n"
                    f"        expr: {json.dumps(grafana_to_promql(t['expr']))}\n")
    rc, out = promtool(dash_rules)
    ok(rc == 0, "promtool parses the dashboard's expressions (as recording rules)", out)
else:
    ok(True, "promtool check rules docs/prometheus/unsteal-rules.yml "
       "# SKIP no promtool (tools/lab setup extracts it from Debian's prometheus)")
    ok(True, "promtool parses the dashboard's expressions "
       "# SKIP no promtool (tools/lab setup extracts it from Debian's prometheus)")

sys.exit(tap.end())
