# SPDX-License-Identifier: GPL-2.0-or-later
"""systemd + machined on cgroup v2: the mechanics the per-host vCPU slice
design relies on (docs/vcpu-cgroup-v2.md, "With systemd and machined").

No libvirt here: machines are busy shell processes registered through
machined's and systemd's D-Bus APIs, the same calls the design makes.

- A slice with DisableControllers=cpu does not enable cpu for the scopes
  machined creates in it, so every task below it is scheduled in one
  entity: a machine with 2 busy tasks and one with 1 get the same share per
  task; moved into machine.slice (cpu enabled), the 1-task machine gets
  about twice the share of each task of the other.
- A scope cannot change slice.  Starting a transient scope in the other
  slice with the process's PID moves it; the emptied old scope goes away,
  machined forgets the machine at once, and RegisterMachine registers it
  again with the new scope.  A second hop brings the scope back to its
  canonical name.  The process runs throughout.
- TerminateMachine after the moves kills the process and leaves no unit.

Runs on a booted test host with systemd, cgroup v2 and systemd-machined
(tools/lab testhost --variant v2-machined); skips elsewhere.
"""

import os
import subprocess
import time
import uuid

import labtest

CG = "/sys/fs/cgroup"
SLICE = "machine-unstealtest.slice"
SLICE_DIR = f"{CG}/machine.slice/{SLICE}"


def call(service, path, iface, method, sig, *args):
    cmd = ["busctl", "call", service, path, iface, method, sig] + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True)


def machined(method, sig, *args):
    return call("org.freedesktop.machine1", "/org/freedesktop/machine1",
                "org.freedesktop.machine1.Manager", method, sig, *args)


def systemd(method, sig, *args):
    return call("org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager", method, sig, *args)


def uuid_args():
    return [16] + list(uuid.uuid4().bytes)


def create_machine(name, pid):
    return machined("CreateMachine", "sayssusa(sv)", name, *uuid_args(), "unsteal-test", "vm",
                    pid, "", 1, "Slice", "s", SLICE)


def register_machine(name, pid):
    return machined("RegisterMachine", "sayssus", name, *uuid_args(), "unsteal-test", "vm",
                    pid, "")


def start_scope(unit, slice_, pid):
    return systemd("StartTransientUnit", "ssa(sv)a(sa(sv))", unit, "fail", 3,
                   "Slice", "s", slice_, "Delegate", "b", "true", "PIDs", "au", 1, pid, 0)


def cgroup_of(pid):
    with open(f"/proc/{pid}/cgroup") as fh:
        return fh.read().strip().split("::", 1)[1]


def machine_unit(name):
    p = subprocess.run(["machinectl", "show", name, "-p", "Unit", "--value"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def unit_state(unit):
    p = subprocess.run(["systemctl", "show", unit, "-p", "ActiveState", "--value"],
                       capture_output=True, text=True)
    return p.stdout.strip()


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def shares(pids, secs=6):
    a = {p: cpu_ticks(p) for p in pids}
    time.sleep(secs)
    b = {p: cpu_ticks(p) for p in pids}
    return [b[p] - a[p] for p in pids]


def read(path):
    with open(path) as fh:
        return fh.read().split()


def hop(t, name, pid, unit, slice_):
    """Move the machine's process into a new scope `unit` in `slice_` and
    register the machine again."""
    old = machine_unit(name)
    p = start_scope(unit, slice_, pid)
    t.ok(p.returncode == 0, f"{name}: StartTransientUnit {unit} in {slice_}", p.stderr)
    t.ok(labtest.wait_for(lambda: cgroup_of(pid).endswith("/" + unit)),
         f"{name}: the process is in {unit}", cgroup_of(pid))
    t.ok(labtest.wait_for(lambda: unit_state(old) == "inactive"),
         f"{name}: the emptied scope {old} goes away", unit_state(old))
    t.ok(labtest.wait_for(lambda: machine_unit(name) is None),
         f"{name}: machined forgets the machine with its scope", machine_unit(name))
    p = register_machine(name, pid)
    t.ok(p.returncode == 0, f"{name}: RegisterMachine with the same leader", p.stderr)
    t.eq(machine_unit(name), unit, f"{name}: machinectl shows the new scope")


def main(t, procs):
    p = subprocess.run(["systemctl", "set-property", "--runtime", SLICE,
                        "DisableControllers=cpu"], capture_output=True, text=True)
    t.ok(p.returncode == 0, f"{SLICE}: DisableControllers=cpu", p.stderr)

    def spin():
        procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
        return procs[-1].pid

    a0, a1, b0 = spin(), spin(), spin()
    for name, pid in (("ut-a", a0), ("ut-b", b0)):
        p = create_machine(name, pid)
        t.ok(p.returncode == 0, f"{name}: CreateMachine in {SLICE}", p.stderr)
    scope_a = machine_unit("ut-a")
    with open(f"{SLICE_DIR}/{scope_a}/cgroup.procs", "w") as fh:
        fh.write(str(a1))
    t.ok("cpu" not in read(f"{SLICE_DIR}/cgroup.subtree_control"),
         f"{SLICE} does not enable cpu for its scopes", read(f"{SLICE_DIR}/cgroup.subtree_control"))
    ctrls = read(f"{SLICE_DIR}/{scope_a}/cgroup.controllers")
    t.ok("memory" in ctrls and "cpu" not in ctrls,
         f"{scope_a} has memory but not cpu", ctrls)
    s = shares([a0, a1, b0])
    t.ok(min(s) > 0.8 * max(s), "in the slice every busy task gets the same share",
         f"ticks a0 a1 b0: {s}")
    print(f"# shared slice: ticks a0 a1 b0 {s}", flush=True)

    # Out of the slice: a scope in machine.slice, then the canonical name.
    canonical = machine_unit("ut-b")
    hop(t, "ut-b", b0, "machine-ut\\x2db-move.scope", "machine.slice")
    hop(t, "ut-b", b0, canonical, "machine.slice")
    t.eq(cgroup_of(b0), f"/machine.slice/{canonical}",
         "after two hops the scope has its canonical name in machine.slice")
    t.ok(procs[2].poll() is None, "the process ran throughout")
    s = shares([a0, a1, b0])
    t.ok(s[2] > 1.4 * max(s[0], s[1]),
         "in machine.slice the 1-task machine gets more than each task of the other",
         f"ticks a0 a1 b0: {s}")
    print(f"# own scope: ticks a0 a1 b0 {s}", flush=True)

    p = machined("TerminateMachine", "s", "ut-b")
    t.ok(p.returncode == 0, "TerminateMachine after the moves", p.stderr)
    t.ok(labtest.wait_for(lambda: procs[2].poll() is not None), "kills the process")
    t.ok(labtest.wait_for(lambda: unit_state(canonical) == "inactive"), "and removes its scope",
         unit_state(canonical))
    machined("TerminateMachine", "s", "ut-a")


def run():
    if not os.path.exists("/run/systemd/system") or \
            not os.path.exists(f"{CG}/cgroup.controllers"):
        labtest.skip_all("needs systemd as PID 1 on cgroup v2")
    if not labtest.has_machined():
        labtest.skip_all("needs systemd-machined")
    t = labtest.TAP()
    procs = []
    try:
        main(t, procs)
    except Exception:
        import traceback
        t.ok(False, "test body raised", traceback.format_exc())
    finally:
        for name in ("ut-a", "ut-b"):
            machined("TerminateMachine", "s", name)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    t.done()


run()
