/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The metrics of a domain, of libvirt's view of it and of its vCPUs (see
 * output_metrics.h); the host's and the cgroups' are in output_metrics.c. */
#include "output_metrics.h"

#define OFF(type, field) G_STRUCT_OFFSET(type, field)

/* A string that may be missing. */
static void
set_text(UsValue *val, const gchar *s)
{
	val->have = s != NULL;
	val->text = s;
}

#define DOMAIN(it) ((const UsDomainResult *)(it)->self)

/* The domain, or the domain of a vCPU. */
static void
domain_name(const UsItem *it, UsValue *val)
{
	val->text = it->domain->name;
}

static void
domain_pid(const UsItem *it, UsValue *val)
{
	val->count = DOMAIN(it)->pid;
}

static void
domain_vcpus(const UsItem *it, UsValue *val)
{
	val->count = DOMAIN(it)->nvcpus;
}

static void
domain_class(const UsItem *it, UsValue *val)
{
	val->text = DOMAIN(it)->busy ? "busy" : "idle";
	val->num = DOMAIN(it)->busy ? 1 : 0;
}

static void
domain_placement(const UsItem *it, UsValue *val)
{
	val->text = us_placement_name(DOMAIN(it)->placement);
}

static void
domain_group(const UsItem *it, UsValue *val)
{
	set_text(val, DOMAIN(it)->group);
}

static void
domain_uuid(const UsItem *it, UsValue *val)
{
	set_text(val, it->domain->uuid);
}

static void
domain_periods(const UsItem *it, UsValue *val)
{
	val->have = DOMAIN(it)->have_throttle;
	val->count = DOMAIN(it)->periods;
}

static void
domain_throttled(const UsItem *it, UsValue *val)
{
	val->have = DOMAIN(it)->have_throttle;
	val->count = DOMAIN(it)->throttled;
}

static void
domain_throttled_ratio(const UsItem *it, UsValue *val)
{
	val->have = DOMAIN(it)->have_throttle;
	val->num = DOMAIN(it)->throttled_ratio;
}

/* Share of the enforcement periods that throttled. */
static void
domain_throttled_share(const UsItem *it, UsValue *val)
{
	const UsDomainResult *d = DOMAIN(it);

	val->have = d->have_throttle;
	val->num = d->periods ? (gdouble)d->throttled / (gdouble)d->periods : 0;
}

static void
domain_quota(const UsItem *it, UsValue *val)
{
	val->have = DOMAIN(it)->have_quota;
	val->num = DOMAIN(it)->quota_cpus;
}

static void
domain_cgroups(const UsItem *it, UsValue *val)
{
	const UsDomainResult *d = DOMAIN(it);
	GString *s = g_string_new(NULL);

	for (guint i = 0; i < d->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(d->cgroups, i);

		g_string_append_printf(s, "%s%s", i ? "," : "", c->path);
	}
	val->have = s->len > 0;
	val->text = val->owned = g_string_free(s, FALSE);
}

