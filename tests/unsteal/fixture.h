/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Fixture trees for the unsteal tests: a fake /proc and /sys/fs/cgroup. */
#pragma once

#include <glib.h>

typedef enum {
	FX_V1,          /* cpu and cpuacct mounted separately */
	FX_V1_COMOUNT,  /* cpu,cpuacct co-mounted */
	FX_V2,          /* unified hierarchy */
} FxLayout;

/* Create a fresh temporary directory (removed by fx_cleanup). */
gchar *fx_tmpdir(void);
void fx_cleanup(gchar *dir);

/* Write ROOT/REL (parents created).  LEN < 0: CONTENT is a C string. */
void fx_write(const gchar *root, const gchar *rel, const gchar *content,
              gssize len);
void fx_remove(const gchar *root, const gchar *rel);

/* The standard two-domain host at sample 0 or 1 (see fixture.c). */
void fx_build(const gchar *root, FxLayout layout, gint sample);
/* Move beta's vCPU thread to a group named as its own, inside the shared
 * group (/machine/vcpus.partition/beta.libvirt-qemu/vcpu0), with the
 * same figures: libvirt's per-host placement of a domain whose only
 * tunable is a vCPU quota, on cgroup v1. */
void fx_nest_beta(const gchar *root, FxLayout layout, gint sample);
