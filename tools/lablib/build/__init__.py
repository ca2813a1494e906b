# SPDX-License-Identifier: GPL-2.0-or-later
"""Builds from a stack: the patched libvirt (libvirt), the lab kernel
(kernel), this repository's src/ and tests/ (unsteal_build), and meson test
summaries (mesonlog).
"""
