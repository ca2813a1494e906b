#!/bin/sh
# shellcheck shell=sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# unsteal test host: run tests/integration, print TAP and a summary on the
# console (docs/testhost.md).  Installed as /usr/local/sbin/unsteal-testhost-run
# and started by unsteal-testhost.service under systemd, or by unsteal-init.
#
# What the image holds is read from /usr/local/etc/unsteal-testhost-run.conf,
# sh assignments that tools/lablib/testing/testhostimage.py writes when it builds
# the image:
#   UNSTEAL_TREE            the repository's copy (tools/, tests/): /unsteal
#   UNSTEAL_BUILD           its _build directory
#   UNSTEAL_TESTS           every integration test, in tests/meson.build's order
#   UNSTEAL_RELEASE         the image's Debian release and libvirt, for the console
#   UNSTEAL_LIBVIRT_DESC    which libvirt the image carries, for the console
#   UNSTEAL_LIBVIRT_PREFIX  only with the Debian packages: /
#   UNSTEAL_LIBVIRT_STACK   only when the image's libvirt is not libvirt's
#                           default stack (the 9.0.0 port): its key
# unsteal.tests=A,B on the kernel command line runs those tests instead.
# unsteal.bench=ARG,ARG,... runs 'tools/lab bench scale --in-guest ARG ARG ...'
# after the tests, as one more test program (bench_scale), its output as is,
# and writes its records (bench.json) as a tar onto /dev/vdb, the disk that
# tools/lablib/testing/scalehost.py attaches for them and reads afterwards.
# shellcheck source=/dev/null
. /usr/local/etc/unsteal-testhost-run.conf
export UNSTEAL_BUILD UNSTEAL_BIN="$UNSTEAL_BUILD/unsteal-build/src/unsteal"
export UNSTEAL_TESTHOST=1 PYTHONDONTWRITEBYTECODE=1 PATH=/usr/sbin:/usr/bin:/sbin:/bin
if [ -n "$UNSTEAL_LIBVIRT_PREFIX" ]; then
    export UNSTEAL_LIBVIRT_PREFIX
fi
if [ -n "$UNSTEAL_LIBVIRT_STACK" ]; then
    export UNSTEAL_LIBVIRT_STACK
fi
exec </dev/null
echo "unsteal-testhost: up $(cut -d' ' -f1 /proc/uptime) s, kernel $(uname -r)," \
     "PID 1 $(cat /proc/1/comm), $(nproc) CPUs"
echo "unsteal-testhost: release: ${UNSTEAL_RELEASE:-unknown}," \
     "systemd $(systemctl --version 2>/dev/null | sed -n '1s/^systemd \([0-9]*\).*/\1/p')"
echo "unsteal-testhost: libvirt: $UNSTEAL_LIBVIRT_DESC"
grep -E ' cgroup2? ' /proc/mounts | sed 's/^/unsteal-testhost: mount: /'
[ -f /sys/fs/cgroup/cgroup.controllers ] &&
    echo "unsteal-testhost: v2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
if [ "$(cat /proc/1/comm)" = systemd ]; then
    t=$(systemctl show -P ActiveEnterTimestampMonotonic multi-user.target)
    echo "unsteal-testhost: multi-user.target reached at $((t / 1000)) ms after boot"
    # libvirt uses machined when D-Bus can activate it.
    if grep -q 'unsteal\.machined=0' /proc/cmdline; then
        systemctl mask --runtime --now systemd-machined.service >/dev/null 2>&1
        rm -f /usr/share/dbus-1/system-services/org.freedesktop.machine1.service
        busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
            ReloadConfig >/dev/null
    fi
    if busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
            ListActivatableNames | grep -q org.freedesktop.machine1; then
        echo "unsteal-testhost: systemd-machined: on"
    else
        echo "unsteal-testhost: systemd-machined: off"
    fi
fi
tests=$UNSTEAL_TESTS
only=$(sed -n 's/.*unsteal\.tests=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
[ -n "$only" ] && tests="$only"
bench=$(sed -n 's/.*unsteal\.bench=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
n=$(echo "$tests" | wc -w)
[ -n "$bench" ] && n=$((n + 1))
echo "TAP version 13"
echo "1..$n"
i=0; pass=0; fail=0; skip=0
# shellcheck disable=SC2164 # the image always has it
cd "$UNSTEAL_TREE"
for t in $tests; do
    i=$((i + 1))
    echo "# test: $t (started at $(cut -d' ' -f1 /proc/uptime) s)"
    rm -f /tmp/skip
    # 30 minutes a test: on a slow machine the weights test took over 15
    # minutes in a row beside another (nested TCG)
    ( timeout -k 10 1800 python3 "tests/integration/test_$t.py" 2>&1; echo $? >/tmp/rc ) |
        while IFS= read -r l; do
            echo "# $l"
            case "$l" in "1..0 # SKIP"*) echo "${l#1..0 # SKIP }" >/tmp/skip ;; esac
        done
    rc=$(cat /tmp/rc)
    # The daemon's own word on vcpu_cgroup (e.g. the cgroup v2 fallback).
    grep -h -i "warn.*vcpu.cgroup\|vcpu.cgroup.*warn" "$UNSTEAL_BUILD/logs/virtqemud.log" \
        2>/dev/null | sort -u | head -3 | sed 's/^/# virtqemud: /'
    if [ "$rc" = 0 ] && [ -s /tmp/skip ]; then
        skip=$((skip + 1)); echo "ok $i - $t # SKIP $(cat /tmp/skip)"
    elif [ "$rc" = 0 ]; then
        pass=$((pass + 1)); echo "ok $i - $t"
    else
        fail=$((fail + 1)); echo "not ok $i - $t # exit=$rc"
    fi
done
if [ -n "$bench" ]; then
    i=$((i + 1))
    echo "# test: bench_scale (started at $(cut -d' ' -f1 /proc/uptime) s)"
    records=/var/tmp/unsteal-bench
    rm -rf "$records"
    # shellcheck disable=SC2086 # one word per argument
    python3 tools/lab bench scale --in-guest --out "$records" $bench 2>&1
    rc=$?
    # What was measured goes back also when the run failed part-way
    if [ -f "$records/bench.json" ] && ! tar -C "$records" -cf /dev/vdb bench.json; then
        echo "# bench_scale: cannot write the records onto /dev/vdb"
        rc=1
    fi
    if [ "$rc" = 0 ]; then
        pass=$((pass + 1)); echo "ok $i - bench_scale"
    else
        fail=$((fail + 1)); echo "not ok $i - bench_scale # exit=$rc"
    fi
fi
echo "unsteal-testhost: $pass passed, $fail failed, $skip skipped"
echo "unsteal-testhost: done at $(cut -d' ' -f1 /proc/uptime) s"
sync
# Under systemd, power off at once (QEMU runs with -no-reboot); without it,
# unsteal-init does that when this script ends.
[ "$(cat /proc/1/comm)" = systemd ] && systemctl --force --force reboot
exit 0
