/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "output.h"

#include <string.h>

/* All numbers are formatted with g_ascii_* so the locale never changes the
 * decimal separator. */
static void
append_num(GString *out, const gchar *fmt, gdouble v)
{
	gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

	/* avoid "-0.00" */
	if (v > -1e-12 && v < 1e-12)
		v = 0;
	g_ascii_formatd(buf, sizeof(buf), fmt, v);
	g_string_append(out, buf);
}

static void
append_pct(GString *out, gdouble ratio)
{
	append_num(out, "%.2f", ratio * 100.0);
}

/* ---------------------------------------------------------------- table */

static gchar *
fmt_pct(gdouble ratio)
{
	GString *s = g_string_new(NULL);

	append_num(s, "%.1f", ratio * 100.0);
	return g_string_free(s, FALSE);
}

static gchar *
fmt_quota(gboolean have, gdouble cpus)
{
	GString *s;

	if (!have)
		return g_strdup("?");
	if (cpus < 0)
		return g_strdup("-");
	s = g_string_new(NULL);
	append_num(s, "%.2f", cpus);
	return g_string_free(s, FALSE);
}

static void
throttle_cols(gboolean have, guint64 periods, guint64 throttled, gdouble ratio,
	      gchar **thr, gchar **thrms)
{
	GString *s;

	if (!have) {
		*thr = g_strdup("?");
		*thrms = g_strdup("?");
		return;
	}
	*thr = periods ? fmt_pct((gdouble)throttled / (gdouble)periods)
		       : g_strdup("0.0");
	s = g_string_new(NULL);
	append_num(s, "%.1f", ratio * 1000.0);
	*thrms = g_string_free(s, FALSE);
}

#define TABLE_HDR "%-20s %7s %5s %6s %6s %6s %6s %-5s %-7s %5s %7s %6s  %s\n"
/* libvirt mode: TUNABLES and EXPECT after PLACE */
#define TABLE_HDR_LV "%-20s %7s %5s %6s %6s %6s %6s %-5s %-7s %-8s %-6s %5s %7s %6s  %s\n"

static const gchar *
lv_tunables(const UsDomainResult *d)
{
	if (!d->lv)
		return "-";
	if (!d->lv->have_tune)
		return "?";
	return us_cputune_is_default(&d->lv->tune) ? "default" : "custom";
}

/* The placement the per-host rule expects, NULL when it is unknown. */
static const gchar *
expected_name(const UsDomainResult *d)
{
	return d->expected == US_PLACE_UNKNOWN ? NULL : us_placement_name(d->expected);
}

static const gchar *
lv_state(gint state)
{
	return state == US_LV_UP ? "connected" :
	       state == US_LV_DOWN ? "disconnected" : NULL;
}

