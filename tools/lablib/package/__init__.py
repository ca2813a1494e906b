# SPDX-License-Identifier: GPL-2.0-or-later
"""Debian packages: libvirt rebuilt with a series (libvirt_deb), linux with
the kernel series (kernel_deb), unsteal's own (unsteal_deb), in throwaway
mmdebstrap roots (chroot), each checked by lintian the same way (lintian).
"""
