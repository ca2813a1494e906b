/* SPDX-License-Identifier: GPL-2.0-or-later */
/* JSON lines (unsteal report --json): one object per interval. */
#include "output.h"
#include "output_metrics.h"

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

/* Replace a trailing comma by C, then add a comma. */
static void
json_close(GString *out, gchar c)
{
	if (out->str[out->len - 1] == ',')
		g_string_truncate(out, out->len - 1);
	g_string_append_c(out, c);
	g_string_append_c(out, ',');
}

static void
json_value(GString *out, const UsMetric *m, const UsValue *val)
{
	if (!val->have) {
		g_string_append(out, "null");
		return;
	}
	switch (m->unit) {
	case US_UNIT_COUNT:
		g_string_append_printf(out, "%" G_GINT64_FORMAT, val->count);
		break;
	case US_UNIT_RATIO:
		us_append_num(out, "%.2f", val->num * 100.0);
		break;
	case US_UNIT_VCPUS:
		us_append_num(out, "%.4f", val->num);
		break;
	case US_UNIT_SECONDS:
		us_append_num(out, "%.3f", val->num);
		break;
	case US_UNIT_THROTTLED:
		us_append_num(out, "%.3f", val->num * 1000.0);
		break;
	case US_UNIT_QUOTA:
		if (val->num < 0)
			g_string_append(out, "\"max\"");
		else
			us_append_num(out, "%.3f", val->num);
		break;
	case US_UNIT_TEXT:
		us_json_string(out, val->text);
		break;
	}
}

/* The members of E for IT, each followed by a comma. */
static void
json_members(GString *out, const UsEntity *e, const UsItem *it)
{
	const gchar *group = NULL;
	gboolean open = FALSE;

	for (guint i = 0; i < e->nmetrics; i++) {
		const UsMetric *m = &e->metrics[i];
		UsValue val;

		if (!m->json)
			continue;
		us_metric_value(m, it, &val);
		if (g_strcmp0(m->group, group) != 0) {
			if (open)
				json_close(out, '}');
			group = m->group;
			open = group && val.have;
			if (group) {
				json_key(out, group);
				g_string_append(out, open ? "{" : "null,");
			}
		}
		if (!group || open) {
			json_key(out, m->json);
			json_value(out, m, &val);
			g_string_append_c(out, ',');
		}
		us_value_clear(&val);
	}
	if (open)
		json_close(out, '}');
}

static void
json_domain(GString *out, const UsDomainResult *d)
{
	UsItem it = { .self = d, .domain = d };

	g_string_append_c(out, '{');
	json_members(out, &us_domain_entity, &it);
	json_key(out, "libvirt");
	if (d->lv) {
		g_string_append_c(out, '{');
		json_members(out, &us_libvirt_entity, &it);
		json_close(out, '}');
	} else {
		g_string_append(out, "null,");
	}
	json_key(out, "vcpu");
	g_string_append_c(out, '[');
	for (guint j = 0; j < d->vcpus->len; j++) {
		UsItem vit = { .self = g_ptr_array_index(d->vcpus, j), .domain = d };

		g_string_append_c(out, '{');
		json_members(out, &us_vcpu_entity, &vit);
		json_close(out, '}');
	}
	json_close(out, ']');
	json_close(out, '}');
}

void
us_output_json(GString *out, const UsResult *r, const UsOutputOptions *o)
{
	UsItem host = { .self = r };

	g_string_append_c(out, '{');
	if (!o || o->timestamp) {
		json_key(out, "timestamp");
		us_append_num(out, "%.3f", (gdouble)r->realtime_us / 1e6);
		g_string_append_c(out, ',');
	}
	json_key(out, "interval");
	us_append_num(out, "%.3f", r->interval);
	g_string_append_c(out, ',');

	json_key(out, "host");
	g_string_append_c(out, '{');
	json_members(out, &us_host_entity, &host);
	json_close(out, '}');
	json_key(out, "libvirt");
	if (r->libvirt == US_LV_UP)
		us_json_string(out, "connected");
	else if (r->libvirt == US_LV_DOWN)
		us_json_string(out, "disconnected");
	else
		g_string_append(out, "null");
	g_string_append_c(out, ',');

	json_key(out, "domains");
	g_string_append_c(out, '[');
	for (guint i = 0; i < r->domains->len; i++)
		json_domain(out, g_ptr_array_index(r->domains, i));
	json_close(out, ']');

	json_key(out, "cgroups");
	g_string_append_c(out, '[');
	for (guint i = 0; i < r->cgroups->len; i++) {
		UsItem it = { .self = g_ptr_array_index(r->cgroups, i) };

		g_string_append_c(out, '{');
		json_members(out, &us_cgroup_entity, &it);
		json_close(out, '}');
	}
	json_close(out, ']');

	json_key(out, "skipped");
	g_string_append_c(out, '[');
	for (guint i = 0; i < r->skipped->len; i++) {
		us_json_string(out, g_ptr_array_index(r->skipped, i));
		g_string_append_c(out, ',');
	}
	json_close(out, ']');
	/* the comma after the last member closes the line */
	g_string_truncate(out, out->len - 1);
	g_string_append(out, "}\n");
}
