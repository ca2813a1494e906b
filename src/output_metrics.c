/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reading and writing metric values, and the metrics of the host and of
 * the cpu cgroups; a domain's are in output_domain.c. */
#include "output_metrics.h"

#define OFF(type, field) G_STRUCT_OFFSET(type, field)

void
us_append_num(GString *out, const gchar *fmt, gdouble v)
{
	gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

	/* avoid "-0.00" */
	if (v > -1e-12 && v < 1e-12)
		v = 0;
	g_ascii_formatd(buf, sizeof(buf), fmt, v);
	g_string_append(out, buf);
}

void
us_metric_value(const UsMetric *m, const UsItem *it, UsValue *val)
{
	*val = (UsValue) { .have = TRUE };
	if (m->get)
		m->get(it, val);
	else
		val->num = G_STRUCT_MEMBER(gdouble, it->self, m->off);
}

void
us_value_clear(UsValue *val)
{
	g_free(val->owned);
	val->owned = NULL;
}

/* ------------------------------------------------------------------ host */

static void
host_cpus(const UsItem *it, UsValue *val)
{
	val->count = ((const UsResult *)it->self)->ncpus;
}

static void
host_domains(const UsItem *it, UsValue *val)
{
	val->count = ((const UsResult *)it->self)->ndomains;
}

static void
host_vcpus(const UsItem *it, UsValue *val)
{
	val->count = ((const UsResult *)it->self)->nvcpus;
}

static void
host_idle_total(const UsItem *it, UsValue *val)
{
	val->have = ((const UsResult *)it->self)->have_idle_total;
	val->num = ((const UsResult *)it->self)->idle_total_s;
}

static const UsMetric host_metrics[] = {
	{ .unit = US_UNIT_COUNT, .json = "cpus", .get = host_cpus,
	  .prom = "host_cpus", .help = "Host CPUs listed in /proc/stat.",
	  .col = US_COL_LINE, .post = " CPUs" },
	{ .unit = US_UNIT_RATIO, .json = "idle_pct", .off = OFF(UsResult, idle),
	  .prom = "host_idle_ratio", .help = "Host idle (idle+iowait) fraction over all CPUs.",
	  .col = US_COL_LINE, .pre = ", idle ", .post = "%" },
	{ .unit = US_UNIT_SECONDS, .get = host_idle_total,
	  .prom = "host_idle_seconds_total", .counter = TRUE,
	  .help = "Idle and iowait time of all host CPUs since boot, in CPU-seconds (/proc/stat)." },
	{ .unit = US_UNIT_COUNT, .json = "domains", .get = host_domains,
	  .prom = "host_domains", .help = "QEMU domains measured.",
	  .col = US_COL_LINE, .pre = ", ", .post = " domains" },
	{ .unit = US_UNIT_COUNT, .json = "vcpus", .get = host_vcpus,
	  .prom = "host_vcpus", .help = "vCPU threads measured.",
	  .col = US_COL_LINE, .pre = ", ", .post = " vCPUs" },
	{ .unit = US_UNIT_VCPUS, .json = "util_vcpus", .off = OFF(UsResult, util),
	  .prom = "host_utilisation_vcpus", .help = "Sum of vCPU utilisation, in vCPU-seconds per second." },
	{ .unit = US_UNIT_VCPUS, .json = "steal_vcpus", .off = OFF(UsResult, steal),
	  .prom = "host_steal_vcpus", .help = "Sum of vCPU steal, in vCPU-seconds per second.",
	  .col = US_COL_LINE, .pre = "; steal ", .post = " vCPU" },
	{ .unit = US_UNIT_VCPUS, .json = "busy_steal_vcpus", .off = OFF(UsResult, busy_steal),
	  .prom = "host_busy_steal_vcpus", .help = "Sum of vCPU busy steal, in vCPU-seconds per second.",
	  .col = US_COL_LINE, .pre = " (busy " },
	{ .unit = US_UNIT_VCPUS, .json = "idle_steal_vcpus", .off = OFF(UsResult, idle_steal),
	  .prom = "host_idle_steal_vcpus", .help = "Sum of vCPU idle steal, in vCPU-seconds per second.",
	  .col = US_COL_LINE, .pre = ", idle ", .post = ")" },
};