void
us_output_table(GString *out, const UsResult *r, const UsOutputOptions *o)
{
	gchar *idle = fmt_pct(r->idle);
	GString *n = g_string_new(NULL);

	g_string_append_printf(n, "%u CPUs, idle %s%%, %u domains, %u vCPUs; steal ",
			       r->ncpus, idle, r->ndomains, r->nvcpus);
	append_num(n, "%.2f", r->steal);
	g_string_append(n, " vCPU (busy ");
	append_num(n, "%.2f", r->busy_steal);
	g_string_append(n, ", idle ");
	append_num(n, "%.2f", r->idle_steal);
	g_string_append(n, "), interval ");
	append_num(n, "%.2f", r->interval);
	g_string_append(n, " s");
	g_string_append_printf(out, "host: %s", n->str);
	if (r->libvirt == US_LV_UP)
		g_string_append(out, "; libvirt connected");
	else if (r->libvirt == US_LV_DOWN)
		g_string_append(out, "; libvirt DISCONNECTED, all QEMU processes from /proc");
	if (r->skipped->len)
		g_string_append_printf(out, "; %u skipped", r->skipped->len);
	g_string_append_c(out, '\n');
	g_free(idle);
	g_string_free(n, TRUE);

	if (r->libvirt)
		g_string_append_printf(out, TABLE_HDR_LV, "DOMAIN", "PID", "VCPUS",
				       "UTIL%", "STEAL%", "IDLST%", "BSYST%", "CLASS",
				       "PLACE", "TUNABLES", "EXPECT", "THR%",
				       "THRms/s", "QUOTA", "CGROUP");
	else
		g_string_append_printf(out, TABLE_HDR, "DOMAIN", "PID", "VCPUS", "UTIL%",
				       "STEAL%", "IDLST%", "BSYST%", "CLASS", "PLACE",
				       "THR%", "THRms/s", "QUOTA", "CGROUP");
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);
		gchar *u = fmt_pct(d->util), *s = fmt_pct(d->steal);
		gchar *is = fmt_pct(d->idle_steal), *bs = fmt_pct(d->busy_steal);
		gchar *thr, *thrms, *q = fmt_quota(d->have_quota, d->quota_cpus);
		gchar *pid = g_strdup_printf("%d", d->pid);
		gchar *nv = g_strdup_printf("%u", d->nvcpus);
		GString *cg = g_string_new(NULL);

		for (guint j = 0; j < d->cgroups->len; j++) {
			const UsCgroupResult *c = g_ptr_array_index(d->cgroups, j);

			g_string_append_printf(cg, "%s%s", j ? "," : "", c->path);
		}
		throttle_cols(d->have_throttle, d->periods, d->throttled,
			      d->throttled_ratio, &thr, &thrms);
		if (r->libvirt) {
			const gchar *exp = expected_name(d);

			g_string_append_printf(out, TABLE_HDR_LV, d->name, pid, nv, u,
					       s, is, bs, d->busy ? "busy" : "idle",
					       us_placement_name(d->placement),
					       lv_tunables(d), exp ? exp : "-", thr,
					       thrms, q, cg->len ? cg->str : "?");
		} else {
			g_string_append_printf(out, TABLE_HDR, d->name, pid, nv, u, s,
					       is, bs, d->busy ? "busy" : "idle",
					       us_placement_name(d->placement), thr,
					       thrms, q, cg->len ? cg->str : "?");
		}
		g_free(u); g_free(s); g_free(is); g_free(bs);
		g_free(thr); g_free(thrms); g_free(q); g_free(pid); g_free(nv);
		g_string_free(cg, TRUE);

		for (guint j = 0; o && o->vcpus && j < d->vcpus->len; j++) {
			const UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);
			gchar *label = g_strdup_printf("  vCPU %d", v->vcpu);
			gchar *tid = g_strdup_printf("%d", v->tid);
			gchar *hi = fmt_pct(v->allowed_idle);
			GString *where = g_string_new(NULL);

			g_string_append_printf(where, "cpus=%s cpusidle=%s%%",
					       v->cpus ? v->cpus : "all", hi);
			if (d->lv) {
				if (v->order >= 0)
					g_string_append_printf(where, " order=%d", v->order);
				if (v->have_lv_steal) {
					gchar *ls = fmt_pct(v->lv_steal);

					g_string_append_printf(where, " lvsteal=%s%%", ls);
					g_free(ls);
				}
			}
			g_string_append_printf(where, " %s", v->cgroup ? v->cgroup : "?");

			u = fmt_pct(v->util); s = fmt_pct(v->steal);
			is = fmt_pct(v->idle_steal); bs = fmt_pct(v->busy_steal);
			if (r->libvirt)
				g_string_append_printf(out, TABLE_HDR_LV, label, tid, "", u,
						       s, is, bs, "",
						       us_placement_name(v->placement),
						       "", "", "", "", "", where->str);
			else
				g_string_append_printf(out, TABLE_HDR, label, tid, "", u, s,
						       is, bs, "",
						       us_placement_name(v->placement),
						       "", "", "", where->str);
			g_free(label); g_free(tid); g_free(hi);
			g_string_free(where, TRUE);
			g_free(u); g_free(s); g_free(is); g_free(bs);
		}
	}
	if (r->domains->len == 0)
		g_string_append(out, "(no QEMU domains found)\n");
	for (guint i = 0; i < r->skipped->len; i++)
		g_string_append_printf(out, "skipped: %s\n",
				       (const gchar *)g_ptr_array_index(r->skipped, i));
}

/* ----------------------------------------------------------------- JSON */

