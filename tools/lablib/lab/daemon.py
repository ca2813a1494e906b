# SPDX-License-Identifier: GPL-2.0-or-later
"""The lab's private virtlogd + virtqemud, run as root from the _build prefix.

Sockets, state, logs and qemu.conf live under _build/prefix.  'stop' destroys
the lab's domains, stops the daemons by PID and removes exactly the cgroups
the lab created: the domains' groups, the shared vCPU group, and the machine
partition only when it did not exist before the lab first started.
"""

import glob
import json
import os
import signal
import subprocess
import time

from ..common import LabError, build_dir, logs_dir, mkdirs, require_root, step, warn
from ..build.libvirt import lab_prefix
from .. import config
from . import cgroupfs
from ..stack import stacks


def lab_dir(stack):
    """PID files, qemu.conf bookkeeping and consoles of one libvirt stack's lab daemon."""
    return os.path.join(build_dir(), f"lab{stack.suffix}")


def _daemon_name(prefix):
    """The daemon that runs the qemu driver: virtqemud, or libvirtd for an
    install without the modular daemons (Debian's packages of 11.3.0 ship
    libvirtd and load the qemu driver into it)."""
    sbin = os.path.join(prefix, "sbin")
    if not os.path.exists(os.path.join(sbin, "virtqemud")) and \
            os.path.exists(os.path.join(sbin, "libvirtd")):
        return "libvirtd"
    return "virtqemud"


def _paths(prefix):
    """(daemon, run directory, socket, URI, qemu.conf) of the install at prefix."""
    daemon = _daemon_name(prefix)
    rundir = os.path.join(prefix, "var", "run", "libvirt")
    sock = os.path.join(rundir, "virtqemud-sock" if daemon == "virtqemud" else "libvirt-sock")
    return (daemon, rundir, sock, f"qemu+unix:///system?socket={sock}",
            os.path.join(prefix, "etc", "libvirt", "qemu.conf"))


CGROOT = "/sys/fs/cgroup"
PARTITION = "machine"
DEFAULT_SHARED_GROUP = "machine/vcpus.partition"


class Lab:
    """The lab daemon of one libvirt install: the install's prefix; the
    daemon, run directory, socket, URI and qemu.conf under it; and dir, the
    lab's own records (PID files, qemu.conf bookkeeping, consoles)."""

    def __init__(self, prefix, dir):
        self.prefix = prefix
        self.dir = dir
        self.daemon, self.rundir, self.sock, self.uri, self.qemu_conf = _paths(prefix)


def lab(cfg=None):
    """The lab daemon the configuration names (default: config.get()): the
    build of its libvirt stack, or its libvirt_prefix and lab_dir."""
    cfg = cfg or config.get()
    return Lab(lab_prefix(cfg), cfg.lab_dir or lab_dir(stacks.lab_libvirt(cfg)))


def config_at(prefix, cfg=None):
    """The configuration with the lab daemon run from the libvirt installed
    at prefix.

    The control-plane benchmark runs stock libvirt from its own prefix
    (config.using(config_at(...))); every path of the lab daemon (sockets,
    state, qemu.conf, the lab's own records) lives under the prefix, so the
    two never share state.
    """
    cfg = cfg or config.get()
    return cfg.replace(libvirt_prefix=prefix, lab_dir=os.path.join(prefix, "lab"))


def env():
    prefix = lab().prefix
    return {"LD_LIBRARY_PATH": os.path.join(prefix, "lib"),
            "PATH": os.path.join(prefix, "bin") + ":" + os.path.join(prefix, "sbin") + ":"
            + os.environ.get("PATH", "/usr/bin:/bin")}


def _full_env():
    e = dict(os.environ)
    e.update(env())
    return e


def virsh(args, check=True, capture=False, timeout=120):
    lb = lab()
    cmd = [os.path.join(lb.prefix, "bin", "virsh"), "-q", "-c", lb.uri] + list(args)
    p = subprocess.run(cmd, env=_full_env(), text=True, timeout=timeout,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.PIPE if capture else None)
    if check and p.returncode != 0:
        raise LabError(f"virsh {' '.join(args)} failed: {(p.stderr or '').strip()}")
    return p


