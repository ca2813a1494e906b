/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Prometheus text exposition (unsteal report --prometheus). */
#include "output.h"
#include "output_metrics.h"

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
	us_append_num(out, "%.6g", v);
	g_string_append_c(out, '\n');
}

/* A counter in seconds: fixed point to the microsecond, so that a large
 * total keeps the precision a rate over a short window needs. */
static void
prom_counter(GString *out, gdouble v)
{
	g_string_append_c(out, ' ');
	us_append_num(out, "%.6f", v);
	g_string_append_c(out, '\n');
}

/* A gauge of the sample itself, without labels. */
static void
prom_sample(GString *out, const gchar *name, const gchar *help, gdouble v)
{
	prom_head(out, name, "gauge", help);
	g_string_append_printf(out, "unsteal_%s", name);
	prom_value(out, v);
}

/* The key labels of E for IT, or with INFO all of them; with UUID a "uuid"
 * label too when the domain's UUID is known. */
static void
prom_labels(GString *out, const UsEntity *e, const UsItem *it, gboolean info,
	    gboolean uuid)
{
	gboolean first = TRUE;

	for (guint i = 0; i < e->nmetrics; i++) {
		const UsMetric *m = &e->metrics[i];
		UsValue val;

		if (!m->label || !(info || m->key))
			continue;
		us_metric_value(m, it, &val);
		if (info && e->info_known && !val.have) {
			us_value_clear(&val);
			continue;
		}
		g_string_append_printf(out, "%s%s=", first ? "{" : ",", m->label);
		first = FALSE;
		if (m->unit == US_UNIT_COUNT && val.have)
			g_string_append_printf(out, "\"%" G_GINT64_FORMAT "\"", val.count);
		else
			us_prom_label_value(out, val.have ? val.text : "");
		us_value_clear(&val);
	}
	if (uuid && it->domain && it->domain->uuid) {
		g_string_append_printf(out, "%suuid=", first ? "{" : ",");
		first = FALSE;
		us_prom_label_value(out, it->domain->uuid);
	}
	if (!first)
		g_string_append_c(out, '}');
}

/* E's metrics over ITEMS: those written among the libvirt ones when
 * LIBVIRT, the others when not. */
static void
prom_metrics(GString *out, const UsEntity *e, const GArray *items,
	     gboolean libvirt)
{
	for (guint i = 0; i < e->nmetrics; i++) {
		const UsMetric *m = &e->metrics[i];

		if (!m->prom || m->libvirt != libvirt)
			continue;
		prom_head(out, m->prom, m->counter ? "counter" : "gauge", m->help);
		for (guint j = 0; j < items->len; j++) {
			const UsItem *it = &g_array_index(items, UsItem, j);
			UsValue val;

			us_metric_value(m, it, &val);
			if (val.have && !(m->unit == US_UNIT_QUOTA && val.num < 0)) {
				g_string_append_printf(out, "unsteal_%s", m->prom);
				prom_labels(out, e, it, FALSE, m->uuid);
				if (m->counter && m->unit != US_UNIT_COUNT)
					prom_counter(out, val.num);
				else
					prom_value(out, m->unit == US_UNIT_COUNT ?
						   (gdouble)val.count : val.num);
			}
			us_value_clear(&val);
		}
	}
}

/* E's info metric over ITEMS. */
static void
prom_info(GString *out, const UsEntity *e, const GArray *items)
{
	prom_head(out, e->info, "gauge", e->info_help);
	for (guint j = 0; j < items->len; j++) {
		g_string_append_printf(out, "unsteal_%s", e->info);
		prom_labels(out, e, &g_array_index(items, UsItem, j), TRUE, FALSE);
		g_string_append(out, " 1\n");
	}
}

static void
add_item(GArray *items, gconstpointer self, const UsDomainResult *d)
{
	UsItem it = { .self = self, .domain = d };

	g_array_append_val(items, it);
}

void
us_output_prometheus(GString *out, const UsResult *r, const UsOutputOptions *o)
{
	GArray *host = g_array_new(FALSE, FALSE, sizeof(UsItem));
	GArray *domains = g_array_new(FALSE, FALSE, sizeof(UsItem));
	GArray *libvirt = g_array_new(FALSE, FALSE, sizeof(UsItem));
	GArray *cputune = g_array_new(FALSE, FALSE, sizeof(UsItem));
	GArray *vcpus = g_array_new(FALSE, FALSE, sizeof(UsItem));
	GArray *cgroups = g_array_new(FALSE, FALSE, sizeof(UsItem));

	(void)o;
	add_item(host, r, NULL);
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		add_item(domains, d, d);
		if (d->lv)
			add_item(libvirt, d, d);
		if (d->lv && d->lv->have_tune)
			add_item(cputune, d, d);
		for (guint j = 0; j < d->vcpus->len; j++)
			add_item(vcpus, g_ptr_array_index(d->vcpus, j), d);
	}
	for (guint i = 0; i < r->cgroups->len; i++)
		add_item(cgroups, g_ptr_array_index(r->cgroups, i), NULL);

	prom_sample(out, "interval_seconds", "Length of the sampling interval.",
		    r->interval);
	prom_metrics(out, &us_host_entity, host, FALSE);
	prom_sample(out, "skipped", "Items skipped in this sample (exited threads, unreadable files).",
		    r->skipped->len);
	prom_metrics(out, &us_domain_entity, domains, FALSE);
	prom_info(out, &us_domain_entity, domains);
	prom_metrics(out, &us_vcpu_entity, vcpus, FALSE);
	if (r->libvirt) {
		prom_sample(out, "libvirt_connected", "1 when the libvirt connection (--connect) worked in this sample, 0 when domains came from scanning /proc.",
			    r->libvirt == US_LV_UP);
		/* libvirt's view: only here, so none of its metrics is flagged */
		prom_metrics(out, &us_libvirt_entity, libvirt, FALSE);
		prom_info(out, &us_libvirt_entity, libvirt);
		prom_info(out, &us_cputune_entity, cputune);
		prom_metrics(out, &us_vcpu_entity, vcpus, TRUE);
	}
	prom_info(out, &us_vcpu_entity, vcpus);
	prom_metrics(out, &us_cgroup_entity, cgroups, FALSE);

	g_array_free(host, TRUE);
	g_array_free(domains, TRUE);
	g_array_free(libvirt, TRUE);
	g_array_free(cputune, TRUE);
	g_array_free(vcpus, TRUE);
	g_array_free(cgroups, TRUE);
}
