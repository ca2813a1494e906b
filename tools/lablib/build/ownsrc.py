# SPDX-License-Identifier: GPL-2.0-or-later
"""Our own meson project (src/ and tests/) built under _build/unsteal-build."""

import os

from ..common import BUILD, ROOT, LabError, run, step
from . import mesonlog

BUILDDIR = os.path.join(BUILD, "unsteal-build")


def build():
    env = {"PATH": "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin"}
    # libvirt mode (unsteal --connect) and the exporter (unsteal exporter)
    # are part of what we test: require them.
    opts = [f"-Dlab_build_dir={BUILD}", "-Dlibvirt=enabled", "-Dexporter=enabled"]
    log = os.path.join(BUILD, "logs", "unsteal-meson-setup.log")
    if not os.path.exists(os.path.join(BUILDDIR, "build.ninja")):
        step(f"src: meson setup {BUILDDIR}")
        run(["meson", "setup", BUILDDIR, ROOT] + opts, env=env, quiet=True, log=log)
    else:
        run(["meson", "configure", BUILDDIR] + opts, env=env, quiet=True, log=log)
    step("src: ninja")
    run(["ninja", "-C", BUILDDIR], env=env, log=os.path.join(BUILD, "logs", "unsteal-build.log"))


def test(suites=None):
    """meson test on our project; returns (passed, failed)."""
    build()
    log = os.path.join(BUILD, "logs", "unsteal-test.log")
    cmd = ["meson", "test", "-C", BUILDDIR, "--no-rebuild", "--print-errorlogs"]
    for s in suites or []:
        cmd += ["--suite", s]
    step("tests: meson test (unit and integration; log in _build/logs/unsteal-test.log)")
    p = run(cmd, check=False, log=log, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    ok, fail = mesonlog.counts(log)
    with open(log) as fh:
        for line in fh:
            if " FAIL " in line or " TIMEOUT " in line or "ERROR" in line[:60]:
                print("  " + line.rstrip())
    if p.returncode != 0 and fail == 0:
        raise LabError(f"meson test failed without a summary; see {log}")
    return ok, fail