def _pid(name, where=None):
    """PID of the lab's daemon name, recorded in where (default: lab().dir)."""
    path = os.path.join(where or lab().dir, f"{name}.labpid")
    try:
        pid = int(open(path).read().strip())
    except (OSError, ValueError):
        return None
    try:
        with open(f"/proc/{pid}/comm") as fh:
            if fh.read().strip() != name:
                return None
    except OSError:
        return None
    # A daemon whose parent (an earlier tools/lab) is gone may linger as a
    # zombie until init reaps it: that is not a running daemon.
    if gone(pid):
        return None
    return pid


def _write_conf(vcpu_cgroup, extra=None):
    lb = lab()
    mkdirs(lb.dir, logs_dir())
    lines = [
        "# Written by tools/lab start: the lab daemon runs QEMU as root with no",
        "# security driver; everything else is libvirt's default.",
        'user = "root"',
        'group = "root"',
        'security_driver = "none"',
        'stdio_handler = "logd"',
    ]
    if vcpu_cgroup:
        lines.append(f'vcpu_cgroup = "{vcpu_cgroup}"')
    for key, value in (extra or {}).items():
        lines.append(f"{key} = {value}")
    with open(lb.qemu_conf, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    conf = os.path.join(lb.dir, "virtqemud.conf")
    with open(conf, "w") as fh:
        fh.write(f'log_outputs = "1:file:{build_dir()}/logs/virtqemud.log"\n'
                 'log_filters = "1:qemu.qemu_cgroup 1:qemu.qemu_process 1:util.cgroup '
                 '3:util 3:rpc 3:remote 3:event 3:access 3:conf 3:security 3:qemu"\n')
    return conf


def _record_preexisting():
    path = os.path.join(lab().dir, "cgroups-preexisting.json")
    if os.path.exists(path):
        return
    pre = [m.path for m in cgroupfs.mounts() if os.path.isdir(os.path.join(m.path, PARTITION))]
    with open(path, "w") as fh:
        json.dump(pre, fh)


# Seconds the daemon has to answer by default.  The first start on a fresh
# host probes QEMU's capabilities before it answers; inside the test host
# (nested TCG) that took more than 30 s, and its tests pass a longer time.
START_TIMEOUT = 60


def _wait_socket(proc, timeout):
    lb = lab()
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if os.path.exists(lb.sock):
            try:
                p = virsh(["version"], check=False, capture=True, timeout=30)
            except subprocess.TimeoutExpired:
                continue
            if p.returncode == 0:
                return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise LabError(f"{lb.daemon} did not come up within {timeout} s; see "
                   f"{build_dir()}/logs/virtqemud.log and "
                   f"{build_dir()}/logs/{lb.daemon}.stderr")


def _spawn(name, args, extra_env=None):
    lb = lab()
    bin_ = os.path.join(lb.prefix, "sbin", name)
    if not os.path.exists(bin_):
        raise LabError(f"{bin_} is missing: run tools/lab build libvirt --stack "
                       f"{stacks.lab_libvirt().key} first")
    pidfile = os.path.join(lb.dir, f"{name}.pid")
    with open(os.path.join(logs_dir(), f"{name}.stderr"), "a") as err:
        p = subprocess.Popen([bin_, "-p", pidfile] + args,
                             env={**_full_env(), **(extra_env or {})},
                             stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                             start_new_session=True)
    # Not daemonised (no -d): the PID we started is the daemon's own.
    with open(os.path.join(lb.dir, f"{name}.labpid"), "w") as fh:
        fh.write(str(p.pid))
    return p


def _other_stack_running():
    """Another libvirt stack whose lab daemon runs: both would manage /machine."""
    mine, daemon = stacks.lab_libvirt(), lab().daemon
    for stack in stacks.of_package("libvirt"):
        if stack.key != mine.key and _pid(daemon, lab_dir(stack)):
            return stack
    return None


def start(vcpu_cgroup=None, quiet=False, extra=None, daemon_env=None,
          timeout=START_TIMEOUT):
    """(Re)start the lab daemons; extra: more qemu.conf lines {key: raw value};
    daemon_env: more environment for the QEMU daemon alone (virtlogd keeps
    running as it is); timeout: seconds the daemon has to answer."""
    require_root("tools/lab start")
    other = _other_stack_running()
    if other:
        raise LabError(f"the lab daemon of the {other.key} stack is running and manages the "
                       f"same cgroups; stop it first: UNSTEAL_LIBVIRT_STACK={other.key} "
                       f"tools/lab stop")
    lb = lab()
    mkdirs(lb.dir, lb.rundir, logs_dir())
    _record_preexisting()
    conf = _write_conf(vcpu_cgroup, extra)
    if _pid("virtlogd") is None:
        step("lab: starting virtlogd")
        proc = _spawn("virtlogd", [])
        logsock = os.path.join(lb.rundir, "virtlogd-sock")
        t0 = time.monotonic()
        while not os.path.exists(logsock):
            if time.monotonic() - t0 > 30 or proc.poll() is not None:
                raise LabError(f"virtlogd did not come up; see {build_dir()}/logs/virtlogd.stderr")
            time.sleep(0.1)
    old = _pid(lb.daemon)
    if old:
        step(f"lab: restarting {lb.daemon} (pid {old}) with the new qemu.conf")
        terminate(old, lb.daemon)
    step(f"lab: starting {lb.daemon}" + (f" (vcpu_cgroup={vcpu_cgroup})" if vcpu_cgroup else ""))
    proc = _spawn(lb.daemon, ["-f", conf], daemon_env)
    pid = proc.pid
    _wait_socket(proc, timeout)
    if not quiet:
        print(f"lab: {lb.daemon} pid {pid}; connect with:\n  virsh -c '{lb.uri}'\n"
              f"  or: tools/lab virsh ...", flush=True)
    return pid


def terminate(pid, name, timeout=15):
    """Stop a process the lab started: SIGTERM, SIGKILL after timeout
    seconds, then reap it; name is what the warning calls it."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not os.path.exists(f"/proc/{pid}") or gone(pid):
            _reap(pid)
            return
        time.sleep(0.1)
    warn(f"{name} (pid {pid}) ignored SIGTERM; sending SIGKILL")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def gone(pid):
    """The process is no more: no /proc entry, or a zombie not yet reaped."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def lab_domains():
    """Names of every domain the lab daemon knows (running or defined)."""
    lb = lab()
    names = set()
    if _pid(lb.daemon):
        p = virsh(["list", "--all", "--name"], check=False, capture=True)
        names |= {n.strip() for n in (p.stdout or "").splitlines() if n.strip()}
    for x in glob.glob(os.path.join(lb.rundir, "qemu", "*.xml")):
        names.add(os.path.basename(x)[:-4])
    for x in glob.glob(os.path.join(lb.prefix, "etc", "libvirt", "qemu", "*.xml")):
        names.add(os.path.basename(x)[:-4])
    return sorted(names)


def qemu_pids():
    """PIDs of the lab's QEMU processes still running (from libvirt's pid files)."""
    pids = []
    for pf in glob.glob(os.path.join(lab().rundir, "qemu", "*.pid")):
        try:
            pid = int(open(pf).read().strip())
        except (OSError, ValueError):
            continue
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        if comm.startswith("qemu"):
            pids.append(pid)
    return pids


def shared_group_from_conf():
    try:
        text = open(lab().qemu_conf).read()
    except OSError:
        return DEFAULT_SHARED_GROUP
    import re
    m = re.search(r'^\s*vcpu_cgroup_path\s*=\s*"([^"]+)"', text, re.M)
    return m.group(1).strip("/") if m else DEFAULT_SHARED_GROUP


def _running_ids():
    """{name: id} of the lab daemon's running domains."""
    ids = {}
    if _pid(lab().daemon):
        p = virsh(["list"], check=False, capture=True)
        for line in (p.stdout or "").splitlines():
            f = line.split()
            if len(f) >= 2 and f[0].isdigit():
                ids[f[1]] = int(f[0])
    return ids


def lab_cgroups(domains, ids=None):
    """(cgroups the lab created, deepest first; partitions the lab created).

    Only this lab's groups: a domain's group is qemu-ID-NAME.libvirt-qemu
    (or NAME.libvirt-qemu) with the ID this lab's daemon gave it, so that a
    second lab on the same host (another work tree) keeps its own.  When the
    daemon is gone and the IDs are unknown, any ID matches.
    """
    pre = []
    try:
        pre = json.load(open(os.path.join(lab().dir, "cgroups-preexisting.json")))
    except (OSError, ValueError):
        pass
    out, parts = [], []
    shared = shared_group_from_conf()
    for mnt in (m.path for m in cgroupfs.mounts()):
        part = os.path.join(mnt, PARTITION)
        if not os.path.isdir(part):
            continue
        roots = [os.path.join(mnt, shared)]
        for d in domains:
            # libvirt names a domain's group NAME.libvirt-qemu, or
            # qemu-ID-NAME.libvirt-qemu after its machine name.
            roots.append(os.path.join(part, f"{d}.libvirt-qemu"))
            if ids and d in ids:
                roots.append(os.path.join(part, f"qemu-{ids[d]}-{d}.libvirt-qemu"))
            elif ids is None:
                roots += glob.glob(os.path.join(part, f"qemu-[0-9]*-{glob.escape(d)}"
                                                      ".libvirt-qemu"))
        if mnt not in pre:
            parts.append(part)
        for r in roots:
            if os.path.isdir(r):
                for dirpath, dirnames, _ in os.walk(r, topdown=False):
                    out.append(dirpath)
    return out, parts


def stop():
    require_root("tools/lab stop")
    lb = lab()
    domains = lab_domains()
    ids = _running_ids() if _pid(lb.daemon) else None
    if _pid(lb.daemon):
        for d in domains:
            virsh(["destroy", d], check=False, capture=True)
            virsh(["undefine", d], check=False, capture=True)
        if domains:
            step(f"lab: destroyed {len(domains)} domain(s): {' '.join(domains)}")
    for pid in qemu_pids():
        step(f"lab: stopping leftover QEMU pid {pid}")
        terminate(pid, "qemu")
    for name in (lb.daemon, "virtlogd"):
        pid = _pid(name)
        if pid:
            step(f"lab: stopping {name} (pid {pid})")
            terminate(pid, name)
    removed, busy = 0, []
    groups, parts = lab_cgroups(domains, ids)
    for path in groups:
        try:
            os.rmdir(path)
            removed += 1
        except FileNotFoundError:
            pass
        except OSError as e:
            # The shared group may hold another lab's vCPUs on this host.
            if not path.endswith("/" + shared_group_from_conf()):
                busy.append(f"{path} ({e.strerror})")
    # The partition, when this lab created it, goes once it is empty; with
    # another lab's domains still in it, it stays.
    for part in parts:
        try:
            os.rmdir(part)
            removed += 1
        except OSError:
            pass
    step(f"lab: removed {removed} lab cgroup(s)")
    for f in glob.glob(os.path.join(lb.prefix, "etc", "libvirt", "qemu", "*.xml")):
        os.unlink(f)
    if busy:
        raise LabError("could not remove: " + ", ".join(busy))


def status():
    lb = lab()
    print(f"libvirt stack: {stacks.lab_libvirt().key} ({lb.prefix})")
    for name in ("virtlogd", lb.daemon):
        pid = _pid(name)
        print(f"{name}: {'pid ' + str(pid) if pid else 'not running'}")
    if _pid(lb.daemon):
        print(f"uri: {lb.uri}")
        virsh(["list", "--all"], check=False)


def running():
    return _pid(lab().daemon) is not None


def pid(name=None):
    """PID of the lab's libvirt daemon, or of its daemon name (virtlogd), or
    None when it is not running."""
    return _pid(name or lab().daemon)