void
us_json_string(GString *out, const gchar *s)
{
	g_string_append_c(out, '"');
	for (const guchar *p = (const guchar *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '"': g_string_append(out, "\\\""); break;
		case '\\': g_string_append(out, "\\\\"); break;
		case '\n': g_string_append(out, "\\n"); break;
		case '\r': g_string_append(out, "\\r"); break;
		case '\t': g_string_append(out, "\\t"); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				g_string_append_printf(out, "\\u%04x", *p);
			else
				g_string_append_c(out, (gchar)*p);
		}
	}
	g_string_append_c(out, '"');
}

static void
json_key(GString *out, const gchar *key)
{
	us_json_string(out, key);
	g_string_append_c(out, ':');
}

static void
json_pct(GString *out, const gchar *key, gdouble ratio)
{
	json_key(out, key);
	append_pct(out, ratio);
	g_string_append_c(out, ',');
}

static void
json_num(GString *out, const gchar *key, const gchar *fmt, gdouble v)
{
	json_key(out, key);
	append_num(out, fmt, v);
	g_string_append_c(out, ',');
}

static void
json_throttle(GString *out, gboolean have, guint64 periods, guint64 throttled,
	      gdouble ratio)
{
	json_key(out, "throttle");
	if (!have) {
		g_string_append(out, "null,");
		return;
	}
	g_string_append_printf(out, "{\"periods\":%" G_GUINT64_FORMAT
			       ",\"throttled\":%" G_GUINT64_FORMAT ",",
			       periods, throttled);
	json_num(out, "throttled_ms_per_s", "%.3f", ratio * 1000.0);
	g_string_truncate(out, out->len - 1);
	g_string_append(out, "},");
}

static void
json_quota(GString *out, gboolean have, gdouble cpus)
{
	json_key(out, "quota_cpus");
	if (!have)
		g_string_append(out, "null");
	else if (cpus < 0)
		g_string_append(out, "\"max\"");
	else
		append_num(out, "%.3f", cpus);
	g_string_append_c(out, ',');
}

static void
close_obj(GString *out, gchar c)
{
	if (out->str[out->len - 1] == ',')
		g_string_truncate(out, out->len - 1);
	g_string_append_c(out, c);
}

static void
json_libvirt(GString *out, const UsDomainResult *d)
{
	const gchar *exp;
	gchar *tune;

	json_key(out, "libvirt");
	if (!d->lv) {
		g_string_append(out, "null,");
		return;
	}
	g_string_append_printf(out, "{\"id\":%d,", d->lv->id);
	json_key(out, "uuid");
	us_json_string(out, d->lv->uuid);
	g_string_append_c(out, ',');
	json_key(out, "tunables");
	if (d->lv->have_tune)
		us_json_string(out, lv_tunables(d));
	else
		g_string_append(out, "null");
	g_string_append_c(out, ',');
	json_key(out, "cputune");
	tune = d->lv->have_tune ? us_cputune_describe(&d->lv->tune) : NULL;
	if (tune)
		us_json_string(out, tune);
	else
		g_string_append(out, "null");
	g_free(tune);
	g_string_append_c(out, ',');
	json_key(out, "expected_placement");
	exp = expected_name(d);
	if (exp)
		us_json_string(out, exp);
	else
		g_string_append(out, "null");
	g_string_append_c(out, ',');
	json_key(out, "vcpu_cgroup");
	if (d->lv->vcpu_cgroup)
		us_json_string(out, d->lv->vcpu_cgroup);
	else
		g_string_append(out, "null");
	g_string_append(out, "},");
}

