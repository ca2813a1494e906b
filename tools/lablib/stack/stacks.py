# SPDX-License-Identifier: GPL-2.0-or-later
"""The project's patch stacks, each one object loaded once from its BASE file.

A stack is a directory with a BASE (the pinned Debian source package) and a
series.  tools/lab names it by its key (libvirt, libvirt-9.0, kernel); BASE's
name= names its work tree (_build/src/NAME) and package= says which project
it patches, and so how it is built and packaged.

Each project has one default stack: the one a command uses when no stack is
named, and the one that keeps the lab's first, unsuffixed paths
(_build/prefix, _build/lab).  Any other stack's paths carry its key
(_build/prefix-libvirt-9.0, _build/lab-libvirt-9.0), so builds of several
bases of one project live side by side.
"""

import functools
import os

from .. import config
from ..common import LabError, ROOT, build_dir, read_kv

# key, directory (relative to the repository), whether it is its project's
# default.  Everything else about a stack comes from its BASE file.
DECLARED = (
    ("libvirt", "libvirt-patches/debian-13", True),
    ("libvirt-9.0", "libvirt-patches/debian-12", False),
    ("kernel", "kernel-patches", True),
)


class Stack:
    """One patch stack: its key, its directory and its BASE fields."""

    def __init__(self, key, directory, default=False):
        self.key = key
        self.dir = directory
        self.default = default
        self.base = read_kv(os.path.join(directory, "BASE"))

    def __repr__(self):
        return f"Stack({self.key!r}, {self.dir!r})"

    @property
    def name(self):
        """BASE's name=: the work tree's name, _build/src/NAME."""
        return self.base["name"]

    @property
    def package(self):
        """BASE's package=: the Debian source package, libvirt or linux."""
        return self.base["package"]

    @property
    def version(self):
        return self.base["version"]

    @property
    def rel(self):
        """The directory as the operator reads it: relative to the repository
        when it lies inside it (libvirt-patches/debian-12)."""
        rel = os.path.relpath(self.dir, ROOT)
        return self.dir if rel.startswith("..") else rel

    @property
    def worktree(self):
        return os.path.join(build_dir(), "src", self.name)

    @property
    def suffix(self):
        """The tail of the stack's own _build paths: '' for its project's
        default stack, '-KEY' for any other."""
        return "" if self.default else f"-{self.key}"


@functools.lru_cache(maxsize=None)
def known():
    """Every declared stack, in declaration order."""
    return tuple(Stack(key, os.path.join(ROOT, rel), default)
                 for key, rel, default in DECLARED)


def keys():
    return [s.key for s in known()]


def get(key):
    for s in known():
        if s.key == key:
            return s
    raise LabError(f"{key!r} is not a stack; stacks: {' '.join(keys())}")


def of_package(package):
    """The stacks of one project (BASE's package=), in declaration order."""
    return [s for s in known() if s.package == package]


def default(package):
    """The default stack of a project: libvirt's 11.3.0 stack, the kernel's."""
    return next(s for s in of_package(package) if s.default)


def at(directory):
    """The stack in a directory: a declared one, or one loaded from any
    directory holding a BASE (its key is then the directory itself)."""
    real = os.path.realpath(directory)
    for s in known():
        if os.path.realpath(s.dir) == real:
            return s
    return Stack(directory, directory)


def lab_libvirt(cfg=None):
    """The libvirt stack whose build the lab daemon, virsh, guests, the demo
    and the integration tests use: the configuration's libvirt_stack
    (UNSTEAL_LIBVIRT_STACK, config.py), else libvirt's default stack."""
    key = (cfg or config.get()).libvirt_stack
    if key is None:
        return default("libvirt")
    names = [s.key for s in of_package("libvirt")]
    if key not in names:
        raise LabError(f"UNSTEAL_LIBVIRT_STACK={key} is not a libvirt stack; "
                       f"use one of: {' '.join(names)}")
    return get(key)
