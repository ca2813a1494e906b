# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab check kernel: checkpatch --strict on every patch, and the config matrix.

checkpatch() runs scripts/checkpatch.pl --strict of the kernel work tree
(the series does not touch scripts/) on each patch of the series.  A finding fails the check unless
kernel-patches/checkpatch.accepted lists it (patch, checkpatch type, how
many, and why the series keeps it); an accepted finding that is gone fails
it too, so the list stays true.

The config matrix builds the patched kernel in configurations other than
the lab's: lab.config with each kernel-patches/config/matrix-NAME.config
on top (NUMA off; NUMA without page migration; KSM with the memory
controller).  configure_matrix() only resolves each configuration and
checks that it has what its fragment asks for (seconds: what tools/lab
test runs); build_matrix() also builds each bzImage ('tools/lab check
kernel --config-matrix'; several minutes each on 2 cores, every object
compiled again because each configuration changes autoconf.h), and fails
a configuration that builds with a compiler warning.
"""

import glob
import os
import re

from ..common import LabError, ROOT, build_dir, logs_dir, run, step
from ..stack import stacks
from . import kernel

ACCEPTED = "checkpatch.accepted"
# 'FILE:LINE: LEVEL:TYPE: message' of checkpatch --terse --show-types
FINDING_RE = re.compile(r"^.*?:\d+: (ERROR|WARNING|CHECK):(\w+): (.*)$")


def _worktree(stack_dir):
    from ..stack.patchqueue import ensure_worktree
    return ensure_worktree(stack_dir, quiet_reuse=True)


def read_accepted(stack_dir):
    """{(patch, TYPE): (count, reason)} from the stack's checkpatch.accepted."""
    path = os.path.join(stack_dir, ACCEPTED)
    accepted = {}
    if not os.path.exists(path):
        return accepted
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        if len(parts) < 4 or not parts[2].isdigit():
            raise LabError(f"{path}:{n}: want 'PATCH TYPE COUNT reason', got {line!r}")
        patch, kind, count, reason = parts
        if (patch, kind) in accepted:
            raise LabError(f"{path}:{n}: {kind} in {patch} is listed twice")
        accepted[(patch, kind)] = (int(count), reason)
    return accepted


def run_checkpatch(tree, patch):
    """checkpatch --strict on one patch file: [(LEVEL, TYPE, message)].

    checkpatch runs scripts/spdxcheck.py (Python, with ply and GitPython)
    on every new file; Debian's python3 has them (python3-ply, python3-git,
    tools/lab setup), so /usr/bin comes first on PATH.  A traceback from it
    is an error: the SPDX check would be skipped silently."""
    env = {"PATH": "/usr/bin:/bin:" + os.environ.get("PATH", "")}
    p = run(["perl", os.path.join(tree, "scripts", "checkpatch.pl"), "--strict", "--terse",
             "--show-types", "--no-summary", patch], cwd=tree, env=env, check=False,
            capture=True)
    if "Traceback" in p.stderr:
        raise LabError(f"checkpatch's helper failed on {os.path.basename(patch)}:\n"
                       + p.stderr.strip()[-800:])
    findings = []
    for line in p.stdout.splitlines():
        m = FINDING_RE.match(line)
        if m:
            findings.append(m.groups())
    if p.returncode != 0 and not findings:
        raise LabError(f"checkpatch failed on {os.path.basename(patch)} ({p.returncode}) "
                       f"without a finding:\n{(p.stdout + p.stderr).strip()[-800:]}")
    return findings


def checkpatch(stack_dir=None):
    """Every patch of the kernel series checkpatch --strict clean, but for the
    accepted findings; returns the number of patches checked."""
    from ..stack.patchqueue import read_series
    stack_dir = stack_dir or stacks.get("kernel").dir
    tree = _worktree(stack_dir)
    accepted = read_accepted(stack_dir)
    series = read_series(stack_dir)
    counts, problems = {}, []
    for name in series:
        for level, kind, msg in run_checkpatch(tree, os.path.join(stack_dir, name)):
            counts[(name, kind)] = counts.get((name, kind), 0) + 1
            if (name, kind) not in accepted:
                problems.append(f"{name}: {level}:{kind}: {msg}")
    for (name, kind), n in sorted(counts.items()):
        if (name, kind) in accepted:
            want, reason = accepted[(name, kind)]
            if n != want:
                problems.append(f"{name}: {n} {kind} finding(s), {ACCEPTED} accepts {want}")
            else:
                step(f"checkpatch: {name}: {n} {kind} accepted: {reason}")
    for (name, kind) in sorted(set(accepted) - set(counts)):
        problems.append(f"{ACCEPTED} accepts {kind} in {name}, which checkpatch no longer "
                        f"reports" + ("" if name in series else " (not in the series)"))
    if problems:
        raise LabError(f"checkpatch --strict on {os.path.relpath(stack_dir, ROOT)}:\n  "
                       + "\n  ".join(problems))
    step(f"checkpatch: {len(series)} patch(es) --strict clean "
         f"({sum(counts.values())} accepted finding(s), see {ACCEPTED})")
    return len(series)


def matrix():
    """The names of the config matrix: kernel-patches/config/matrix-NAME.config."""
    names = sorted(os.path.basename(p)[len("matrix-"):-len(".config")]
                   for p in glob.glob(os.path.join(kernel.CONFIG_DIR, "matrix-*.config")))
    if not names:
        raise LabError(f"no matrix-*.config in {os.path.relpath(kernel.CONFIG_DIR, ROOT)}")
    return names


def _outdir(name):
    return os.path.join(build_dir(),
                        "kernel-" + kernel.flavour_name(True, False, ("matrix-" + name,)))


def configure_matrix(stack_dir=None):
    """Each configuration of the matrix resolved on the patched tree and
    checked against its fragment (kernel.configure raises when an option
    did not take); returns their number."""
    wt = _worktree(stack_dir or stacks.get("kernel").dir)
    names = matrix()
    for name in names:
        kernel.configure(wt, _outdir(name), extra=("matrix-" + name,))
        step(f"kernel matrix: {name}: configuration as asked ({_outdir(name)}/.config)")
    return len(names)


def build_matrix():
    """Every configuration of the matrix built (bzImage) without a compiler
    warning (a stub missing in one configuration often shows as an unused
    or implicit declaration first); (built, failed)."""
    built, failed, names = 0, [], matrix()
    for name in names:
        log = os.path.join(logs_dir(), f"kernel-patched-matrix-{name}.log")
        step(f"kernel matrix: building {name} (log in {os.path.relpath(log, ROOT)})")
        try:
            kernel.build(patched=True, extra=("matrix-" + name,))
        except LabError as e:
            print(f"lab: kernel matrix: {name} does not build: {e}", flush=True)
            failed.append(name)
            continue
        warnings = [line.rstrip() for line in open(log) if ": warning:" in line]
        if warnings:
            print(f"lab: kernel matrix: {name} builds with {len(warnings)} compiler "
                  f"warning(s):\n  " + "\n  ".join(warnings[:10]), flush=True)
            failed.append(name)
        else:
            built += 1
    step(f"kernel matrix: {built} of {len(names)} configuration(s) build"
         + (f"; failed: {', '.join(failed)}" if failed else ""))
    return built, len(failed)