/* ------------------------------------------------------------ cpu cgroup */

#define CGROUP(it) ((const UsCgroupResult *)(it)->self)

static void
cgroup_path(const UsItem *it, UsValue *val)
{
	val->text = CGROUP(it)->path;
}

static void
cgroup_version(const UsItem *it, UsValue *val)
{
	val->count = CGROUP(it)->version;
}

static void
cgroup_users(const UsItem *it, UsValue *val)
{
	val->count = CGROUP(it)->users;
}

static void
cgroup_periods(const UsItem *it, UsValue *val)
{
	val->have = CGROUP(it)->have_throttle;
	val->count = CGROUP(it)->periods;
}

static void
cgroup_throttled(const UsItem *it, UsValue *val)
{
	val->have = CGROUP(it)->have_throttle;
	val->count = CGROUP(it)->throttled;
}

static void
cgroup_throttled_ratio(const UsItem *it, UsValue *val)
{
	val->have = CGROUP(it)->have_throttle;
	val->num = CGROUP(it)->throttled_ratio;
}

static void
cgroup_throttled_total(const UsItem *it, UsValue *val)
{
	val->have = CGROUP(it)->have_total;
	val->num = CGROUP(it)->throttled_total_s;
}

static void
cgroup_quota(const UsItem *it, UsValue *val)
{
	val->have = CGROUP(it)->have_quota;
	val->num = CGROUP(it)->quota_cpus;
}

static void
cgroup_pressure(const UsItem *it, UsValue *val)
{
	val->have = CGROUP(it)->have_pressure;
	val->num = CGROUP(it)->pressure_some;
}

/* JSON has the period count before the throttled count, Prometheus the
 * other way round: the periods are listed twice. */
static const UsMetric cgroup_metrics[] = {
	{ .unit = US_UNIT_TEXT, .json = "path", .get = cgroup_path,
	  .label = "cgroup", .key = TRUE },
	{ .unit = US_UNIT_COUNT, .json = "version", .get = cgroup_version },
	{ .unit = US_UNIT_COUNT, .json = "vcpus", .get = cgroup_users },
	{ .unit = US_UNIT_COUNT, .json = "periods", .group = "throttle",
	  .get = cgroup_periods },
	{ .unit = US_UNIT_COUNT, .json = "throttled", .group = "throttle",
	  .get = cgroup_throttled,
	  .prom = "cgroup_throttled_periods", .help = "CFS periods in the interval in which the cgroup was throttled (delta of nr_throttled)." },
	{ .unit = US_UNIT_COUNT, .get = cgroup_periods,
	  .prom = "cgroup_periods", .help = "CFS enforcement periods of the cgroup in the interval (delta of nr_periods)." },
	{ .unit = US_UNIT_THROTTLED, .json = "throttled_ms_per_s", .group = "throttle",
	  .get = cgroup_throttled_ratio,
	  .prom = "cgroup_throttled_ratio", .help = "Throttled time of the cgroup per second of the interval." },
	{ .unit = US_UNIT_SECONDS, .get = cgroup_throttled_total,
	  .prom = "cgroup_throttled_seconds_total", .counter = TRUE,
	  .help = "Time the cgroup was throttled by its CPU bandwidth limit since it was created (cpu.stat throttled_usec or throttled_time)." },
	{ .unit = US_UNIT_QUOTA, .json = "quota_cpus", .get = cgroup_quota,
	  .prom = "cgroup_quota_cpus", .help = "CPU bandwidth limit of the cgroup in CPUs (quota/period); absent when unlimited." },
	{ .unit = US_UNIT_RATIO, .json = "pressure_some_pct", .get = cgroup_pressure,
	  .prom = "cgroup_cpu_pressure_some_ratio", .help = "Share of the interval in which some task of the cgroup waited for a CPU (cpu.pressure, cgroup v2)." },
};

const UsEntity us_host_entity = {
	.metrics = host_metrics,
	.nmetrics = G_N_ELEMENTS(host_metrics),
};

const UsEntity us_cgroup_entity = {
	.metrics = cgroup_metrics,
	.nmetrics = G_N_ELEMENTS(cgroup_metrics),
};
