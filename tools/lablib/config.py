# SPDX-License-Identifier: GPL-2.0-or-later
"""The lab's configuration, read from the environment once, and the modes
of qemu.conf's vcpu_cgroup that the lab sets.

The entry point (tools/lab's commands.main(), tests/integration/labtest.py,
the unit tests' tap.py) calls load() before it runs a command; every module
asks get() for the one Config when one of its functions is called, never
when it is imported (tests/tools/test_config_import.py checks this), so
what a module sees does not depend on when it was imported.  No other
module reads the environment for configuration.  The variables are an
interface that tests/meson.build and the test host's runner set
(docs/lab.md):

  UNSTEAL_BUILD           the build directory (default: _build in the checkout)
  UNSTEAL_CACHE           the download cache (default: $XDG_CACHE_HOME/unsteal,
                          XDG_CACHE_HOME defaulting to ~/.cache)
  UNSTEAL_LIBVIRT_STACK   the key of the libvirt stack whose build the lab
                          daemon, guests and integration tests use (default:
                          libvirt's default stack; stacks.lab_libvirt() turns
                          the key into its Stack)
  UNSTEAL_LIBVIRT_PREFIX  run the libvirt installed there instead of that
                          stack's build (the test host sets / for Debian's
                          packages)
  UNSTEAL_TESTHOST=1      the tests run inside the test host (tools/lab
                          testhost); read by tests/integration/labtest.py
  UNSTEAL_TESTHOST_LANES  how many test host rows tools/lab test boots at
                          once (testhost.lanes(), which checks it; default:
                          two, one on a 1-CPU host)
  UNSTEAL_BIN             the analyser the integration tests run (set by
                          tests/meson.build)

Imports nothing from lablib: every module may import it.
"""

import contextlib
import dataclasses
import os

# The checkout: where this file is, not configuration.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# qemu.conf's vcpu_cgroup (the libvirt series): tools/lab start --vcpu-cgroup,
# and the modes the demo and the benchmarks compare.  per-domain, libvirt's
# default (stock libvirt's placement), comes first.
VCPU_CGROUP_MODES = ("per-domain", "per-host")


@dataclasses.dataclass(frozen=True)
class Config:
    root: str
    build: str
    cache: str
    libvirt_stack: str = None   # a libvirt stack's key; None: libvirt's default (stacks.py)
    libvirt_prefix: str = None  # None: the build of libvirt_stack (libvirt.lab_prefix())
    lab_dir: str = None         # the lab daemon's records; None: daemon.lab_dir() of the stack
    testhost: bool = False
    testhost_lanes: str = None  # as given; None: testhost.lanes()'s default
    unsteal_bin: str = ""

    @property
    def sources(self):
        return os.path.join(self.cache, "sources")

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def from_environ(environ):
    """The Config that the variables in environ (a mapping) describe."""
    xdg = environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return Config(
        root=ROOT,
        build=environ.get("UNSTEAL_BUILD", os.path.join(ROOT, "_build")),
        cache=environ.get("UNSTEAL_CACHE", os.path.join(xdg, "unsteal")),
        libvirt_stack=environ.get("UNSTEAL_LIBVIRT_STACK"),
        libvirt_prefix=environ.get("UNSTEAL_LIBVIRT_PREFIX") or None,
        testhost=environ.get("UNSTEAL_TESTHOST") == "1",
        testhost_lanes=environ.get("UNSTEAL_TESTHOST_LANES"),
        unsteal_bin=environ.get("UNSTEAL_BIN", ""),
    )


_current = None


def load(environ=None):
    """Read the environment (os.environ unless given) and make it the configuration."""
    global _current
    _current = from_environ(os.environ if environ is None else environ)
    return _current


def get():
    """The configuration; read from os.environ on first use when no entry point loaded it."""
    return _current or load()


@contextlib.contextmanager
def using(cfg):
    """Make cfg the configuration for a block: the control-plane benchmark runs
    the lab daemon from stock libvirt's prefix.  The root, build and cache
    directories stay: paths under them, once made, stay in use for the run."""
    global _current
    old = get()
    if (cfg.root, cfg.build, cfg.cache) != (old.root, old.build, old.cache):
        raise ValueError("the root, build and cache directories are fixed for a run")
    _current = cfg
    try:
        yield cfg
    finally:
        _current = old
