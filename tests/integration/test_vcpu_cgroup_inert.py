# SPDX-License-Identifier: GPL-2.0-or-later
"""vcpu_cgroup = "per-domain", the default, is stock libvirt.

The same scenario runs twice on this host, once with stock libvirt (the
pinned base without the series, `_build/prefix-stock`) and once with the
patched libvirt in its default mode:

- a domain with default tunables and one with <shares> and <quota> start;
- a weight and a vCPU quota are then written into the first one's cgroups
  outside libvirt;
- the daemon restarts and reconnects to both;
- a live schedinfo change on the tuned one, and back;
- both stop.

After each step the test records every readable and writable cgroup file
of the domains' groups in the cpu and cpuacct hierarchies (on cgroup v2
the domains' whole groups), where each vCPU and emulator thread is, the
groups below the machine partition, the status XML's elements, the fields
domstats --cpu-total reports, and the daemon's warning and error lines.
Domain IDs, PIDs, thread IDs and source line numbers are normalized; the
two runs must agree on everything else.
"""

import os
import re
import stat

import labtest
import vcpucg
from labtest import config, daemon, guest

DOMAINS = (("in-default", None), ("in-tuned", {"shares": "2048", "quota": "50000"}))
# A tid list, a counter or a file that only writes: not settings
SKIP = re.compile(r"^(tasks|cgroup\.(procs|threads|kill|events.*|stat)|cpuacct\..*"
                  r"|.*\.(stat|pressure|events|reclaim|current|peak)(\..*)?)$")


def _norm(text):
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", text)
    text = re.sub(r"qemu-\d+-", "qemu-N-", text)
    text = re.sub(r"\b\d{3,}\b", "N", text)
    return text


def _group_files(hierarchy, group):
    """{relative path: content} of the settings in group and below it."""
    out = {}
    top = os.path.join(labtest.controller_dir(hierarchy), group.lstrip("/"))
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        rel = os.path.relpath(dirpath, top)
        out[f"{hierarchy}:{rel}/"] = ""
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                if SKIP.match(name) or not os.stat(path).st_mode & stat.S_IWUSR:
                    continue
                with open(path) as fh:
                    out[f"{hierarchy}:{rel}/{name}"] = fh.read().strip()
            except OSError:
                continue
    return out


def _threads(dom):
    """{thread: its cpu group relative to the domain's}, vCPUs and emulator."""
    pid = guest.qemu_pid(dom)
    group = vcpucg.domain_group(dom)
    out = {}
    tids = {f"vcpu{i}": tid for i, tid in guest.vcpu_tids(dom).items()}
    tids["emulator"] = pid
    for what, tid in tids.items():
        path = labtest.thread_cgroup(pid, tid, "cpu") or ""
        out[what] = path.replace(group, "DOM", 1) if group else path
    return out


def _status(dom):
    """The element names of the domain's status XML, outside <domain>."""
    path = os.path.join(daemon.lab().prefix, "var", "run", "libvirt", "qemu", f"{dom}.xml")
    try:
        text = open(path).read()
    except OSError:
        return None
    text = re.sub(r"<domain .*</domain>", "", text, flags=re.S)
    return sorted(set(re.findall(r"<([A-Za-z]+)", text)))


def _partition():
    """The groups below the machine partition, names normalized."""
    top = os.path.join(labtest.controller_dir("cpu"), "machine")
    try:
        names = os.listdir(top)
    except OSError:
        return None
    return sorted(_norm(x) for x in names if os.path.isdir(os.path.join(top, x)))


def snapshot(doms):
    """{what: value} of everything compared, one entry per file, thread,
    status XML and domstats."""
    out = {"groups below the machine partition": _partition()}
    for i, d in enumerate(doms):
        who = f"domain {i + 1}"
        group = vcpucg.domain_group(d)
        out[f"{who}: group"] = _norm(group) if group else None
        if not group:
            continue
        for h in (("cpu",) if vcpucg.V2 else ("cpu", "cpuacct")):
            for key, value in _group_files(h, group).items():
                out[f"{who}: {key}"] = value
        for key, value in _threads(d).items():
            out[f"{who}: thread {key}"] = value
        out[f"{who}: status XML elements"] = _status(d)
        out[f"{who}: domstats --cpu-total fields"] = sorted(vcpucg.domstats(d))
    return out


def differences(ours, ref):
    """One line per entry where ours and stock's differ."""
    return [f"{key}: {ours.get(key)!r}, stock libvirt {ref.get(key)!r}"
            for key in sorted(set(ours) | set(ref)) if ours.get(key) != ref.get(key)]


def log_lines(since):
    return [_norm(f"{level} : {module} : {message}")
            for level, module, message in labtest.daemon_log_messages(since)]


def scenario(vcpu_cgroup):
    """The steps, each one's snapshot, and the daemon's warnings and errors."""
    since = labtest.daemon_log_end()
    steps = {}
    daemon.stop()
    try:
        _steps(vcpu_cgroup, steps)
    finally:
        daemon.stop()
    return steps, log_lines(since)


def _steps(vcpu_cgroup, steps):
    daemon.start(vcpu_cgroup=vcpu_cgroup, quiet=True)
    doms = [guest.create(n, vcpus=2, workload="idle", cputune=tune) for n, tune in DOMAINS]
    steps["started"] = snapshot(doms)

    # An administrator's weight and quota, written outside libvirt
    cpu = os.path.join(labtest.controller_dir("cpu"), vcpucg.domain_group(doms[0]).lstrip("/"))
    if vcpucg.V2:
        with open(os.path.join(cpu, "cpu.weight"), "w") as fh:
            fh.write("150")
    else:
        with open(os.path.join(cpu, "cpu.shares"), "w") as fh:
            fh.write("1536")
        with open(os.path.join(cpu, "vcpu1", "cpu.cfs_quota_us"), "w") as fh:
            fh.write("30000")
    steps["set outside libvirt"] = snapshot(doms)

    daemon.start(vcpu_cgroup=vcpu_cgroup, quiet=True)
    steps["daemon restarted"] = snapshot(doms)

    r1 = vcpucg.schedinfo(doms[1], "vcpu_quota=20000")
    r2 = vcpucg.schedinfo(doms[1], "vcpu_quota=50000")
    steps["live change and back"] = snapshot(doms)
    steps["live change answers"] = {"vcpu_quota=20000": (r1.returncode, _norm(r1.stderr)),
                                    "vcpu_quota=50000": (r2.returncode, _norm(r2.stderr))}

    for d in doms:
        daemon.virsh(["destroy", d], capture=True)
    steps["stopped"] = snapshot([])


def _stock_prefix():
    from lablib.build import libvirt as lab_libvirt
    return lab_libvirt.stock_prefix()


def main(t):
    stock = _stock_prefix()
    if not os.path.exists(os.path.join(stock, "sbin", "virtqemud")) and \
            not os.path.exists(os.path.join(stock, "sbin", "libvirtd")):
        labtest.skip_all("stock libvirt is not built here (tools/lab test builds it on the "
                         "development host; the test host's image has only our packages)")
    with config.using(daemon.config_at(stock)):
        ref, ref_log = scenario(None)
    ours, our_log = scenario("per-domain")

    for step in ref:
        t.ok(not differences(ours[step], ref[step]),
             f"{step}: {len(ref[step])} entries as with stock libvirt",
             "\n".join(differences(ours[step], ref[step])))
    t.eq(sorted(our_log), sorted(ref_log),
         "the daemon logs the same warnings and errors as stock libvirt")


labtest.run(main)
