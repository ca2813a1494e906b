#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# unsteal test host: PID 1 without systemd (unsteal.cgroup=v2|v1-comounted),
# installed as /usr/local/sbin/unsteal-init (docs/testhost.md).  Mounts what
# a host has and the cgroup hierarchies of the variant, starts the runner
# /usr/local/sbin/unsteal-testhost-run, reaps orphans until it ends, and
# reboots (QEMU runs with -no-reboot, so that ends the run).
import ctypes, os, subprocess

def sh(*cmd):
    subprocess.run(cmd, check=False)

os.makedirs("/proc", exist_ok=True)
sh("mount", "-t", "proc", "proc", "/proc")
cmdline = open("/proc/cmdline").read().split()
mode = next((a.split("=", 1)[1] for a in cmdline if a.startswith("unsteal.cgroup=")), "v2")
sh("mount", "-o", "remount,rw", "/")
sh("mount", "-t", "sysfs", "sys", "/sys")
sh("mount", "-t", "devtmpfs", "dev", "/dev")
for d in ("/dev/pts", "/dev/shm"):
    os.makedirs(d, exist_ok=True)
sh("mount", "-t", "devpts", "-o", "ptmxmode=0666", "devpts", "/dev/pts")
sh("mount", "-t", "tmpfs", "-o", "mode=1777", "shm", "/dev/shm")
sh("mount", "-t", "tmpfs", "-o", "mode=0755", "run", "/run")
sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmp", "/tmp")
if mode == "v2":
    sh("mount", "-t", "cgroup2", "-o", "nsdelegate", "cgroup2", "/sys/fs/cgroup")
elif mode == "v1-comounted":
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "cgroup", "/sys/fs/cgroup")
    for ctrls in ("cpu,cpuacct", "cpuset", "memory", "devices", "freezer", "pids", "blkio"):
        d = "/sys/fs/cgroup/" + ctrls
        os.makedirs(d, exist_ok=True)
        sh("mount", "-t", "cgroup", "-o", ctrls, ctrls, d)
    os.symlink("cpu,cpuacct", "/sys/fs/cgroup/cpu")
    os.symlink("cpu,cpuacct", "/sys/fs/cgroup/cpuacct")
else:
    print(f"unsteal-init: unknown unsteal.cgroup={mode}", flush=True)
sh("hostname", "unsteal-testhost")
runner = subprocess.Popen(["/usr/local/sbin/unsteal-testhost-run"])
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        break
    if pid == runner.pid:
        break
os.sync()
ctypes.CDLL(None).reboot(0x01234567)
