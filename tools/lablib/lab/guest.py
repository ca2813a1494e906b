# SPDX-License-Identifier: GPL-2.0-or-later
"""TCG guests for the steal experiments: a small kernel and a busybox initramfs.

The guest's init (tools/guest/init.sh) reads unsteal.workload= from the
kernel command line:
  busy   one CPU-bound shell loop pinned to every vCPU
  idle   nothing but a sleeping shell
  mixed  a loop on vCPU 0 only, the other vCPUs idle
and prints 'unsteal-guest: ready' on the serial console once the loops run.
Two more workloads boot no Linux:
  spin     a boot sector that spins on every vCPU with interrupts off
           (tools/testhost/spin-boot.S): the vCPU threads are pure CPU hogs
           that never take QEMU's big lock (see docs/performance.md); ready
           once every vCPU thread spins.
  balloon  a multiboot kernel with a virtio balloon driver
           (tools/testhost/balloon-guest.c), here and in the test host:
           it writes to all its memory, says ready, and then gives pages
           to the host and takes them back (writing to them again) as the
           balloon's target ('virsh setmem') changes.
"""

import os
import shutil
import time
from dataclasses import dataclass
from xml.sax.saxutils import escape

from ..common import ROOT, LabError, build_dir, images_dir, mkdirs, run, step
from . import daemon

BUSYBOX = "/bin/busybox"

# The guest's /init and what it shares with the kselftest guest's, as
# /lib/unsteal/preamble.sh (docs/lab.md, "Guests").
PROGRAMS = os.path.join(ROOT, "tools", "guest")
PREAMBLE = os.path.join(PROGRAMS, "preamble.sh")
INIT = os.path.join(PROGRAMS, "init.sh")


def initramfs_path():
    return os.path.join(images_dir(), "guest-initramfs.cpio.gz")


# Inside the test host (tools/lab testhost, docs/testhost.md) a guest boots
# no OS: a nested TCG guest would take minutes to boot its kernel, and the
# placement tests only need the vCPU threads, which exist as soon as QEMU
# runs.  'busy' and 'mixed' guests boot tools/testhost/spin-boot.S, which
# spins on every vCPU ('mixed' spins everywhere too); 'idle' guests have no
# boot device and halt in the firmware.  A guest counts as ready once QEMU
# has all its vCPU threads.  The caller says which host it is (GuestHost):
# this module does not look at the environment.
SPIN_BOOT_NAME = "spin-boot.img"
SPIN_SRC = os.path.join(ROOT, "tools", "testhost", "spin-boot.S")
BALLOON_NAME = "balloon-guest.elf"
BALLOON_SRC = os.path.join(ROOT, "tools", "testhost", "balloon-guest.c")
WORKLOADS = ("busy", "idle", "mixed", "spin", "balloon")
READY = "unsteal-guest: ready"
_WORKLOADS = {}     # domain name -> workload, for the readiness check


@dataclass(frozen=True)
class GuestHost:
    """What the host the lab's guests run on gives them."""
    boots_os: bool = True           # False: guests boot no OS (above)
    images_prebuilt: bool = False   # the spin and balloon images come with the host


DEVELOPMENT_HOST = GuestHost()
TEST_HOST = GuestHost(boots_os=False, images_prebuilt=True)


def spin_boot_path():
    return os.path.join(images_dir(), SPIN_BOOT_NAME)


def balloon_path():
    return os.path.join(images_dir(), BALLOON_NAME)


def stage_initramfs(stage, init):
    """A fresh initramfs tree in stage: busybox, the shared preamble and the
    program init as /init (kselftest.py builds its initramfs on it too)."""
    if not os.path.exists(BUSYBOX):
        raise LabError("busybox-static is not installed; run tools/lab setup")
    shutil.rmtree(stage, ignore_errors=True)
    mkdirs(os.path.join(stage, "bin"), os.path.join(stage, "dev"),
           os.path.join(stage, "lib", "unsteal"))
    shutil.copy2(BUSYBOX, os.path.join(stage, "bin", "busybox"))
    shutil.copyfile(PREAMBLE, os.path.join(stage, "lib", "unsteal", "preamble.sh"))
    shutil.copyfile(init, os.path.join(stage, "init"))
    os.chmod(os.path.join(stage, "init"), 0o755)
    return stage


def pack_initramfs(stage, path, level=9):
    run(f"cd {stage} && find . | cpio -o -H newc -R 0:0 --quiet | gzip -{level} > {path}")
    return path


def _init_source():
    """What the guest initramfs is built from, for its stamp: the two files."""
    return "".join(f"==> {os.path.relpath(p, ROOT)}\n" + open(p).read()
                   for p in (PREAMBLE, INIT))


def build_initramfs():
    if not os.path.exists(BUSYBOX):
        raise LabError("busybox-static is not installed; run tools/lab setup")
    initramfs = initramfs_path()
    stamp = initramfs + ".src"
    source = _init_source()
    if os.path.exists(initramfs) and os.path.exists(stamp) and open(stamp).read() == source:
        return initramfs
    step("guest: building the busybox initramfs")
    mkdirs(images_dir())
    stage = stage_initramfs(os.path.join(build_dir(), "initramfs-stage"), INIT)
    pack_initramfs(stage, initramfs)
    with open(stamp, "w") as fh:
        fh.write(source)
    return initramfs


