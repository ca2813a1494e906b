/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: what libvirt mode adds to a domain (plain data, no libvirt). */
#pragma once

#include <glib.h>

/* The <cputune> values of a domain definition; 0 = not set (as in libvirt,
 * where period 0 and quota 0 mean "unset" and a negative quota means
 * "unlimited"). */
typedef struct {
	gboolean shares_set;
	guint64 shares;
	guint64 period;
	gint64 quota;
	guint64 global_period;
	gint64 global_quota;
	guint64 emulator_period;
	gint64 emulator_quota;
	guint64 iothread_period;
	gint64 iothread_quota;
} UsCputune;

/* The per-host vCPU cgroup rule (libvirt-patches/debian-13/0009): TRUE
 * when every tunable governing the vCPU threads is unset or at the kernel's
 * default (shares 1024, period 100000, quota <= 0; emulator and iothread
 * values do not count). */
gboolean us_cputune_is_default(const UsCputune *t);
/* Whether only the vCPU period or quota differs from the default. */
gboolean us_cputune_is_vcpu_bandwidth_only(const UsCputune *t);
/* "shares=2048,quota=20000" (the set values, vCPU ones first), "" if none. */
gchar *us_cputune_describe(const UsCputune *t);

typedef struct {
	gint id;              /* libvirt vCPU id */
	gboolean enabled;     /* from <vcpus><vcpu enabled=...> (TRUE without it) */
	gint order;           /* hotplug order, -1 when the XML has none */
	gboolean have_delay, have_time;
	guint64 delay_ns;     /* vcpu.N.delay */
	guint64 time_ns;      /* vcpu.N.time */
} UsLvVcpu;

typedef struct {
	gchar *name;
	gchar *uuid;          /* canonical lower-case 8-4-4-4-12 */
	gint id;              /* libvirt domain id */
	gboolean have_tune;   /* the XML could be parsed */
	UsCputune tune;
	gchar *vcpu_cgroup;   /* the daemon's "cpu.vcpu_cgroup" stat, or NULL */
	gdouble stats_time;   /* CLOCK_BOOTTIME seconds when the stats came */
	GArray *vcpus;        /* UsLvVcpu, by id; from the XML and the stats */
} UsLvDomain;

UsLvDomain *us_lv_domain_new(void);
void us_lv_domain_free(UsLvDomain *d);
UsLvDomain *us_lv_domain_copy(const UsLvDomain *d);
/* The entry for vCPU ID, adding one (enabled, no order) if missing. */
UsLvVcpu *us_lv_domain_vcpu(UsLvDomain *d, gint id, gboolean add);
const UsLvVcpu *us_lv_domain_vcpu_const(const UsLvDomain *d, gint id);

/* A UUID in any case, with or without dashes, as canonical lower-case
 * 8-4-4-4-12 text; NULL if it is not 32 hex digits. */
gchar *us_uuid_normalize(const gchar *s);

/* Parse a libvirt domain XML: <cputune> into TUNE and the <vcpu>/<vcpus>
 * elements into VCPUS (UsLvVcpu).  Returns FALSE with *ERR set when the
 * document is not a <domain>.  Only with libxml2 (libvirt mode). */
gboolean us_domain_xml_parse(const gchar *xml, UsCputune *tune, GArray *vcpus,
			     gchar **err);
