# SPDX-License-Identifier: GPL-2.0-or-later
"""Our own meson project (src/ and tests/) built under _build/unsteal-build."""

import json
import os

from ..common import BUILD, ROOT, LabError, run, step
from . import mesonlog

BUILDDIR = os.path.join(BUILD, "unsteal-build")
# tools/lab test --tier unit: its own build directory, configured with what
# the machine has (no root to install the rest)
UNIT_BUILDDIR = os.path.join(BUILD, "unsteal-unit")


def build(builddir=BUILDDIR, required=True):
    """meson setup (once) and ninja.  required: libvirt mode (unsteal
    --connect) and the exporter (unsteal exporter) are part of what the lab
    tests, so they must build; otherwise meson's 'auto'."""
    env = {"PATH": "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin"}
    opts = [f"-Dlab_build_dir={BUILD}"]
    if required:
        opts += ["-Dlibvirt=enabled", "-Dexporter=enabled"]
    name = os.path.basename(builddir)
    log = os.path.join(BUILD, "logs", f"{name}-meson-setup.log")
    if not os.path.exists(os.path.join(builddir, "build.ninja")):
        step(f"src: meson setup {builddir}")
        run(["meson", "setup", builddir, ROOT] + opts, env=env, quiet=True, log=log)
    else:
        run(["meson", "configure", builddir] + opts, env=env, quiet=True, log=log)
    step("src: ninja")
    run(["ninja", "-C", builddir], env=env, log=os.path.join(BUILD, "logs", f"{name}.log"))


MEASUREMENTS = os.path.join(BUILD, "measurements")


def keep_measurements(rows, name):
    """_build/measurements/NAME.json: the margins and measured figures of a
    run (the gate's figures, which it reports and never fails on by
    themselves; ci/README.md lists the smallest margins seen)."""
    os.makedirs(MEASUREMENTS, exist_ok=True)
    path = os.path.join(MEASUREMENTS, f"{name}.json")
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=1)
    step(f"tests: {len(rows)} margin and measured lines kept in {os.path.relpath(path, ROOT)}")


def test_unit():
    """tools/lab test --tier unit: the unit suite in UNIT_BUILDDIR; no root,
    nothing of libvirt or the kernel built."""
    return test(suites=["unit"], builddir=UNIT_BUILDDIR, required=False)


def test(suites=None, builddir=BUILDDIR, required=True):
    """meson test on our project (all of it, or the suites named); returns
    Counts (mesonlog.results())."""
    build(builddir, required)
    log = os.path.join(BUILD, "logs", f"{os.path.basename(builddir)}-test.log")
    cmd = ["meson", "test", "-C", builddir, "--no-rebuild", "--print-errorlogs"]
    for s in suites or []:
        cmd += ["--suite", s]
    step(f"tests: meson test ({', '.join(suites) if suites else 'unit and integration'}; "
         f"log in {os.path.relpath(log, ROOT)})")
    p = run(cmd, check=False, log=log, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    counts = mesonlog.results(builddir)
    keep_measurements(mesonlog.measured(builddir), os.path.basename(builddir))
    with open(log) as fh:
        for line in fh:
            if " FAIL " in line or " TIMEOUT " in line or "ERROR" in line[:60]:
                print("  " + line.rstrip())
    if p.returncode != 0 and not counts.failed:
        raise LabError(f"meson test failed ({mesonlog.describe(counts)}); see {log}")
    return counts
