# SPDX-License-Identifier: GPL-2.0-or-later
"""Builds from a stack: the patched libvirt (libvirt), the lab kernel
(kernel), this repository's src/ and tests/ (unsteal_build), and meson test
summaries (mesonlog).
"""

# ccache's depend mode for every lab build (libvirt, the kernel, libvirt in
# the test host's build root): on a miss it compiles once with the
# compiler's -MD output instead of running the preprocessor first to hash
# its output.  A cold cache then costs +20 % over no ccache instead of +45 %
# (a slice of the lab kernel: 44 s without ccache, 64 s plain, 53 s depend;
# libvirt 11.3.0 at -O0: 103 s plain, 81 s depend); a warm cache hits as
# often (docs/results/2026-11-29-ci-cold-this-machine.md).
CCACHE_DEPEND = {"CCACHE_DEPEND": "1"}