static const UsMetric domain_metrics[] = {
	{ .unit = US_UNIT_TEXT, .json = "name", .get = domain_name,
	  .label = "domain", .key = TRUE, .col = US_COL_DOMAIN },
	{ .unit = US_UNIT_COUNT, .json = "pid", .get = domain_pid, .col = US_COL_PID },
	{ .unit = US_UNIT_COUNT, .json = "vcpus", .get = domain_vcpus,
	  .prom = "domain_vcpus", .help = "vCPU threads of the domain.",
	  .col = US_COL_VCPUS },
	{ .unit = US_UNIT_RATIO, .json = "util_pct", .off = OFF(UsDomainResult, util),
	  .prom = "domain_utilisation_ratio", .help = "Mean vCPU utilisation of the domain.",
	  .col = US_COL_UTIL },
	{ .unit = US_UNIT_RATIO, .json = "steal_pct", .off = OFF(UsDomainResult, steal),
	  .prom = "domain_steal_ratio", .help = "Mean vCPU steal of the domain (what the guest sees as steal).",
	  .col = US_COL_STEAL },
	{ .unit = US_UNIT_RATIO, .json = "idle_steal_pct", .off = OFF(UsDomainResult, idle_steal),
	  .prom = "domain_idle_steal_ratio", .help = "Mean vCPU idle steal of the domain.",
	  .col = US_COL_IDLE_STEAL },
	{ .unit = US_UNIT_RATIO, .json = "busy_steal_pct", .off = OFF(UsDomainResult, busy_steal),
	  .prom = "domain_busy_steal_ratio", .help = "Mean vCPU busy steal of the domain.",
	  .col = US_COL_BUSY_STEAL },
	{ .unit = US_UNIT_TEXT, .json = "class", .get = domain_class,
	  .prom = "domain_busy", .help = "1 when utilisation + steal reaches the busy threshold, else 0.",
	  .col = US_COL_CLASS },
	{ .unit = US_UNIT_TEXT, .get = domain_uuid, .label = "uuid" },
	{ .unit = US_UNIT_TEXT, .json = "placement", .get = domain_placement,
	  .label = "placement", .col = US_COL_PLACE },
	{ .unit = US_UNIT_TEXT, .json = "group", .get = domain_group, .label = "group" },
	{ .unit = US_UNIT_COUNT, .json = "periods", .group = "throttle",
	  .get = domain_periods },
	{ .unit = US_UNIT_COUNT, .json = "throttled", .group = "throttle",
	  .get = domain_throttled },
	{ .unit = US_UNIT_RATIO, .get = domain_throttled_share,
	  .col = US_COL_THROTTLED, .none = "?" },
	{ .unit = US_UNIT_THROTTLED, .json = "throttled_ms_per_s", .group = "throttle",
	  .get = domain_throttled_ratio,
	  .prom = "domain_throttled_ratio", .help = "Throttled time per second, summed over the domain's vCPU cgroups.",
	  .col = US_COL_THROTTLED_MS, .none = "?" },
	{ .unit = US_UNIT_QUOTA, .json = "quota_cpus", .get = domain_quota,
	  .col = US_COL_QUOTA, .none = "?" },
	{ .unit = US_UNIT_TEXT, .get = domain_cgroups, .col = US_COL_CGROUP, .none = "?" },
};

/* ------------------------------------------- libvirt's view of a domain */

#define LV(it) (DOMAIN(it)->lv)

static void
lv_id(const UsItem *it, UsValue *val)
{
	val->count = LV(it)->id;
}

static void
lv_uuid(const UsItem *it, UsValue *val)
{
	val->text = LV(it)->uuid;
}

static void
lv_tunables(const UsItem *it, UsValue *val)
{
	const UsLvDomain *lv = LV(it);
	gboolean dflt = lv->have_tune && us_cputune_is_default(&lv->tune);

	val->have = lv->have_tune;
	val->text = dflt ? "default" : "custom";
	val->num = dflt ? 1 : 0;
}

static void
lv_cputune(const UsItem *it, UsValue *val)
{
	if (LV(it)->have_tune)
		val->owned = us_cputune_describe(&LV(it)->tune);
	set_text(val, val->owned);
}

static void
lv_expected(const UsItem *it, UsValue *val)
{
	UsPlacement p = DOMAIN(it)->expected;

	set_text(val, p == US_PLACE_UNKNOWN ? NULL : us_placement_name(p));
}

static void
lv_vcpu_cgroup(const UsItem *it, UsValue *val)
{
	set_text(val, LV(it)->vcpu_cgroup);
}

static const UsMetric libvirt_metrics[] = {
	{ .unit = US_UNIT_TEXT, .get = domain_name, .label = "domain", .key = TRUE },
	{ .unit = US_UNIT_COUNT, .json = "id", .get = lv_id, .label = "id" },
	{ .unit = US_UNIT_TEXT, .json = "uuid", .get = lv_uuid, .label = "uuid" },
	{ .unit = US_UNIT_TEXT, .json = "tunables", .get = lv_tunables,
	  .prom = "domain_tunables_default", .help = "1 when the domain's vCPU CPU tunables are at their defaults (the per-host vCPU cgroup rule shares its vCPUs), 0 when custom.",
	  .label = "tunables", .col = US_COL_TUNABLES, .none = "?" },
	{ .unit = US_UNIT_TEXT, .json = "cputune", .get = lv_cputune },
	{ .unit = US_UNIT_TEXT, .json = "expected_placement", .get = lv_expected,
	  .label = "expected_placement", .col = US_COL_EXPECT, .none = "-" },
	{ .unit = US_UNIT_TEXT, .get = domain_placement, .label = "placement" },
	{ .unit = US_UNIT_TEXT, .json = "vcpu_cgroup", .get = lv_vcpu_cgroup,
	  .label = "vcpu_cgroup" },
};

/* ------------------------------------------------------------------ vCPU */

#define VCPU(it) ((const UsVcpuResult *)(it)->self)

static void
vcpu_id(const UsItem *it, UsValue *val)
{
	val->count = VCPU(it)->vcpu;
}

static void
vcpu_tid(const UsItem *it, UsValue *val)
{
	val->count = VCPU(it)->tid;
}

