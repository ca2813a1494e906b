# SPDX-License-Identifier: GPL-2.0-or-later
"""The lab on this host: its private virtlogd and virtqemud (daemon), its
TCG guests (guest), and per-thread CPU share and steal from schedstat
(measure), which the guests, the demo, the benchmarks and the integration
tests all sample with.
"""
