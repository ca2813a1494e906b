#!/bin/busybox sh
# shellcheck shell=sh source-path=SCRIPTDIR
# SPDX-License-Identifier: GPL-2.0-or-later
#
# /init of the lab's TCG guests (tools/lablib/lab/guest.py, docs/lab.md).
# unsteal.workload= on the kernel command line picks what runs:
#   busy   one CPU-bound shell loop pinned to every vCPU
#   idle   nothing but a sleeping shell
#   mixed  a loop on vCPU 0 only, the other vCPUs idle
# 'unsteal-guest: ready' on the serial console says the loops run.

# shellcheck source=preamble.sh
. /lib/unsteal/preamble.sh
wl=$(sed -n 's/.*unsteal\.workload=\([a-z]*\).*/\1/p' /proc/cmdline)
n=$(grep -c ^processor /proc/cpuinfo)
echo "unsteal-guest: workload=${wl:-idle} cpus=$n"
spin() { taskset -c "$1" sh -c 'while :; do :; done' & }
case "$wl" in
busy) i=0; while [ "$i" -lt "$n" ]; do spin "$i"; i=$((i + 1)); done ;;
mixed) spin 0 ;;
esac
echo "unsteal-guest: ready"
while :; do sleep 3600; done