void
us_output_json(GString *out, const UsResult *r, const UsOutputOptions *o)
{
	g_string_append_c(out, '{');
	if (!o || o->timestamp)
		json_num(out, "timestamp", "%.3f", (gdouble)r->realtime_us / 1e6);
	json_num(out, "interval", "%.3f", r->interval);

	json_key(out, "host");
	g_string_append_printf(out, "{\"cpus\":%u,", r->ncpus);
	json_pct(out, "idle_pct", r->idle);
	g_string_append_printf(out, "\"domains\":%u,\"vcpus\":%u,", r->ndomains,
			       r->nvcpus);
	json_num(out, "util_vcpus", "%.4f", r->util);
	json_num(out, "steal_vcpus", "%.4f", r->steal);
	json_num(out, "busy_steal_vcpus", "%.4f", r->busy_steal);
	json_num(out, "idle_steal_vcpus", "%.4f", r->idle_steal);
	close_obj(out, '}');
	g_string_append_c(out, ',');
	json_key(out, "libvirt");
	if (lv_state(r->libvirt))
		us_json_string(out, lv_state(r->libvirt));
	else
		g_string_append(out, "null");
	g_string_append_c(out, ',');

	json_key(out, "domains");
	g_string_append_c(out, '[');
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		g_string_append_c(out, '{');
		json_key(out, "name");
		us_json_string(out, d->name);
		g_string_append_printf(out, ",\"pid\":%d,\"vcpus\":%u,", d->pid,
				       d->nvcpus);
		json_pct(out, "util_pct", d->util);
		json_pct(out, "steal_pct", d->steal);
		json_pct(out, "idle_steal_pct", d->idle_steal);
		json_pct(out, "busy_steal_pct", d->busy_steal);
		g_string_append_printf(out, "\"class\":\"%s\",\"placement\":\"%s\",",
				       d->busy ? "busy" : "idle",
				       us_placement_name(d->placement));
		json_key(out, "group");
		if (d->group)
			us_json_string(out, d->group);
		else
			g_string_append(out, "null");
		g_string_append_c(out, ',');
		json_throttle(out, d->have_throttle, d->periods, d->throttled,
			      d->throttled_ratio);
		json_quota(out, d->have_quota, d->quota_cpus);
		json_libvirt(out, d);
		json_key(out, "vcpu");
		g_string_append_c(out, '[');
		for (guint j = 0; j < d->vcpus->len; j++) {
			const UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);

			g_string_append_printf(out, "{\"id\":%d,\"tid\":%d,", v->vcpu,
					       v->tid);
			json_key(out, "cpus");
			if (v->cpus)
				us_json_string(out, v->cpus);
			else
				g_string_append(out, "null");
			g_string_append_c(out, ',');
			json_key(out, "cgroup");
			if (v->cgroup)
				us_json_string(out, v->cgroup);
			else
				g_string_append(out, "null");
			g_string_append_printf(out, ",\"placement\":\"%s\",",
					       us_placement_name(v->placement));
			json_pct(out, "util_pct", v->util);
			json_pct(out, "steal_pct", v->steal);
			json_pct(out, "idle_steal_pct", v->idle_steal);
			json_pct(out, "busy_steal_pct", v->busy_steal);
			json_pct(out, "allowed_idle_pct", v->allowed_idle);
			json_key(out, "order");
			if (v->order >= 0)
				g_string_append_printf(out, "%d,", v->order);
			else
				g_string_append(out, "null,");
			json_key(out, "libvirt_steal_pct");
			if (v->have_lv_steal)
				append_pct(out, v->lv_steal);
			else
				g_string_append(out, "null");
			close_obj(out, '}');
			g_string_append_c(out, ',');
		}
		close_obj(out, ']');
		close_obj(out, '}');
		g_string_append_c(out, ',');
	}
	close_obj(out, ']');
	g_string_append_c(out, ',');

	json_key(out, "cgroups");
	g_string_append_c(out, '[');
	for (guint i = 0; i < r->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(r->cgroups, i);

		g_string_append_c(out, '{');
		json_key(out, "path");
		us_json_string(out, c->path);
		g_string_append_printf(out, ",\"version\":%d,\"vcpus\":%u,",
				       c->version, c->users);
		json_throttle(out, c->have_throttle, c->periods, c->throttled,
			      c->throttled_ratio);
		json_quota(out, c->have_quota, c->quota_cpus);
		json_key(out, "pressure_some_pct");
		if (c->have_pressure)
			append_pct(out, c->pressure_some);
		else
			g_string_append(out, "null");
		g_string_append(out, "},");
	}
	close_obj(out, ']');
	g_string_append_c(out, ',');

	json_key(out, "skipped");
	g_string_append_c(out, '[');
	for (guint i = 0; i < r->skipped->len; i++) {
		us_json_string(out, g_ptr_array_index(r->skipped, i));
		g_string_append_c(out, ',');
	}
	close_obj(out, ']');
	g_string_append(out, "}\n");
}

/* ----------------------------------------------------------- Prometheus */

