/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The terminal table (unsteal top): the host line, then one row per domain
 * and, with --vcpus, one per vCPU under it. */
#include "output.h"
#include "output_metrics.h"

static const struct {
	const gchar *head;
	gint width;          /* printf field width, < 0 left-aligned */
	gboolean libvirt;    /* only in libvirt mode */
} columns[US_COL_LAST] = {
	[US_COL_DOMAIN] = { "DOMAIN", -20 },
	[US_COL_PID] = { "PID", 7 },
	[US_COL_VCPUS] = { "VCPUS", 5 },
	[US_COL_UTIL] = { "UTIL%", 6 },
	[US_COL_STEAL] = { "STEAL%", 6 },
	[US_COL_IDLE_STEAL] = { "IDLST%", 6 },
	[US_COL_BUSY_STEAL] = { "BSYST%", 6 },
	[US_COL_CLASS] = { "CLASS", -5 },
	[US_COL_PLACE] = { "PLACE", -7 },
	[US_COL_TUNABLES] = { "TUNABLES", -8, TRUE },
	[US_COL_EXPECT] = { "EXPECT", -6, TRUE },
	[US_COL_THROTTLED] = { "THR%", 5 },
	[US_COL_THROTTLED_MS] = { "THRms/s", 7 },
	[US_COL_QUOTA] = { "QUOTA", 6 },
	[US_COL_CGROUP] = { "CGROUP", 0 },
};

static void
table_value(GString *out, const UsMetric *m, const UsValue *val)
{
	switch (m->unit) {
	case US_UNIT_COUNT:
		g_string_append_printf(out, "%" G_GINT64_FORMAT, val->count);
		break;
	case US_UNIT_RATIO:
		us_append_num(out, "%.1f", val->num * 100.0);
		break;
	case US_UNIT_VCPUS:
	case US_UNIT_SECONDS:
		us_append_num(out, "%.2f", val->num);
		break;
	case US_UNIT_THROTTLED:
		us_append_num(out, "%.1f", val->num * 1000.0);
		break;
	case US_UNIT_QUOTA:
		if (val->num < 0)
			g_string_append_c(out, '-');
		else
			us_append_num(out, "%.2f", val->num);
		break;
	case US_UNIT_TEXT:
		g_string_append(out, val->text);
		break;
	}
}

/* Add the pieces of E's metrics for IT to their CELLS. */
static void
table_cells(GString **cells, const UsEntity *e, const UsItem *it)
{
	for (guint i = 0; i < e->nmetrics; i++) {
		const UsMetric *m = &e->metrics[i];
		GString *cell = cells[m->col];
		UsValue val;

		if (m->col == US_COL_NONE)
			continue;
		us_metric_value(m, it, &val);
		if (val.have || m->none) {
			g_string_append(cell, m->pre ? m->pre : "");
			if (val.have)
				table_value(cell, m, &val);
			else
				g_string_append(cell, m->none);
			g_string_append(cell, m->post ? m->post : "");
		}
		us_value_clear(&val);
	}
}

/* One line of the columns, the last one free-width after two spaces;
 * empties CELLS. */
static void
table_line(GString *out, GString **cells, gboolean libvirt)
{
	for (guint c = US_COL_DOMAIN; c < US_COL_LAST; c++) {
		if (!columns[c].libvirt || libvirt) {
			if (c > US_COL_DOMAIN)
				g_string_append(out, c == US_COL_CGROUP ? "  " : " ");
			g_string_append_printf(out, "%*s", columns[c].width,
					       cells[c]->str);
		}
		g_string_truncate(cells[c], 0);
	}
	g_string_append_c(out, '\n');
}

static void
table_host(GString *out, GString **cells, const UsResult *r)
{
	UsItem it = { .self = r };

	table_cells(cells, &us_host_entity, &it);
	g_string_append_printf(out, "host: %s, interval ", cells[US_COL_LINE]->str);
	g_string_truncate(cells[US_COL_LINE], 0);
	us_append_num(out, "%.2f", r->interval);
	g_string_append(out, " s");
	if (r->libvirt == US_LV_UP)
		g_string_append(out, "; libvirt connected");
	else if (r->libvirt == US_LV_DOWN)
		g_string_append(out, "; libvirt DISCONNECTED, all QEMU processes from /proc");
	if (r->skipped->len)
		g_string_append_printf(out, "; %u skipped", r->skipped->len);
	g_string_append_c(out, '\n');
}

void
us_output_table(GString *out, const UsResult *r, const UsOutputOptions *o)
{
	GString *cells[US_COL_LAST];

	for (guint c = 0; c < US_COL_LAST; c++)
		cells[c] = g_string_new(NULL);

	table_host(out, cells, r);
	for (guint c = US_COL_DOMAIN; c < US_COL_LAST; c++)
		g_string_append(cells[c], columns[c].head);
	table_line(out, cells, r->libvirt);

	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);
		UsItem it = { .self = d, .domain = d };

		table_cells(cells, &us_domain_entity, &it);
		if (d->lv) {
			table_cells(cells, &us_libvirt_entity, &it);
		} else {
			g_string_append_c(cells[US_COL_TUNABLES], '-');
			g_string_append_c(cells[US_COL_EXPECT], '-');
		}
		table_line(out, cells, r->libvirt);

		for (guint j = 0; o && o->vcpus && j < d->vcpus->len; j++) {
			UsItem vit = { .self = g_ptr_array_index(d->vcpus, j), .domain = d };

			table_cells(cells, &us_vcpu_entity, &vit);
			table_line(out, cells, r->libvirt);
		}
	}
	if (r->domains->len == 0)
		g_string_append(out, "(no QEMU domains found)\n");
	for (guint i = 0; i < r->skipped->len; i++)
		g_string_append_printf(out, "skipped: %s\n",
				       (const gchar *)g_ptr_array_index(r->skipped, i));

	for (guint c = 0; c < US_COL_LAST; c++)
		g_string_free(cells[c], TRUE);
}
