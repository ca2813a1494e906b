# SPDX-License-Identifier: GPL-2.0-or-later
"""Benchmarks: the dispatch (bench), what they share (benchkit), each
benchmark (benchsched, benchguests, benchcontrol, benchmixed, benchtuned),
their plots (plots), scheduler traces and the idle steal computed from them
(schedtrace, idlesteal), and the demo (demo), which runs a short benchsched.
"""
