/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: libvirt mode (--connect URI), read-only. */
#pragma once

#include <glib.h>

#include "proc.h"

typedef struct UsLibvirt UsLibvirt;

/* Nothing is connected yet; the first us_libvirt_apply connects. */
UsLibvirt *us_libvirt_new(const gchar *uri);
void us_libvirt_free(UsLibvirt *lv);

/* Ask libvirt for its active domains and attach them to the QEMU processes
 * of SNAP by UUID: such domains get libvirt's name and UsDomain.lv, QEMU
 * processes the daemon does not manage are dropped.  Without a connection
 * (it failed, or was lost: retried on every call) SNAP keeps every QEMU
 * process found in /proc, and a note says so.  Sets SNAP->libvirt. */
void us_libvirt_apply(UsLibvirt *lv, UsSnapshot *snap);
