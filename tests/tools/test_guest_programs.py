# SPDX-License-Identifier: GPL-2.0-or-later
"""The programs that run inside guests pass their linters.

Every file of tools/guest/ and tools/testhost/ is checked by its kind:
shell scripts (*.sh, busybox or POSIX sh) with shellcheck as sh, following
the files they source; Python programs (*.py) with pyflakes; systemd
units (*.service) with 'systemd-analyze verify', which needs no systemd
as PID 1 (the commands a unit starts exist in the test host's image only,
so 'is not executable' for them is not a finding); C programs (*.c,
the balloon guest's kernel) are built as the lab builds them
(guest.balloon_build_commands: gcc -m32 -ffreestanding with -Wall -Wextra
-Werror), and must come out as a multiboot image (its header 4-aligned in
the first 8 KiB, which is where QEMU's loader looks).  The boot sector
(*.S) is left to its assembler (guest.spin_image() checks its size); any
other file fails, as no check covers it.  The files the lab installs
(guest.py, kselftest.py, testhostimage.py) must be among those checked.

Each checker first runs on a broken file of its kind, written here, and
must find what is wrong with it.  shellcheck and pyflakes come with
'tools/lab setup' (sources.PACKAGES, group "lint").

Usage: test_guest_programs.py [DIR...]   (default: tools/guest tools/testhost)
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

tap.setup("unsteal-guest-programs-test-")
ok = tap.ok

from lablib.lab import guest  # noqa: E402
from lablib.testing import kselftest, testhostimage  # noqa: E402

DIRS = sys.argv[1:] or [os.path.join(tap.ROOT, "tools", d) for d in ("guest", "testhost")]
SETUP_HINT = "not installed; tools/lab setup installs it"


def pyflakes_cmd():
    for name in ("pyflakes3", "pyflakes"):
        if shutil.which(name):
            return [name]
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import pyflakes"], capture_output=True).returncode == 0:
            return [py, "-m", "pyflakes"]
    return None


def shell_findings(path):
    p = subprocess.run(["shellcheck", "--norc", "--shell=sh", "--external-sources",
                        "--format=gcc", path], capture_output=True, text=True, timeout=120)
    return (p.stdout + p.stderr).strip() if p.returncode else ""


def python_findings(path):
    p = subprocess.run(PYFLAKES + [path], capture_output=True, text=True, timeout=120)
    return (p.stdout + p.stderr).strip() if p.returncode else ""


def unit_findings(path):
    """What systemd-analyze says about the unit, less the missing programs."""
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", path],
                       capture_output=True, text=True, timeout=120)
    name = os.path.basename(path)
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if name in ln]
    found = [ln for ln in lines if not ("Command /" in ln and "is not executable" in ln)]
    if p.returncode and not lines:
        found.append(f"systemd-analyze verify failed ({p.returncode}): "
                     f"{(p.stdout + p.stderr).strip()}")
    return "\n".join(found)


MULTIBOOT_MAGIC = (0x1badb002).to_bytes(4, "little")


def c_findings(path):
    """Build errors and warnings, or an image without a multiboot header."""
    with tempfile.TemporaryDirectory(prefix="unsteal-guest-c-") as d:
        out = os.path.join(d, "guest.elf")
        for argv in guest.balloon_build_commands(path, out):
            p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if p.returncode:
                return f"{' '.join(argv)}:\n{(p.stdout + p.stderr).strip()}"
        with open(out, "rb") as fh:
            head = fh.read(8192)
        at = head.find(MULTIBOOT_MAGIC)
        while at >= 0 and at % 4:
            at = head.find(MULTIBOOT_MAGIC, at + 1)
        if at < 0:
            return "no multiboot header (4-aligned) in the first 8 KiB of the image"
    return ""


CHECKERS = {
    ".sh": ("shellcheck", "shellcheck", shell_findings),
    ".py": ("pyflakes", None, python_findings),
    ".service": ("systemd-analyze verify", "systemd-analyze", unit_findings),
    ".c": ("the guest kernel build", "gcc", c_findings),
}
PYFLAKES = pyflakes_cmd()


def available(ext):
    tool = CHECKERS[ext][1]
    return PYFLAKES is not None if ext == ".py" else shutil.which(tool) is not None


# 1. Every checker finds what is wrong with a broken file of its kind.
BROKEN = {
    "broken.sh": "#!/bin/sh\n# shellcheck shell=sh\ndir=$1\ncd $dir || exit\n[ -n $x ]\n",
    "broken.py": "import os\nprint(undefined_name)\n",
    "broken.service": "[Unit]\nDescription=broken\n\n[Service]\nType=oneshot\n"
                      "ExecStart=/bin/true\nExecStrat=/bin/false\n",
    # builds, but with a warning, and without a multiboot header
    "broken.c": "void _start(void);\nvoid _start(void) { int unused; for (;;); }\n",
}
with tempfile.TemporaryDirectory(prefix="unsteal-guest-programs-") as d:
    for name, text in BROKEN.items():
        ext = os.path.splitext(name)[1]
        label = CHECKERS[ext][0]
        if not available(ext):
            ok(False, f"{label} is installed", f"{label}: {SETUP_HINT}")
            continue
        path = os.path.join(d, name)
        with open(path, "w") as fh:
            fh.write(text)
        found = CHECKERS[ext][2](path)
        ok(found != "", f"{label} finds the faults of a broken {ext} file", found)

# 2. The files the lab installs are the ones checked here.
installed = [guest.PREAMBLE, guest.INIT, kselftest.INIT] + [
    os.path.join(testhostimage.PROGRAMS, f[0]) for f in testhostimage.PROGRAM_FILES]
checked = sorted(os.path.realpath(os.path.join(d, f)) for d in DIRS
                 for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))
missing = [p for p in installed if os.path.realpath(p) not in checked]
if not sys.argv[1:]:
    ok(not missing, "every guest program the lab installs is checked here",
       "\n".join(missing))

# 3. Each guest program passes its checker.
for path in checked:
    rel = os.path.relpath(path, tap.ROOT)
    ext = os.path.splitext(path)[1]
    if ext == ".S":
        ok(True, f"{rel} # SKIP assembled and size-checked by guest.spin_image()")
        continue
    if ext not in CHECKERS:
        ok(False, f"{rel}: a checker knows its kind",
           f"no checker for {ext or 'files without a suffix'}; known: "
           f"{', '.join(sorted(CHECKERS))}")
        continue
    label = CHECKERS[ext][0]
    if not available(ext):
        ok(False, f"{rel}: {label}", f"{label}: {SETUP_HINT}")
        continue
    found = CHECKERS[ext][2](path)
    ok(not found, f"{rel}: {label} finds nothing", found)

sys.exit(tap.end())