void
us_prom_label_value(GString *out, const gchar *s)
{
	g_string_append_c(out, '"');
	for (const gchar *p = s ? s : ""; *p; p++) {
		if (*p == '\\')
			g_string_append(out, "\\\\");
		else if (*p == '"')
			g_string_append(out, "\\\"");
		else if (*p == '\n')
			g_string_append(out, "\\n");
		else
			g_string_append_c(out, *p);
	}
	g_string_append_c(out, '"');
}

static void
prom_head(GString *out, const gchar *name, const gchar *type, const gchar *help)
{
	g_string_append_printf(out, "# HELP unsteal_%s %s\n# TYPE unsteal_%s %s\n",
			       name, help, name, type);
}

static void
prom_value(GString *out, gdouble v)
{
	g_string_append_c(out, ' ');
	append_num(out, "%.6g", v);
	g_string_append_c(out, '\n');
}

static void
prom_host(GString *out, const gchar *name, const gchar *type,
	  const gchar *help, gdouble v)
{
	prom_head(out, name, type, help);
	g_string_append_printf(out, "unsteal_%s", name);
	prom_value(out, v);
}

typedef enum { F_UTIL, F_STEAL, F_IDLE_STEAL, F_BUSY_STEAL, F_HOST_IDLE,
	       F_RUN, F_WAIT } VcpuField;

static gdouble
vcpu_field(const UsVcpuResult *v, VcpuField f)
{
	switch (f) {
	case F_UTIL: return v->util;
	case F_STEAL: return v->steal;
	case F_IDLE_STEAL: return v->idle_steal;
	case F_BUSY_STEAL: return v->busy_steal;
	case F_HOST_IDLE: return v->allowed_idle;
	case F_RUN: return v->run_s;
	case F_WAIT: return v->wait_s;
	}
	return 0;
}

static void
prom_domain_labels(GString *out, const gchar *metric, const UsDomainResult *d)
{
	g_string_append_printf(out, "unsteal_%s{domain=", metric);
	us_prom_label_value(out, d->name);
	g_string_append_c(out, '}');
}