static void
vcpu_cpus(const UsItem *it, UsValue *val)
{
	set_text(val, VCPU(it)->cpus);
}

static void
vcpu_cgroup(const UsItem *it, UsValue *val)
{
	set_text(val, VCPU(it)->cgroup);
}

static void
vcpu_placement(const UsItem *it, UsValue *val)
{
	val->text = us_placement_name(VCPU(it)->placement);
}

static void
vcpu_order(const UsItem *it, UsValue *val)
{
	val->have = VCPU(it)->order >= 0;
	val->count = VCPU(it)->order;
}

static void
vcpu_lv_steal(const UsItem *it, UsValue *val)
{
	val->have = VCPU(it)->have_lv_steal;
	val->num = VCPU(it)->lv_steal;
}

static void
vcpu_idle_wait_total(const UsItem *it, UsValue *val)
{
	val->have = VCPU(it)->have_totals;
	val->num = VCPU(it)->idle_wait_total_s;
}

static void
vcpu_busy_wait_total(const UsItem *it, UsValue *val)
{
	val->have = VCPU(it)->have_totals;
	val->num = VCPU(it)->busy_wait_total_s;
}

/* The table's CGROUP cell of a vCPU says where it runs: cpus=, cpusidle=,
 * order= and lvsteal= (known only in libvirt mode) and, last, its cgroup. */
static const UsMetric vcpu_metrics[] = {
	{ .unit = US_UNIT_TEXT, .get = domain_name, .label = "domain", .key = TRUE },
	{ .unit = US_UNIT_COUNT, .json = "id", .get = vcpu_id,
	  .label = "vcpu", .key = TRUE, .col = US_COL_DOMAIN, .pre = "  vCPU " },
	{ .unit = US_UNIT_COUNT, .json = "tid", .get = vcpu_tid,
	  .label = "tid", .col = US_COL_PID },
	{ .unit = US_UNIT_TEXT, .json = "cpus", .get = vcpu_cpus,
	  .col = US_COL_CGROUP, .pre = "cpus=", .none = "all" },
	{ .unit = US_UNIT_TEXT, .json = "cgroup", .get = vcpu_cgroup, .label = "cgroup" },
	{ .unit = US_UNIT_TEXT, .json = "placement", .get = vcpu_placement,
	  .label = "placement", .col = US_COL_PLACE },
	{ .unit = US_UNIT_RATIO, .json = "util_pct", .off = OFF(UsVcpuResult, util),
	  .prom = "vcpu_utilisation_ratio", .help = "Fraction of the interval the vCPU thread ran on a host CPU.",
	  .col = US_COL_UTIL },
	{ .unit = US_UNIT_RATIO, .json = "steal_pct", .off = OFF(UsVcpuResult, steal),
	  .prom = "vcpu_steal_ratio", .help = "Fraction of the interval the vCPU thread waited on a run queue (steal).",
	  .col = US_COL_STEAL },
	{ .unit = US_UNIT_RATIO, .json = "idle_steal_pct", .off = OFF(UsVcpuResult, idle_steal),
	  .prom = "vcpu_idle_steal_ratio", .help = "Part of the steal ratio that overlapped idle time of the host's CPUs (steal ratio x host idle fraction).",
	  .col = US_COL_IDLE_STEAL },
	{ .unit = US_UNIT_RATIO, .json = "busy_steal_pct", .off = OFF(UsVcpuResult, busy_steal),
	  .prom = "vcpu_busy_steal_ratio", .help = "Steal ratio minus idle steal ratio.",
	  .col = US_COL_BUSY_STEAL },
	{ .unit = US_UNIT_RATIO, .json = "allowed_idle_pct", .off = OFF(UsVcpuResult, allowed_idle),
	  .prom = "vcpu_allowed_idle_ratio", .help = "Idle fraction of the host CPUs the vCPU thread may run on (Cpus_allowed_list).",
	  .col = US_COL_CGROUP, .pre = " cpusidle=", .post = "%" },
	{ .unit = US_UNIT_SECONDS, .off = OFF(UsVcpuResult, run_s),
	  .prom = "vcpu_run_seconds_total", .counter = TRUE, .uuid = TRUE,
	  .help = "Time the vCPU thread ran on a host CPU (schedstat field 1)." },
	{ .unit = US_UNIT_SECONDS, .off = OFF(UsVcpuResult, wait_s),
	  .prom = "vcpu_wait_seconds_total", .counter = TRUE, .uuid = TRUE,
	  .help = "Time the vCPU thread waited on a run queue (schedstat field 2)." },
	{ .unit = US_UNIT_SECONDS, .get = vcpu_idle_wait_total,
	  .prom = "vcpu_idle_wait_seconds_total", .counter = TRUE, .uuid = TRUE,
	  .help = "Idle steal: run-queue wait of the vCPU thread while host CPUs were idle (each sampling interval's wait times the host idle fraction), summed since unsteal first measured the thread." },
	{ .unit = US_UNIT_SECONDS, .get = vcpu_busy_wait_total,
	  .prom = "vcpu_busy_wait_seconds_total", .counter = TRUE, .uuid = TRUE,
	  .help = "Busy steal: the rest of each sampling interval's run-queue wait of the vCPU thread, summed since unsteal first measured the thread." },
	{ .unit = US_UNIT_COUNT, .json = "order", .get = vcpu_order,
	  .col = US_COL_CGROUP, .pre = " order=" },
	{ .unit = US_UNIT_RATIO, .json = "libvirt_steal_pct", .get = vcpu_lv_steal,
	  .prom = "vcpu_libvirt_steal_ratio", .libvirt = TRUE,
	  .help = "Steal from libvirt's vcpu.N.delay over the interval between its two readings (cross-check).",
	  .col = US_COL_CGROUP, .pre = " lvsteal=", .post = "%" },
	{ .unit = US_UNIT_TEXT, .get = vcpu_cgroup,
	  .col = US_COL_CGROUP, .pre = " ", .none = "?" },
};

