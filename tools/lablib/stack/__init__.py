# SPDX-License-Identifier: GPL-2.0-or-later
"""Patch stacks: which there are (stacks), a stack as a git work tree and
back (patchqueue), and the sources they start from (sources).
"""