def lab_name(name):
    return name if name.startswith("lab-") else "lab-" + name


def console_path(name):
    return os.path.join(daemon.lab().dir, f"console-{name}.log")


CPUTUNE_KEYS = {"shares", "period", "quota", "global_period", "global_quota",
                "emulator_period", "emulator_quota", "iothread_period", "iothread_quota"}


def parse_cputune(spec):
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        k, sep, v = item.partition("=")
        if not sep or k not in CPUTUNE_KEYS:
            raise LabError(f"bad --cputune item {item!r}; use KEY=VALUE with KEY one of "
                           f"{', '.join(sorted(CPUTUNE_KEYS))}")
        try:
            int(v)
        except ValueError:
            raise LabError(f"bad --cputune value {item!r}: not an integer")
        out[k] = v
    return out


def spin_image(host=DEVELOPMENT_HOST):
    """The spin boot sector; on the development host it is assembled here
    (the test host has it built in its build root)."""
    spin_boot = spin_boot_path()
    if host.images_prebuilt:
        return spin_boot
    if (not os.path.exists(spin_boot)
            or os.path.getmtime(spin_boot) < os.path.getmtime(SPIN_SRC)):
        mkdirs(images_dir())
        obj = spin_boot + ".o"
        run(["as", "--32", "-o", obj, SPIN_SRC], quiet=True)
        run(["ld", "-m", "elf_i386", "-Ttext", "0x7c00", "--oformat", "binary",
             "-o", spin_boot + ".tmp", obj], quiet=True)
        os.unlink(obj)
        if os.path.getsize(spin_boot + ".tmp") != 512:
            raise LabError(f"{SPIN_SRC} did not assemble into a 512-byte boot sector")
        os.replace(spin_boot + ".tmp", spin_boot)
    return spin_boot


def balloon_build_commands(src, out):
    """The commands that build the balloon guest from src into out (an ELF
    multiboot kernel that QEMU loads with -kernel); the test host's build
    root runs the same."""
    obj = out + ".o"
    return [["gcc", "-m32", "-O2", "-Wall", "-Wextra", "-Werror", "-ffreestanding", "-fno-pic",
             "-fno-stack-protector", "-fno-toplevel-reorder", "-nostdlib", "-c", "-o", obj, src],
            ["ld", "-m", "elf_i386", "-N", "--no-warn-rwx-segments", "-Ttext", "0x100000",
             "-e", "_start", "-o", out, obj],
            ["rm", "-f", obj]]


def balloon_image(host=DEVELOPMENT_HOST):
    """The balloon guest's kernel; on the development host it is built here
    (the test host has it built in its build root)."""
    balloon = balloon_path()
    if host.images_prebuilt:
        return balloon
    if not os.path.exists(balloon) or os.path.getmtime(balloon) < os.path.getmtime(BALLOON_SRC):
        mkdirs(images_dir())
        for argv in balloon_build_commands(BALLOON_SRC, balloon + ".tmp"):
            run(argv, quiet=True)
        os.replace(balloon + ".tmp", balloon)
    return balloon


def _boots_spin(workload, host):
    return workload == "spin" or (not host.boots_os and workload in ("busy", "mixed"))


def _ready_by_threads(workload, host):
    """Whether a guest counts as ready once QEMU has its vCPU threads,
    with no line on its console."""
    return workload == "spin" or (not host.boots_os and workload != "balloon")


def domain_xml(name, vcpus=1, workload="busy", memory=96, cputune=None, max_vcpus=None,
               kernel=None, host=DEVELOPMENT_HOST):
    tune = "".join(f"<{k}>{v}</{k}>" for k, v in (cputune or {}).items())
    vcpu = (f"<vcpu placement='static' current='{vcpus}'>{max_vcpus}</vcpu>"
            if max_vcpus and max_vcpus > vcpus else f"<vcpu placement='static'>{vcpus}</vcpu>")
    disk = ""
    if workload not in WORKLOADS:
        raise LabError(f"unknown guest workload {workload!r}; known: {', '.join(WORKLOADS)}")
    _WORKLOADS[name] = workload
    balloon = "<memballoon model='none'/>"
    if workload == "balloon":
        boot = f"<kernel>{escape(balloon_image(host))}</kernel>"
        balloon = "<memballoon model='virtio'/>"
    elif not host.boots_os or workload == "spin":
        boot = "<boot dev='hd'/>"
        if _boots_spin(workload, host):
            img = os.path.join(daemon.lab().dir, f"{name}-spin.img")
            mkdirs(daemon.lab().dir)
            shutil.copyfile(spin_image(host), img)
            disk = (f"<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
                    f"<source file='{escape(img)}'/><target dev='hda' bus='ide'/></disk>")
    else:
        from ..build import kernel as kmod
        kernel = kernel or kmod.image(patched=True)
        initrd = build_initramfs()
        boot = (f"<kernel>{escape(kernel)}</kernel>\n    <initrd>{escape(initrd)}</initrd>\n"
                f"    <cmdline>console=ttyS0 quiet panic=-1 unsteal.workload={workload}"
                f"</cmdline>")
    return f"""<domain type='qemu'>
  <name>{escape(name)}</name>
  <memory unit='MiB'>{memory}</memory>
  {vcpu}
  {'<cputune>' + tune + '</cputune>' if tune else ''}
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    {boot}
  </os>
  <features><acpi/><apic/></features>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <serial type='file'><source path='{escape(console_path(name))}'/><target port='0'/></serial>
    <console type='file'><source path='{escape(console_path(name))}'/><target type='serial' port='0'/></console>
    {balloon}
    {disk}
  </devices>
</domain>
"""


