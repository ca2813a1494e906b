# SPDX-License-Identifier: GPL-2.0-or-later
"""Tests: a QEMU boot with its console parsed (qemuboot), the kernel
selftests and benchmarks in a guest (kselftest, kbench), the booted Debian
test host (testhostrelease, testhostroot, testhostimage, testhost), and
tools/lab test (testrun).
"""
