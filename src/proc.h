/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: one snapshot of the host's QEMU vCPU threads, from /proc. */
#pragma once

#include <glib.h>

#include "cgroup.h"
#include "lvinfo.h"

typedef struct {
	gboolean present;
	guint64 idle;   /* idle + iowait, in USER_HZ ticks */
	guint64 total;  /* sum of all fields but guest/guest_nice */
} UsCpuTimes;

typedef struct {
	gint tid;
	gint vcpu;            /* N of "CPU N/KVM" */
	guint64 run_ns;       /* schedstat field 1 */
	guint64 wait_ns;      /* schedstat field 2 */
	gchar *cpus_allowed;  /* Cpus_allowed_list text, NULL if unknown */
	GArray *allowed;      /* gint CPU numbers, NULL = all CPUs */
	UsCgroupRef cg;
} UsThread;

typedef struct {
	gint pid;
	gchar *name;
	gchar *group;          /* domain's own cpu group (from emulator thread) */
	gchar *uuid;           /* QEMU's -uuid, canonical, or NULL */
	UsLvDomain *lv;        /* libvirt's view (libvirt mode), or NULL */
	GPtrArray *vcpus;      /* UsThread*, sorted by vcpu */
} UsDomain;

typedef struct {
	gdouble time;          /* seconds, CLOCK_BOOTTIME or fixture uptime */
	gint64 realtime_us;    /* wall clock for reports */
	UsCpuTimes all;
	GArray *cpus;          /* UsCpuTimes indexed by CPU number */
	GPtrArray *domains;    /* UsDomain*, sorted by name, pid */
	GHashTable *cgroups;   /* key -> UsCgroupStat* */
	GPtrArray *notes;      /* what was skipped, strings */
	/* libvirt mode: US_LV_OFF (not asked for), US_LV_DOWN (no connection:
	 * domains come from scanning /proc) or US_LV_UP */
	gint libvirt;
} UsSnapshot;

enum { US_LV_OFF = 0, US_LV_DOWN = 1, US_LV_UP = 2 };

typedef struct {
	gchar *root;           /* NULL or "/" = live system */
	UsMounts mounts;
	/* take sample times from ROOT/proc/uptime (fixture replay); set by
	 * us_source_new for any non-live root */
	gboolean use_uptime;
} UsSource;

UsSource *us_source_new(const gchar *root);
void us_source_free(UsSource *src);

UsSnapshot *us_snapshot_take(UsSource *src);
void us_snapshot_free(UsSnapshot *snap);
/* Re-sort the domains by name and pid (after renaming them). */
void us_snapshot_sort(UsSnapshot *snap);

/* Helpers, exposed for the unit tests. */
gboolean us_proc_is_qemu(const gchar *comm);
gint us_proc_vcpu_id(const gchar *comm);
gchar *us_proc_domain_name(const gchar *cmdline, gsize len);
gchar *us_proc_qemu_uuid(const gchar *cmdline, gsize len);
gboolean us_proc_parse_stat(const gchar *buf, UsCpuTimes *all, GArray *cpus);
gboolean us_proc_parse_schedstat(const gchar *buf, guint64 *run, guint64 *wait);
gchar *us_proc_status_field(const gchar *status, const gchar *field);
