# SPDX-License-Identifier: GPL-2.0-or-later
"""Where this host mounts its cgroup hierarchies.

One reading of /proc/self/mounts for the lab daemon (which groups it may
have to clean up), the benchmarks (the v1 cpu hierarchy they build their
groups in) and the integration tests (where a controller's files are).
"""

import collections
import os

Mount = collections.namedtuple("Mount", "path fstype options")


def mounts():
    """Every cgroup (v1) and cgroup2 mount, in /proc/self/mounts order."""
    out = []
    with open("/proc/self/mounts") as fh:
        for line in fh:
            _, path, fstype, opts = line.split()[:4]
            if fstype in ("cgroup", "cgroup2"):
                out.append(Mount(path, fstype, frozenset(opts.split(","))))
    return out


def v1_hierarchy(controller):
    """Mount point of the v1 hierarchy that has the controller, or None."""
    for m in mounts():
        if m.fstype == "cgroup" and controller in m.options:
            return m.path
    return None


def hierarchy(controller):
    """Mount point of the hierarchy with the controller: its v1 hierarchy, else
    the v2 one if it offers the controller; None if the host has neither."""
    path = v1_hierarchy(controller)
    if path:
        return path
    v2 = next((m.path for m in mounts() if m.fstype == "cgroup2"), None)
    try:
        if v2 and controller in open(os.path.join(v2, "cgroup.controllers")).read().split():
            return v2
    except OSError:
        pass
    return None
