/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: utilisation, steal, idle/busy steal from two snapshots. */
#pragma once

#include <glib.h>

#include "proc.h"

#define US_DEFAULT_BUSY_THRESHOLD 90.0 /* percent of the vCPU count */

typedef enum {
	US_PLACE_UNKNOWN = 0,
	US_PLACE_OWN,     /* under the domain's own group */
	US_PLACE_SHARED,  /* outside it (e.g. a per-host vCPU group) */
	US_PLACE_NESTED,  /* in vcpuN of a group named as its own, elsewhere
			   * (libvirt's per-host group on cgroup v1, for a
			   * domain whose only tunables are vCPU bandwidth) */
	US_PLACE_MIXED,   /* domain only: its vCPUs disagree */
} UsPlacement;

const gchar *us_placement_name(UsPlacement p);
/* Where the per-host vCPU cgroup rule puts a domain with these tunables
 * on a host whose cpu controller is on cgroup @cpu_version (0 unknown):
 * "shared", "nested" (v1, vCPU period or quota only) or "own"; NULL when
 * they are unknown. */
const gchar *us_expected_placement(const UsLvDomain *lv, gint cpu_version);

/* Interval deltas of one cpu cgroup. */
typedef struct {
	gchar *key;
	gchar *path;
	gint version;
	gboolean have_throttle;
	guint64 periods;        /* Δnr_periods */
	guint64 throttled;      /* Δnr_throttled */
	gdouble throttled_s;    /* Δthrottled time, seconds */
	gdouble throttled_ratio;/* throttled_s / Δt */
	gboolean have_total;
	gdouble throttled_total_s; /* throttled time since the cgroup was made */
	gboolean have_quota;
	gdouble quota_cpus;     /* < 0: unlimited */
	gboolean have_pressure;
	gdouble pressure_some;  /* Δsome total / Δt */
	guint users;            /* vCPU threads in it */
} UsCgroupResult;

/* All ratios are fractions of the interval (1.0 = the whole interval). */
typedef struct {
	gint vcpu;
	gint tid;
	gchar *cpus;            /* allowed CPU list, NULL = all */
	gchar *cgroup;          /* cpu cgroup path, NULL if unknown */
	UsPlacement placement;
	gdouble util;
	gdouble steal;
	gdouble idle_frac;      /* host idle fraction, all CPUs (per-CPU lines) */
	gdouble allowed_idle;   /* idle fraction of the thread's allowed CPUs */
	gdouble idle_steal;
	gdouble busy_steal;
	gdouble run_s, wait_s;  /* cumulative schedstat, seconds */
	/* this interval's wait split, seconds: idle_steal and busy_steal x Δt */
	gdouble idle_wait_s, busy_wait_s;
	/* counters, set by us_totals_add (totals.h): the splits summed over
	 * every interval since the thread was first measured */
	gboolean have_totals;
	gdouble idle_wait_total_s, busy_wait_total_s;
	/* libvirt mode */
	gint order;             /* hotplug order from the XML, -1 none */
	gboolean have_lv_steal;
	gdouble lv_steal;       /* Δ vcpu.N.delay / Δt */
} UsVcpuResult;

typedef struct {
	gchar *name;
	gint pid;
	gchar *group;
	gchar *uuid;             /* libvirt's, else QEMU's -uuid, or NULL */
	guint nvcpus;
	/* averages over the domain's vCPUs (fraction of one vCPU) */
	gdouble util, steal, idle_steal, busy_steal;
	gboolean busy;
	UsPlacement placement;
	/* where the per-host vCPU cgroup rule puts the domain (see
	 * us_expected_placement); UNKNOWN without libvirt's tunables */
	UsPlacement expected;
	/* sums over the distinct cpu cgroups of the vCPUs */
	gboolean have_throttle;
	guint64 periods, throttled;
	gdouble throttled_ratio;
	gboolean have_quota;
	gdouble quota_cpus;      /* sum of quotas, < 0 if any is unlimited */
	GPtrArray *cgroups;      /* UsCgroupResult* (borrowed) */
	GPtrArray *vcpus;        /* UsVcpuResult* */
	UsLvDomain *lv;          /* libvirt's view (copy), NULL outside libvirt mode */
} UsDomainResult;

typedef struct {
	gdouble interval;        /* Δt, seconds */
	gint64 realtime_us;
	guint ncpus;
	gdouble idle;            /* host idle fraction, all CPUs */
	gboolean have_idle_total;
	gdouble idle_total_s;    /* idle+iowait of all CPUs since boot, CPU-seconds */
	guint ndomains, nvcpus;
	/* sums in vCPU-seconds per second */
	gdouble util, steal, idle_steal, busy_steal;
	GPtrArray *domains;      /* UsDomainResult* */
	GPtrArray *cgroups;      /* UsCgroupResult*, sorted by key */
	GPtrArray *skipped;      /* strings */
	gint libvirt;            /* US_LV_* of the later sample */
} UsResult;

typedef struct {
	gdouble busy_threshold;  /* percent, default 90 */
} UsModelOptions;

/* Compute interval figures between A (earlier) and B (later).  Returns
 * NULL, with *ERR set, only if the interval is not positive. */
UsResult *us_model_compute(const UsSnapshot *a, const UsSnapshot *b,
                           const UsModelOptions *opt, gchar **err);
void us_result_free(UsResult *r);
