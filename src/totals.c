/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "totals.h"

typedef struct {
	gdouble idle_wait_s;
	gdouble busy_wait_s;
} ThreadTotals;

struct _UsTotals {
	GHashTable *threads;   /* gint64 (pid << 32 | tid) -> ThreadTotals */
	gboolean have_host_idle;
	gdouble host_idle_s;
};

static GHashTable *
table_new(void)
{
	return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
}

UsTotals *
us_totals_new(void)
{
	UsTotals *t = g_new0(UsTotals, 1);

	t->threads = table_new();
	return t;
}

void
us_totals_free(UsTotals *t)
{
	if (!t)
		return;
	g_hash_table_destroy(t->threads);
	g_free(t);
}

guint
us_totals_size(const UsTotals *t)
{
	return g_hash_table_size(t->threads);
}

void
us_totals_add(UsTotals *t, UsResult *r)
{
	GHashTable *next = table_new();

	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		for (guint j = 0; j < d->vcpus->len; j++) {
			UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);
			gint64 key = ((gint64)d->pid << 32) | (guint32)v->tid;
			const ThreadTotals *old = g_hash_table_lookup(t->threads, &key);
			ThreadTotals *e = g_new0(ThreadTotals, 1);
			gint64 *k = g_new(gint64, 1);

			if (old)
				*e = *old;
			/* both parts are >= 0 (model.c): never decreasing */
			e->idle_wait_s += MAX(v->idle_wait_s, 0.0);
			e->busy_wait_s += MAX(v->busy_wait_s, 0.0);
			v->have_totals = TRUE;
			v->idle_wait_total_s = e->idle_wait_s;
			v->busy_wait_total_s = e->busy_wait_s;
			*k = key;
			g_hash_table_replace(next, k, e);
		}
	}
	/* threads not measured in this interval are dropped */
	g_hash_table_destroy(t->threads);
	t->threads = next;

	if (r->have_idle_total) {
		if (t->have_host_idle && r->idle_total_s < t->host_idle_s)
			r->idle_total_s = t->host_idle_s;
		t->have_host_idle = TRUE;
		t->host_idle_s = r->idle_total_s;
	}
}
