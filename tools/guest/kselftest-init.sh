#!/bin/busybox sh
# shellcheck shell=sh source-path=SCRIPTDIR
# SPDX-License-Identifier: GPL-2.0-or-later
#
# /init of the kselftest guests (tools/lablib/testing/kselftest.py,
# docs/kselftest.md).  /dev/vda becomes swap, /dev/vdb (ext4) is mounted on
# /scratch; each line of /kselftest/list, 'NAME TIMEOUT CATEGORY SWAP
# ARGS...', turns /dev/vda on or off as SWAP says and runs under a timeout
# either the tree's run_vmtests.sh for that category (bash, destructive
# tests on, its own TAP off: its exit status is the program's result) or,
# for CATEGORY '-', ./NAME ARGS directly; the results are printed as
# kselftest TAP with the output nested behind '# '.  From the kernel command line: unsteal.mode=bench
# (with unsteal.runs, .mapped, .swapped, .idle) or bench-migrate (with
# unsteal.runs, .mb) first runs that benchmark.  Ends with
# 'unsteal-kselftest: done' and a reboot, which ends QEMU (-no-reboot).

# shellcheck source=preamble.sh
. /lib/unsteal/preamble.sh
mount -t tmpfs tmp /tmp
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
# where a distribution mounts it: the tests count trace events there
mount -t tracefs nodev /sys/kernel/tracing
arg() { sed -n "s/.*unsteal\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
# shellcheck disable=SC2012 # the names are node0, node1...
echo "unsteal-kselftest: $(uname -r) cpus=$(nproc)" \
     "nodes=$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)" \
     "mem=$(sed -n 's/MemTotal: *//p' /proc/meminfo)"
if ! mkswap /dev/vda >/dev/null || ! swapon /dev/vda; then
    echo "unsteal-kselftest: cannot enable swap on /dev/vda"
fi
mkdir -p /scratch
if ! mount -t ext4 /dev/vdb /scratch; then
    echo "unsteal-kselftest: cannot mount /dev/vdb on /scratch"
fi
swap_on() { grep -q '^/dev/vda ' /proc/swaps; }
# shellcheck disable=SC2164 # the initramfs always has it
cd /kselftest
if [ "$(arg mode)" = bench ]; then
    # shellcheck disable=SC2046 # unsteal.idle=N,N,...: one argument each
    ./swapoff_bench -r "$(arg runs)" -m "$(arg mapped)" -s "$(arg swapped)" \
        $(arg idle | tr , ' ')
fi
if [ "$(arg mode)" = bench-migrate ]; then
    ./migrate_failsafe_test -b "$(arg runs)" -s "$(arg mb)" 2>&1
fi
n=$(grep -c . list)
echo "TAP version 13"
echo "1..$n"
i=0
while read -r name tmo category swap args; do
    i=$((i + 1))
    echo "# selftests: mm: $name"
    if [ "$swap" = on ]; then
        swap_on || swapon /dev/vda
    else
        ! swap_on || swapoff /dev/vda
    fi
    if [ "$category" = - ]; then
        # shellcheck disable=SC2086 # $args: the list's arguments, split
        set -- "./$name" $args
    else
        set -- bash ./run_vmtests.sh -d -n -t "$category"
    fi
    # On a timeout only run_vmtests.sh is killed, not the program it
    # started: kill that too, or it would hold the pipe open.
    ( timeout -k 10 "$tmo" "$@" </dev/null 2>&1; rc=$?
      case "$rc" in 124|137|143) killall -9 "$name" 2>/dev/null ;; esac
      echo "$rc" >/tmp/rc ) |
        while IFS= read -r l; do echo "# $l"; done
    rc=$(cat /tmp/rc)
    case "$rc" in
    0) echo "ok $i selftests: mm: $name" ;;
    4) echo "ok $i selftests: mm: $name # SKIP" ;;
    124|137|143) echo "not ok $i selftests: mm: $name # TIMEOUT $tmo seconds" ;;
    *) echo "not ok $i selftests: mm: $name # exit=$rc" ;;
    esac
done <list
echo "unsteal-kselftest: done"
sync
reboot -f