/* ------------------------------------- a domain's <cputune> (libvirt) */

#define TUNE(it) (&LV(it)->tune)

/* libvirt's 0 is "not set" */
#define TUNE_GET(field)							\
	static void							\
	tune_##field(const UsItem *it, UsValue *val)			\
	{								\
		val->have = TUNE(it)->field != 0;			\
		val->count = (gint64)TUNE(it)->field;			\
	}
TUNE_GET(period)
TUNE_GET(quota)
TUNE_GET(global_period)
TUNE_GET(global_quota)
TUNE_GET(emulator_period)
TUNE_GET(emulator_quota)
TUNE_GET(iothread_period)
TUNE_GET(iothread_quota)
#undef TUNE_GET

static void
tune_shares(const UsItem *it, UsValue *val)
{
	val->have = TUNE(it)->shares_set;
	val->count = (gint64)TUNE(it)->shares;
}

#define TUNE_LABEL(field) \
	{ .unit = US_UNIT_COUNT, .get = tune_##field, .label = #field }
static const UsMetric cputune_metrics[] = {
	{ .unit = US_UNIT_TEXT, .get = domain_name, .label = "domain", .key = TRUE },
	{ .unit = US_UNIT_TEXT, .get = domain_uuid, .label = "uuid" },
	TUNE_LABEL(shares),
	TUNE_LABEL(period),
	TUNE_LABEL(quota),
	TUNE_LABEL(global_period),
	TUNE_LABEL(global_quota),
	TUNE_LABEL(emulator_period),
	TUNE_LABEL(emulator_quota),
	TUNE_LABEL(iothread_period),
	TUNE_LABEL(iothread_quota),
};
#undef TUNE_LABEL

const UsEntity us_domain_entity = {
	.metrics = domain_metrics,
	.nmetrics = G_N_ELEMENTS(domain_metrics),
	.info = "domain_info",
	.info_help = "One per measured domain: its UUID when known, its own cgroup (group) and where its vCPU threads run (placement): own (below the domain's group), shared (outside it, e.g. a per-host vCPU group), mixed or unknown.",
	.info_known = TRUE,
};

const UsEntity us_cputune_entity = {
	.metrics = cputune_metrics,
	.nmetrics = G_N_ELEMENTS(cputune_metrics),
	.info = "domain_cputune_info",
	.info_help = "The <cputune> values set in the domain's libvirt definition, one label each, named and valued as in the XML (shares; periods and quotas in microseconds); a domain with none set has only its domain and uuid labels.",
	.info_known = TRUE,
};

const UsEntity us_libvirt_entity = {
	.metrics = libvirt_metrics,
	.nmetrics = G_N_ELEMENTS(libvirt_metrics),
	.info = "domain_libvirt_info",
	.info_help = "libvirt's view of the domain: id, uuid, tunables, the placement the per-host rule expects and the actual one.",
};

const UsEntity us_vcpu_entity = {
	.metrics = vcpu_metrics,
	.nmetrics = G_N_ELEMENTS(vcpu_metrics),
	.info = "vcpu_info",
	.info_help = "Placement of each vCPU thread: its cpu cgroup and whether that is the domain's own (own) or a shared group (shared).",
};
