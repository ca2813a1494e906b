/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: what each format writes, one table of metrics per entity (the
 * host, a domain, libvirt's view of a domain, a vCPU, a cpu cgroup) in
 * output_metrics.c and output_domain.c.  The table, JSON and Prometheus
 * renderers (output_table.c, output_json.c, output_prom.c) walk them; the
 * sample itself (time, interval, libvirt connection, skipped items) frames
 * each format and is written by its renderer. */
#pragma once

#include <glib.h>

#include "model.h"

/* How a value reads; the same number is written differently per format. */
typedef enum {
	US_UNIT_COUNT,     /* an integer */
	US_UNIT_RATIO,     /* fraction of the interval; JSON and table in % */
	US_UNIT_VCPUS,     /* vCPU-seconds per second */
	US_UNIT_SECONDS,   /* seconds */
	US_UNIT_THROTTLED, /* throttled seconds per second; JSON, table ms/s */
	US_UNIT_QUOTA,     /* CPUs, < 0 unlimited */
	US_UNIT_TEXT,      /* a string; a Prometheus metric takes .num */
} UsUnit;

/* Where a value goes in the table (top). */
typedef enum {
	US_COL_NONE = 0,   /* not in the table */
	US_COL_LINE,       /* the host line above the columns */
	US_COL_DOMAIN,
	US_COL_PID,
	US_COL_VCPUS,
	US_COL_UTIL,
	US_COL_STEAL,
	US_COL_IDLE_STEAL,
	US_COL_BUSY_STEAL,
	US_COL_CLASS,
	US_COL_PLACE,
	US_COL_TUNABLES,
	US_COL_EXPECT,
	US_COL_THROTTLED,
	US_COL_THROTTLED_MS,
	US_COL_QUOTA,
	US_COL_CGROUP,

	US_COL_LAST
} UsColumn;

/* What a metric is read from: SELF is the entity's own struct (UsResult,
 * UsDomainResult, UsVcpuResult or UsCgroupResult; libvirt's view is read
 * from its UsDomainResult), DOMAIN the domain of a vCPU or the domain. */
typedef struct {
	gconstpointer self;
	const UsDomainResult *domain;
} UsItem;

typedef struct {
	gboolean have;      /* FALSE: unknown */
	gint64 count;       /* US_UNIT_COUNT */
	gdouble num;        /* other units; US_UNIT_TEXT: the metric value */
	const gchar *text;  /* US_UNIT_TEXT */
	gchar *owned;       /* freed by us_value_clear() */
} UsValue;

typedef struct {
	UsUnit unit;
	/* JSON: the key; consecutive members with the same GROUP form the
	 * object of that key, null when its first member is unknown */
	const gchar *json;
	const gchar *group;
	/* Prometheus: the metric, without "unsteal_"; unknown values are left
	 * out, as are unlimited quotas */
	const gchar *prom;
	const gchar *help;
	gboolean counter;   /* TYPE counter, else gauge */
	/* Prometheus, a vCPU's metric: a "uuid" label after the key labels
	 * when its domain's UUID is known (libvirt's, or QEMU's -uuid) */
	gboolean uuid;
	gboolean libvirt;   /* written among the libvirt metrics (--connect) */
	/* Prometheus: the label in the entity's info metric; KEY puts it on
	 * every metric of the entity too */
	const gchar *label;
	gboolean key;
	/* table: the cell, PRE value POST; several pieces can share one; an
	 * unknown value reads NONE, or is left out when NONE is NULL */
	UsColumn col;
	const gchar *pre;
	const gchar *post;
	const gchar *none;
	/* the value: GET, or else the gdouble at OFF in the entity's struct */
	void (*get)(const UsItem *it, UsValue *val);
	gsize off;
} UsMetric;

typedef struct {
	const UsMetric *metrics;
	guint nmetrics;
	/* Prometheus metric of value 1 carrying all the labels, NULL: none */
	const gchar *info;
	const gchar *info_help;
	/* the info metric leaves out labels of unknown values (else "") */
	gboolean info_known;
} UsEntity;

extern const UsEntity us_host_entity;
extern const UsEntity us_domain_entity;
extern const UsEntity us_libvirt_entity;  /* items: domains with d->lv */
extern const UsEntity us_vcpu_entity;
extern const UsEntity us_cputune_entity;  /* items: domains with d->lv->have_tune */
extern const UsEntity us_cgroup_entity;

void us_metric_value(const UsMetric *m, const UsItem *it, UsValue *val);
void us_value_clear(UsValue *val);

/* V with printf FMT, in the C locale, never "-0". */
void us_append_num(GString *out, const gchar *fmt, gdouble v);
