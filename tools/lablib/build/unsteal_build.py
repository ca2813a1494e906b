# SPDX-License-Identifier: GPL-2.0-or-later
"""Our own meson project (src/ and tests/) built under _build/unsteal-build."""

import json
import os

from ..common import ROOT, LabError, build_dir, logs_dir, run, step
from . import mesonlog


def unsteal_builddir():
    """The build directory of src/ and tests/ for the lab."""
    return os.path.join(build_dir(), "unsteal-build")


def unit_builddir():
    """tools/lab test --tier unit: its own build directory, configured with
    what the machine has (no root to install the rest)."""
    return os.path.join(build_dir(), "unsteal-unit")


def build(builddir=None, required=True):
    """meson setup (once) and ninja in builddir (default: unsteal_builddir()).
    required: libvirt mode (unsteal --connect) and the exporter (unsteal
    exporter) are part of what the lab tests, so they must build; otherwise
    meson's 'auto'."""
    builddir = builddir or unsteal_builddir()
    env = {"PATH": "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin"}
    opts = [f"-Dlab_build_dir={build_dir()}"]
    if required:
        opts += ["-Dlibvirt=enabled", "-Dexporter=enabled"]
    name = os.path.basename(builddir)
    log = os.path.join(logs_dir(), f"{name}-meson-setup.log")
    if not os.path.exists(os.path.join(builddir, "build.ninja")):
        step(f"src: meson setup {builddir}")
        run(["meson", "setup", builddir, ROOT] + opts, env=env, quiet=True, log=log)
    else:
        run(["meson", "configure", builddir] + opts, env=env, quiet=True, log=log)
    step("src: ninja")
    run(["ninja", "-C", builddir], env=env, log=os.path.join(logs_dir(), f"{name}.log"))


def measurements_dir():
    """Where keep_measurements() keeps a run's figures."""
    return os.path.join(build_dir(), "measurements")


def keep_measurements(rows, name):
    """_build/measurements/NAME.json: the margins and measured figures of a
    run (the gate's figures, which it reports and never fails on by
    themselves; ci/README.md lists the smallest margins seen)."""
    os.makedirs(measurements_dir(), exist_ok=True)
    path = os.path.join(measurements_dir(), f"{name}.json")
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=1)
    step(f"tests: {len(rows)} margin and measured lines kept in {os.path.relpath(path, ROOT)}")


def test_unit():
    """tools/lab test --tier unit: the unit suite in unit_builddir(); no root,
    nothing of libvirt or the kernel built."""
    return test(suites=["unit"], builddir=unit_builddir(), required=False)


def test(suites=None, builddir=None, required=True, no_suites=None, part=""):
    """meson test on our project (all of it, the suites named, or all but
    no_suites) in builddir (default: unsteal_builddir()); returns Counts
    (mesonlog.results()).  part names a run of a part of the tests: its
    logs and figures then have names of their own (for part 'cpu-time':
    _build/logs/unsteal-build-cpu-time-test.log, meson-logs/testlog-cpu-time.json,
    _build/measurements/unsteal-build-cpu-time.json)."""
    builddir = builddir or unsteal_builddir()
    build(builddir, required)
    part = f"-{part}" if part else ""
    name = os.path.basename(builddir) + part
    log = os.path.join(logs_dir(), f"{name}-test.log")
    logbase = mesonlog.LOGBASE + part
    cmd = ["meson", "test", "-C", builddir, "--no-rebuild", "--print-errorlogs",
           "--logbase", logbase]
    for s in suites or []:
        cmd += ["--suite", s]
    for s in no_suites or []:
        cmd += ["--no-suite", s]
    what = ", ".join(list(suites or []) + [f"all but {s}" for s in no_suites or []])
    step(f"tests: meson test ({what or 'unit and integration'}; "
         f"log in {os.path.relpath(log, ROOT)})")
    p = run(cmd, check=False, log=log, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    counts = mesonlog.results(builddir, logbase)
    keep_measurements(mesonlog.measured(builddir, logbase), name)
    with open(log) as fh:
        for line in fh:
            if " FAIL " in line or " TIMEOUT " in line or "ERROR" in line[:60]:
                print("  " + line.rstrip())
    if p.returncode != 0 and not counts.failed:
        raise LabError(f"meson test failed ({mesonlog.describe(counts)}); see {log}")
    return counts