void
us_output_prometheus(GString *out, const UsResult *r, const UsOutputOptions *o)
{
	static const struct {
		const gchar *name, *type, *help;
		VcpuField f;
	} vm[] = {
		{ "vcpu_utilisation_ratio", "gauge", "Fraction of the interval the vCPU thread ran on a host CPU.", F_UTIL },
		{ "vcpu_steal_ratio", "gauge", "Fraction of the interval the vCPU thread waited on a run queue (steal).", F_STEAL },
		{ "vcpu_idle_steal_ratio", "gauge", "Part of the steal ratio that overlapped idle time of the host's CPUs (steal ratio x host idle fraction).", F_IDLE_STEAL },
		{ "vcpu_busy_steal_ratio", "gauge", "Steal ratio minus idle steal ratio.", F_BUSY_STEAL },
		{ "vcpu_allowed_idle_ratio", "gauge", "Idle fraction of the host CPUs the vCPU thread may run on (Cpus_allowed_list).", F_HOST_IDLE },
		{ "vcpu_run_seconds_total", "counter", "Time the vCPU thread ran on a host CPU (schedstat field 1).", F_RUN },
		{ "vcpu_wait_seconds_total", "counter", "Time the vCPU thread waited on a run queue (schedstat field 2).", F_WAIT },
	};
	static const struct {
		const gchar *name, *help;
		gsize off;
	} dm[] = {
		{ "domain_utilisation_ratio", "Mean vCPU utilisation of the domain.", G_STRUCT_OFFSET(UsDomainResult, util) },
		{ "domain_steal_ratio", "Mean vCPU steal of the domain (what the guest sees as steal).", G_STRUCT_OFFSET(UsDomainResult, steal) },
		{ "domain_idle_steal_ratio", "Mean vCPU idle steal of the domain.", G_STRUCT_OFFSET(UsDomainResult, idle_steal) },
		{ "domain_busy_steal_ratio", "Mean vCPU busy steal of the domain.", G_STRUCT_OFFSET(UsDomainResult, busy_steal) },
	};

	(void)o;
	prom_host(out, "interval_seconds", "gauge", "Length of the sampling interval.", r->interval);
	prom_host(out, "host_cpus", "gauge", "Host CPUs listed in /proc/stat.", r->ncpus);
	prom_host(out, "host_idle_ratio", "gauge", "Host idle (idle+iowait) fraction over all CPUs.", r->idle);
	prom_host(out, "host_domains", "gauge", "QEMU domains measured.", r->ndomains);
	prom_host(out, "host_vcpus", "gauge", "vCPU threads measured.", r->nvcpus);
	prom_host(out, "host_utilisation_vcpus", "gauge", "Sum of vCPU utilisation, in vCPU-seconds per second.", r->util);
	prom_host(out, "host_steal_vcpus", "gauge", "Sum of vCPU steal, in vCPU-seconds per second.", r->steal);
	prom_host(out, "host_busy_steal_vcpus", "gauge", "Sum of vCPU busy steal, in vCPU-seconds per second.", r->busy_steal);
	prom_host(out, "host_idle_steal_vcpus", "gauge", "Sum of vCPU idle steal, in vCPU-seconds per second.", r->idle_steal);
	prom_host(out, "skipped", "gauge", "Items skipped in this sample (exited threads, unreadable files).", r->skipped->len);

	prom_head(out, "domain_vcpus", "gauge", "vCPU threads of the domain.");
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		prom_domain_labels(out, "domain_vcpus", d);
		prom_value(out, d->nvcpus);
	}
	for (guint k = 0; k < G_N_ELEMENTS(dm); k++) {
		prom_head(out, dm[k].name, "gauge", dm[k].help);
		for (guint i = 0; i < r->domains->len; i++) {
			const UsDomainResult *d = g_ptr_array_index(r->domains, i);

			prom_domain_labels(out, dm[k].name, d);
			prom_value(out, G_STRUCT_MEMBER(gdouble, d, dm[k].off));
		}
	}
	prom_head(out, "domain_busy", "gauge", "1 when utilisation + steal reaches the busy threshold, else 0.");
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		prom_domain_labels(out, "domain_busy", d);
		prom_value(out, d->busy ? 1 : 0);
	}
	prom_head(out, "domain_throttled_ratio", "gauge", "Throttled time per second, summed over the domain's vCPU cgroups.");
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		if (!d->have_throttle)
			continue;
		prom_domain_labels(out, "domain_throttled_ratio", d);
		prom_value(out, d->throttled_ratio);
	}

	for (guint k = 0; k < G_N_ELEMENTS(vm); k++) {
		prom_head(out, vm[k].name, vm[k].type, vm[k].help);
		for (guint i = 0; i < r->domains->len; i++) {
			const UsDomainResult *d = g_ptr_array_index(r->domains, i);

			for (guint j = 0; j < d->vcpus->len; j++) {
				const UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);

				g_string_append_printf(out, "unsteal_%s{domain=", vm[k].name);
				us_prom_label_value(out, d->name);
				g_string_append_printf(out, ",vcpu=\"%d\"}", v->vcpu);
				prom_value(out, vcpu_field(v, vm[k].f));
			}
		}
	}
	if (r->libvirt) {
		prom_host(out, "libvirt_connected", "gauge", "1 when the libvirt connection (--connect) worked in this sample, 0 when domains came from scanning /proc.", r->libvirt == US_LV_UP);
		prom_head(out, "domain_tunables_default", "gauge", "1 when the domain's vCPU CPU tunables are at their defaults (the per-host vCPU cgroup rule shares its vCPUs), 0 when custom.");
		for (guint i = 0; i < r->domains->len; i++) {
			const UsDomainResult *d = g_ptr_array_index(r->domains, i);

			if (!d->lv || !d->lv->have_tune)
				continue;
			prom_domain_labels(out, "domain_tunables_default", d);
			prom_value(out, us_cputune_is_default(&d->lv->tune));
		}
		prom_head(out, "domain_libvirt_info", "gauge", "libvirt's view of the domain: id, uuid, tunables, the placement the per-host rule expects and the actual one.");
		for (guint i = 0; i < r->domains->len; i++) {
			const UsDomainResult *d = g_ptr_array_index(r->domains, i);
			const gchar *exp = expected_name(d);

			if (!d->lv)
				continue;
			g_string_append(out, "unsteal_domain_libvirt_info{domain=");
			us_prom_label_value(out, d->name);
			g_string_append_printf(out, ",id=\"%d\",uuid=", d->lv->id);
			us_prom_label_value(out, d->lv->uuid);
			g_string_append_printf(out, ",tunables=\"%s\",expected_placement=\"%s\",placement=\"%s\",vcpu_cgroup=",
					       d->lv->have_tune ? lv_tunables(d) : "",
					       exp ? exp : "", us_placement_name(d->placement));
			us_prom_label_value(out, d->lv->vcpu_cgroup ? d->lv->vcpu_cgroup : "");
			g_string_append(out, "} 1\n");
		}
		prom_head(out, "vcpu_libvirt_steal_ratio", "gauge", "Steal from libvirt's vcpu.N.delay over the interval between its two readings (cross-check).");
		for (guint i = 0; i < r->domains->len; i++) {
			const UsDomainResult *d = g_ptr_array_index(r->domains, i);

			for (guint j = 0; j < d->vcpus->len; j++) {
				const UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);

				if (!v->have_lv_steal)
					continue;
				g_string_append(out, "unsteal_vcpu_libvirt_steal_ratio{domain=");
				us_prom_label_value(out, d->name);
				g_string_append_printf(out, ",vcpu=\"%d\"}", v->vcpu);
				prom_value(out, v->lv_steal);
			}
		}
	}
	prom_head(out, "vcpu_info", "gauge", "Placement of each vCPU thread: its cpu cgroup and whether that is the domain's own (own) or a shared group (shared).");
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		for (guint j = 0; j < d->vcpus->len; j++) {
			const UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);

			g_string_append(out, "unsteal_vcpu_info{domain=");
			us_prom_label_value(out, d->name);
			g_string_append_printf(out, ",vcpu=\"%d\",tid=\"%d\",cgroup=",
					       v->vcpu, v->tid);
			us_prom_label_value(out, v->cgroup ? v->cgroup : "");
			g_string_append_printf(out, ",placement=\"%s\"} 1\n",
					       us_placement_name(v->placement));
		}
	}

	prom_head(out, "cgroup_throttled_periods", "gauge", "CFS periods in the interval in which the cgroup was throttled (delta of nr_throttled).");
	for (guint i = 0; i < r->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(r->cgroups, i);

		if (!c->have_throttle)
			continue;
		g_string_append(out, "unsteal_cgroup_throttled_periods{cgroup=");
		us_prom_label_value(out, c->path);
		g_string_append(out, "}");
		prom_value(out, (gdouble)c->throttled);
	}
	prom_head(out, "cgroup_periods", "gauge", "CFS enforcement periods of the cgroup in the interval (delta of nr_periods).");
	for (guint i = 0; i < r->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(r->cgroups, i);

		if (!c->have_throttle)
			continue;
		g_string_append(out, "unsteal_cgroup_periods{cgroup=");
		us_prom_label_value(out, c->path);
		g_string_append(out, "}");
		prom_value(out, (gdouble)c->periods);
	}
	prom_head(out, "cgroup_throttled_ratio", "gauge", "Throttled time of the cgroup per second of the interval.");
	for (guint i = 0; i < r->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(r->cgroups, i);

		if (!c->have_throttle)
			continue;
		g_string_append(out, "unsteal_cgroup_throttled_ratio{cgroup=");
		us_prom_label_value(out, c->path);
		g_string_append(out, "}");
		prom_value(out, c->throttled_ratio);
	}
	prom_head(out, "cgroup_quota_cpus", "gauge", "CPU bandwidth limit of the cgroup in CPUs (quota/period); absent when unlimited.");
	for (guint i = 0; i < r->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(r->cgroups, i);

		if (!c->have_quota || c->quota_cpus < 0)
			continue;
		g_string_append(out, "unsteal_cgroup_quota_cpus{cgroup=");
		us_prom_label_value(out, c->path);
		g_string_append(out, "}");
		prom_value(out, c->quota_cpus);
	}
	prom_head(out, "cgroup_cpu_pressure_some_ratio", "gauge", "Share of the interval in which some task of the cgroup waited for a CPU (cpu.pressure, cgroup v2).");
	for (guint i = 0; i < r->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(r->cgroups, i);

		if (!c->have_pressure)
			continue;
		g_string_append(out, "unsteal_cgroup_cpu_pressure_some_ratio{cgroup=");
		us_prom_label_value(out, c->path);
		g_string_append(out, "}");
		prom_value(out, c->pressure_some);
	}
}
