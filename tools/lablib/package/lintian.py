# SPDX-License-Identifier: GPL-2.0-or-later
"""lintian on a package build, the same way for every build of tools/lab package.

lintian runs in the build's root (the suite's own lintian), as the build
user, on the build's .changes (and whatever else the build names), with
--info --display-level '>=info' --fail-on none: every tag lands in the log
and lintian's exit status says only whether lintian itself worked.  The
build decides: each error or warning whose tag the build explains (a dict
of tag: why it is not the build's to fix) is named with its reason, any
other one fails the build with its line.
"""

import os
import re

from ..common import ROOT, LabError, logs_dir, step


def log_path(tag):
    """Where lintian's log of the build TAG goes: beside the build's other logs."""
    return os.path.join(logs_dir(), f"package-{tag}-lintian.log")


def run_lintian(root, tag, files="*.changes", cwd="/build", binds=(), what="package"):
    """lintian in root (a chroot.Root) as the build user, in cwd, on files (a
    shell word list); returns (log path, {'E': errors, 'W': warnings,
    'I': info})."""
    lint_log = log_path(tag)
    p = root.run(f"cd {cwd} && lintian --info --display-level '>=info' --fail-on none "
                 + files, user="builder", log=lint_log, check=False, binds=binds)
    if p.returncode != 0:
        # With --fail-on none no tag makes lintian fail: it did not run.
        raise LabError(f"lintian failed ({p.returncode}); see {os.path.relpath(lint_log, ROOT)}")
    tags = counts(lint_log)
    step(f"{what}: lintian: {tags['E']} error(s), {tags['W']} warning(s), {tags['I']} "
         f"info; {os.path.relpath(lint_log, ROOT)}")
    return lint_log, tags


def counts(lint_log):
    """{'E': errors, 'W': warnings, 'I': info} of a lintian log."""
    with open(lint_log, errors="replace") as fh:
        text = fh.read()
    return {k: len(re.findall(rf"^{k}: ", text, re.M)) for k in ("E", "W", "I")}


def unexplained(lint_log, explained):
    """The error and warning lines of a lintian log whose tag is not in
    explained, and the tags of those that are.  A line names its package
    as 'PKG', 'PKG source', 'PKG changes' ...; an error or warning line
    whose tag cannot be read is unexplained."""
    bad, found = [], set()
    with open(lint_log, errors="replace") as fh:
        for line in fh:
            if not line.startswith(("E: ", "W: ")):
                continue
            m = re.match(r"^[EW]: [^:\s][^:]*: (\S+)", line)
            if m and m.group(1) in explained:
                found.add(m.group(1))
            else:
                bad.append(line.rstrip("\n"))
    return bad, sorted(found)


def check(lint_log, explained, what="package", label="explained"):
    """Fails (LabError, with the offending lines) on any error or warning of
    lint_log whose tag explained does not explain; names each explained one
    as 'LABEL: REASON'.  Returns the explained tags lintian gave."""
    bad, found = unexplained(lint_log, explained)
    if bad:
        raise LabError(f"lintian: {len(bad)} error(s) or warning(s) not explained "
                       f"({os.path.relpath(lint_log, ROOT)}):\n" + "\n".join(bad[:20])
                       + (f"\n... and {len(bad) - 20} more" if len(bad) > 20 else ""))
    for t in found:
        step(f"{what}: lintian: {t}: {label}: {explained[t]}")
    return found
