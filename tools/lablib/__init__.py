# SPDX-License-Identifier: GPL-2.0-or-later
"""The library of tools/lab, one package per stage of the work.

Lowest first; a module imports only from its own layer and the layers
below it (tests/tools/test_imports.py checks this against LAYERS):

  config    the environment, read once into one Config
  common    paths, logging, running commands
  results   what a test stage found: counts, skips and why it failed
  stack     the patch stacks: declared, turned into work trees, fetched
  build     libvirt, the kernel and src/ built from a stack
  package   Debian's libvirt and linux rebuilt with a series, in chroots
  lab       the private daemons, the TCG guests, per-thread sampling
  bench     the benchmarks and the demo
  testing   the kernel selftests, the booted test host, tools/lab test
  commands  the command line of tools/lab: parser, commands, reference

This file imports nothing.  No module reads the configuration when it is
imported: tools/lab runs commands.main(), which loads config before it runs
a command, and the modules ask config.get() when they are called.
"""

LAYERS = ("config", "common", "results", "stack", "build", "package", "lab", "bench", "testing",
          "commands")
