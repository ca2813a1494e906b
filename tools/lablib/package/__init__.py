# SPDX-License-Identifier: GPL-2.0-or-later
"""Debian packages rebuilt with a series: libvirt (package), linux
(kpackage), in throwaway debootstrap roots (chroot).
"""
