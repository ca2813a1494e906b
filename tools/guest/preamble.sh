# shellcheck shell=sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The start of every lab initramfs's /init (init.sh, kselftest-init.sh),
# which source it as /lib/unsteal/preamble.sh.  busybox is the only binary
# in the initramfs: make the directories, link its applets, mount proc,
# sysfs and devtmpfs.
/bin/busybox mkdir -p /proc /sys /dev /tmp /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
