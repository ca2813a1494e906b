# SPDX-License-Identifier: GPL-2.0-or-later
"""The Debian releases a test host can be made of, and where each one's files go.

A release names the Debian suite of the image's roots and the libvirt stack
built for it: Debian 13 (trixie) with the 11.3.0 series, the test host of
tools/lab test, and Debian 12 (bookworm) with the 9.0.0 port, booted by
hand ('tools/lab testhost --release debian-12', docs/testhost.md).  The
default release keeps the paths the test host always had
(_build/testhost, _build/logs/testhost-*.log); another release's carry its
name (_build/testhost-debian-12, _build/logs/testhost-debian-12-*.log).
"""

import os

from ..common import LabError, build_dir, cache_dir, logs_dir
from ..stack import stacks



def testhost_dir():
    """The default release's files (another release's: Release.dir)."""
    return os.path.join(build_dir(), "testhost")


def testhost_cache_dir():
    """The test host's cached roots."""
    return os.path.join(cache_dir(), "testhost")


class Release:
    """One Debian release of the test host."""

    def __init__(self, name, suite, stack_key, default=False, unsteal_deb=False):
        self.name = name
        self.suite = suite
        self.stack_key = stack_key
        self.default = default
        # unsteal's own .deb ('tools/lab package unsteal') is built for
        # trixie; an image of another release goes without it.
        self.unsteal_deb = unsteal_deb

    def __repr__(self):
        return f"Release({self.name!r})"

    @property
    def stack(self):
        """The libvirt stack built into the image."""
        return stacks.get(self.stack_key)

    @property
    def dir(self):
        return testhost_dir() if self.default else f"{testhost_dir()}-{self.name}"

    @property
    def buildroot(self):
        return os.path.join(self.dir, "buildroot")

    @property
    def hostroot(self):
        return os.path.join(self.dir, "root")

    @property
    def image(self):
        return os.path.join(self.dir, "testhost.img")

    @property
    def debian_kernel(self):
        return os.path.join(self.dir, "vmlinuz-debian")

    @property
    def debian_initrd(self):
        return os.path.join(self.dir, "initrd-debian")

    def log(self, what):
        """_build/logs/testhost-WHAT.log, with the release's name unless it
        is the default one."""
        return os.path.join(logs_dir(), "testhost-" + ("" if self.default else self.name + "-")
                            + what + ".log")

    def describe(self):
        return f"Debian {self.name.split('-')[1]} ({self.suite}), libvirt {self.stack.version}"


RELEASES = {
    "debian-13": Release("debian-13", "trixie", "libvirt", default=True, unsteal_deb=True),
    "debian-12": Release("debian-12", "bookworm", "libvirt-9.0"),
}
DEFAULT = RELEASES["debian-13"]


def get(name):
    """The release called name (None: the default one)."""
    if name is None:
        return DEFAULT
    if name not in RELEASES:
        raise LabError(f"unknown test-host release {name!r}; one of {', '.join(RELEASES)}")
    return RELEASES[name]
