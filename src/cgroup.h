/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: cgroup placement and CPU bandwidth (quota) throttling. */
#pragma once

#include <glib.h>

/* Where the hierarchies are mounted (absolute paths, already prefixed with
 * the --root directory).  Either may be NULL. */
typedef struct {
	gchar *cpu_v1;   /* v1 hierarchy carrying the cpu controller */
	gchar *v2;       /* the cgroup2 (unified) hierarchy */
	gboolean cpu_is_v2; /* the cpu controller lives in the v2 hierarchy */
} UsMounts;

void us_mounts_find(const gchar *root, UsMounts *m);
void us_mounts_clear(UsMounts *m);

/* A thread's cgroups, from /proc/PID/task/TID/cgroup. */
typedef struct {
	gint cpu_version;  /* 1 or 2: hierarchy holding the cpu controller; 0 unknown */
	gchar *cpu_path;   /* path inside that hierarchy, NULL if unknown */
	gchar *v2_path;    /* path in the unified hierarchy ("0::"), or NULL */
} UsCgroupRef;

/* Parse the contents of a /proc/.../cgroup file.  Returns FALSE when no
 * usable line was found. */
gboolean us_cgroup_parse(const gchar *content, UsCgroupRef *ref);
void us_cgroup_ref_clear(UsCgroupRef *ref);
void us_cgroup_ref_copy(UsCgroupRef *dst, const UsCgroupRef *src);

/* TRUE if PATH equals PARENT or lies below it. */
gboolean us_cgroup_is_under(const gchar *path, const gchar *parent);

/* The domain's own group, derived from its emulator (main) thread's cpu
 * cgroup: ".../emulator" -> "...", anything else is returned unchanged. */
gchar *us_cgroup_domain_group(const gchar *emulator_path);

/* Counters of one cpu cgroup at one instant. */
typedef struct {
	gchar *key;            /* "v1:/path" or "v2:/path" */
	gint version;
	gchar *path;
	gboolean have_stat;    /* cpu.stat was readable */
	guint64 nr_periods;
	guint64 nr_throttled;
	guint64 throttled_ns;
	gboolean have_quota;   /* quota files readable */
	gdouble quota_cpus;    /* quota / period, < 0 when unlimited */
	gboolean have_pressure;
	guint64 pressure_some_us; /* cpu.pressure "some" total */
} UsCgroupStat;

/* Read the counters of the cgroup holding REF (key = version:path). Notes
 * about missing files go to NOTES.  Returns NULL if REF has no cpu path. */
UsCgroupStat *us_cgroup_stat_read(const UsMounts *m, const UsCgroupRef *ref,
                                  GPtrArray *notes);
void us_cgroup_stat_free(UsCgroupStat *st);
gchar *us_cgroup_key(gint version, const gchar *path);
