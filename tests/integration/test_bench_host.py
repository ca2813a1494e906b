# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab bench host --quick, for real: on this host's cgroup v1 (the
development host) and on v2 (inside the v2-nosystemd test-host row).

Two mixes, 3 runs of 2-s windows: 2-1-1 (busy domains of 2, 1 and 1
vCPUs, about 2 vCPUs per CPU on any host) and capped (default domains
beside a domain whose vCPUs are capped at 20 %).  Checks what the
benchmark must do, read from /proc rather than from its own bookkeeping:
every vCPU thread sat in the group its layout prescribes in every window,
the order balanced, the results written, its cgroups removed and its
processes stopped.  Bounds check that the layouts are what they claim,
far from what was measured (docs/results/2026-11-28-bench-host.md):
  - busy max/min share, 2-1-1: per-domain >= 1.4 (medians measured
    2.00-2.05), per-domain-scaled and per-host <= 1.4 (1.00-1.05);
  - a capped vCPU's mean share <= 0.25 of a CPU (its cap is 0.2; measured
    0.189-0.201; uncapped it would get 0.33 on 2 CPUs in two of the layouts,
    more on larger hosts).
On a v2 host whose root does not enable cpu for its children (the
v2-nosystemd row before libvirt ran) it first checks the refusal, then
enables cpu there as libvirt would.
"""

import contextlib
import os
import shutil
import sys
import tempfile
import types

import labtest
from lablib.bench import benchhost, benchsched, hostlayout

PER_DOMAIN_AT_LEAST = 1.4
EVEN_AT_MOST = 1.4
CAPPED_AT_MOST = 0.25


def expected(version, d, i, lay):
    """Where the libvirt series puts vCPU i of domain d in layout lay, as
    /proc/PID/task/TID/cgroup names it (written out here, not taken from
    hostlayout, so that a wrong placement there fails)."""
    base = f"/{hostlayout.BENCH_GROUP}/machine"
    if lay == "per-host" and d.cap and version == "v1":    # nested, holding the cap
        return f"{base}/vcpus.partition/{d.name}.libvirt-qemu/vcpu{i}"
    if lay == "per-host" and not d.cap:
        return (f"{base}/vcpus.partition" if version == "v1"
                else f"{base}/vcpus.partition/{d.name}.libvirt-qemu")
    return f"{base}/{d.name}.libvirt-qemu/vcpu{i}"


def main(t):
    if os.geteuid() != 0:
        labtest.skip_all("needs root (run through tools/lab test)")
    enabled = enable_cpu_at_v2_root(t)
    try:
        run_quick(t)
    finally:
        if enabled:
            try:
                with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as fh:
                    fh.write("-cpu")
            except OSError:     # libvirt's groups use it by now
                pass


def enable_cpu_at_v2_root(t):
    """On a v2 host whose root does not enable cpu for its children (a test
    host without systemd before libvirt ran), bench host must refuse,
    saying how to enable it; the test then enables it, as libvirt does
    when it makes its first group, and says so.  Whether it did."""
    root = "/sys/fs/cgroup"
    if hostlayout.cgroupfs.v1_hierarchy("cpu") or not os.path.exists(
            os.path.join(root, "cgroup.subtree_control")):
        return False
    with open(os.path.join(root, "cgroup.subtree_control")) as fh:
        if "cpu" in fh.read().split():
            return False
    try:
        hostlayout.find()
        msg = None
    except labtest.LabError as e:
        msg = str(e)
    t.ok(msg is not None and "echo +cpu >" in msg,
         "v2 without cpu enabled at the root: refused, saying how to enable it", msg)
    with open(os.path.join(root, "cgroup.subtree_control"), "w") as fh:
        fh.write("+cpu")
    print("# enabled cpu at the v2 root for the run, as libvirt would", flush=True)
    return True


def run_quick(t):
    version, mount = hostlayout.find()
    print(f"# cgroup {version} at {mount}, {os.cpu_count()} CPUs", flush=True)
    benchsched.build_spinner()
    out = tempfile.mkdtemp(prefix="unsteal-bench-host-")
    with contextlib.redirect_stdout(sys.stderr):    # stdout is TAP; the report is not
        res = benchhost.run_bench(quick=True,
                                  outdir=out, command="tests/integration/test_bench_host.py")
    t.eq(res["cgroup"], version, "the results name the hierarchy it ran on")
    for mix in res["mixes"]:
        name = mix["mix"]
        doms = [types.SimpleNamespace(name=d["name"], vcpus=d["vcpus"], cap=d["cap_pct"])
                for d in mix["domains"]]
        t.ok(mix["balanced"] and len(mix["runs"]) == 3
             and all(set(r) == set(hostlayout.LAYOUTS) for r in mix["runs"]),
             f"{name}: 3 runs, each layout once per run, in balanced order", mix["orders"])
        wrong = [(r, lay, f"{d.name}/{i}", run[lay]["threads"][f"{d.name}/{i}"]["cgroup"])
                 for r, run in enumerate(mix["runs"]) for lay in hostlayout.LAYOUTS
                 for d in doms for i in range(d.vcpus)
                 if run[lay]["threads"][f"{d.name}/{i}"]["cgroup"]
                 != expected(version, d, i, lay)]
        t.ok(not wrong, f"{name}: every vCPU thread in its layout's group in every window "
             "(read from /proc)", wrong[:5])
        delivered = [run[lay]["delivered"] for run in mix["runs"] for lay in run]
        t.ok(min(delivered) > 0.25 * os.cpu_count(),
             f"{name}: the domains ran in every window (CPUs delivered "
             f"{min(delivered):.2f}-{max(delivered):.2f})", delivered)
        med = mix["median"]
        if name == "2-1-1":
            t.bound(med["per-domain"]["maxmin"], PER_DOMAIN_AT_LEAST,
                    "2-1-1 per-domain: the 2-vCPU domain's vCPUs get less (busy max/min)",
                    above=True)
            for lay in ("per-domain-scaled", "per-host"):
                t.bound(med[lay]["maxmin"], EVEN_AT_MOST,
                        f"2-1-1 {lay}: busy vCPUs get equal shares (busy max/min)")
        else:
            for lay in hostlayout.LAYOUTS:
                t.bound(med[lay]["capped"], CAPPED_AT_MOST,
                        f"capped {lay}: the capped vCPUs stay within their cap", unit="CPU")
        t.ok(len(mix["comparisons"]) == 12, f"{name}: 12 comparisons reported",
             [c["field"] for c in mix["comparisons"]])
    t.ok(all(os.path.exists(os.path.join(out, f)) for f in ("host.json", "host.md")),
         "host.json and host.md written", os.listdir(out))
    t.ok(not os.path.exists(os.path.join(mount, hostlayout.BENCH_GROUP)),
         "the benchmark removed its cgroup subtree")
    t.eq(labtest.processes_named("vcpu-spin"), [], "no vcpu-spin process is left")
    shutil.rmtree(out)


labtest.run(main, lab=False)