def create(name, vcpus=1, workload="busy", memory=96, cputune=None, max_vcpus=None,
           persistent=False, wait_ready=True, host=DEVELOPMENT_HOST):
    """Start a lab guest (transient unless persistent) and wait for its init to run."""
    name = lab_name(name)
    xml = domain_xml(name, vcpus, workload, memory, cputune, max_vcpus, host=host)
    path = os.path.join(daemon.lab().dir, f"{name}.xml")
    mkdirs(daemon.lab().dir)
    with open(path, "w") as fh:
        fh.write(xml)
    if os.path.exists(console_path(name)):
        os.unlink(console_path(name))
    if persistent:
        daemon.virsh(["define", path], capture=True)
        daemon.virsh(["start", name], capture=True)
    else:
        daemon.virsh(["create", path], capture=True)
    if wait_ready:
        wait_console(name, READY, host=host)
    return name


def wait_console(name, text, timeout=120, host=DEVELOPMENT_HOST):
    t0 = time.monotonic()
    if text == READY and _ready_by_threads(_WORKLOADS.get(name), host):
        return _wait_vcpu_threads(name, timeout)
    path = console_path(name)
    while time.monotonic() - t0 < timeout:
        try:
            with open(path, errors="replace") as fh:
                if text in fh.read():
                    return
        except OSError:
            pass
        time.sleep(0.5)
    tail = ""
    try:
        tail = open(path, errors="replace").read()[-2000:]
    except OSError:
        pass
    raise LabError(f"guest {name} did not print {text!r} within {timeout}s; console:\n{tail}")


def _wait_vcpu_threads(name, timeout):
    """A guest without OS (test host, 'spin'): ready once QEMU runs a thread for
    every online vCPU and, for a busy guest, every one of them spins (the
    firmware runs first, on vCPU 0 only, and takes seconds under nested TCG)."""
    from .measure import schedstat
    want = None
    busy = _WORKLOADS.get(name, "idle") != "idle"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if want is None:
                p = daemon.virsh(["vcpucount", name, "--live", "--current"], check=False,
                                 capture=True)
                want = int(p.stdout.strip()) if p.returncode == 0 else None
            tids = vcpu_tids(name)
            if want and len(tids) >= want:
                if not busy:
                    return
                pid = qemu_pid(name)
                a = {i: schedstat(pid, t) for i, t in tids.items()}
                time.sleep(1)
                b = {i: schedstat(pid, t) for i, t in tids.items()}
                # Running or waiting to run for most of the second: spinning.
                if all(sum(b[i]) - sum(a[i]) > 0.5e9 for i in tids):
                    return
                continue
        except (LabError, ValueError, OSError):
            pass
        time.sleep(0.2)
    raise LabError(f"guest {name}: QEMU did not start (and spin) its vCPU threads "
                   f"within {timeout}s")


def qemu_pid(name):
    try:
        return int(open(os.path.join(daemon.lab().rundir, "qemu", f"{name}.pid")).read().strip())
    except (OSError, ValueError):
        raise LabError(f"domain {name} is not running in the lab")


def vcpu_tids(name):
    """{vcpu index: TID} read from QEMU's thread names ('CPU N/TCG' or 'CPU N/KVM')."""
    pid = qemu_pid(name)
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        except OSError:
            continue
        if comm.startswith("CPU ") and "/" in comm:
            out[int(comm[4:].split("/")[0])] = int(tid)
    return dict(sorted(out.items()))


def command(args):
    name = lab_name(args.name)
    tune = parse_cputune(args.cputune)
    if args.action == "xml":
        print(domain_xml(name, args.vcpus, args.workload, args.memory, tune))
    elif args.action == "define":
        path = os.path.join(daemon.lab().dir, f"{name}.xml")
        mkdirs(daemon.lab().dir)
        with open(path, "w") as fh:
            fh.write(domain_xml(name, args.vcpus, args.workload, args.memory, tune))
        daemon.virsh(["define", path])
    elif args.action == "start":
        daemon.virsh(["start", name])
        wait_console(name, "unsteal-guest: ready")
    elif args.action == "create":
        create(name, args.vcpus, args.workload, args.memory, tune)
        print(f"{name} running; vCPU threads: {vcpu_tids(name)}")
    elif args.action == "destroy":
        daemon.virsh(["destroy", name], check=False)
