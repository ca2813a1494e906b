/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "lvinfo.h"

#include <string.h>

#define US_DEFAULT_SHARES 1024
#define US_DEFAULT_PERIOD 100000

gboolean
us_cputune_is_default(const UsCputune *t)
{
	if (t->shares_set && t->shares != US_DEFAULT_SHARES)
		return FALSE;
	if (t->period != 0 && t->period != US_DEFAULT_PERIOD)
		return FALSE;
	if (t->quota > 0)
		return FALSE;
	if (t->global_period != 0 && t->global_period != US_DEFAULT_PERIOD)
		return FALSE;
	if (t->global_quota > 0)
		return FALSE;
	return TRUE;
}

gboolean
us_cputune_is_vcpu_bandwidth_only(const UsCputune *t)
{
	UsCputune rest = *t;

	rest.period = 0;
	rest.quota = 0;
	return !us_cputune_is_default(t) && us_cputune_is_default(&rest);
}

gchar *
us_cputune_describe(const UsCputune *t)
{
	GString *s = g_string_new(NULL);

#define U(name, v) if (v) g_string_append_printf(s, "%s" name "=%" G_GUINT64_FORMAT, s->len ? "," : "", (guint64)(v))
#define I(name, v) if (v) g_string_append_printf(s, "%s" name "=%" G_GINT64_FORMAT, s->len ? "," : "", (gint64)(v))
	if (t->shares_set)
		g_string_append_printf(s, "shares=%" G_GUINT64_FORMAT, t->shares);
	U("period", t->period);
	I("quota", t->quota);
	U("global_period", t->global_period);
	I("global_quota", t->global_quota);
	U("emulator_period", t->emulator_period);
	I("emulator_quota", t->emulator_quota);
	U("iothread_period", t->iothread_period);
	I("iothread_quota", t->iothread_quota);
#undef U
#undef I
	return g_string_free(s, FALSE);
}

UsLvDomain *
us_lv_domain_new(void)
{
	UsLvDomain *d = g_new0(UsLvDomain, 1);

	d->id = -1;
	d->vcpus = g_array_new(FALSE, TRUE, sizeof(UsLvVcpu));
	return d;
}

void
us_lv_domain_free(UsLvDomain *d)
{
	if (!d)
		return;
	g_free(d->name);
	g_free(d->uuid);
	g_free(d->vcpu_cgroup);
	g_array_free(d->vcpus, TRUE);
	g_free(d);
}

UsLvDomain *
us_lv_domain_copy(const UsLvDomain *d)
{
	UsLvDomain *c;

	if (!d)
		return NULL;
	c = us_lv_domain_new();
	c->name = g_strdup(d->name);
	c->uuid = g_strdup(d->uuid);
	c->id = d->id;
	c->have_tune = d->have_tune;
	c->tune = d->tune;
	c->vcpu_cgroup = g_strdup(d->vcpu_cgroup);
	c->stats_time = d->stats_time;
	g_array_append_vals(c->vcpus, d->vcpus->data, d->vcpus->len);
	return c;
}

const UsLvVcpu *
us_lv_domain_vcpu_const(const UsLvDomain *d, gint id)
{
	for (guint i = 0; d && i < d->vcpus->len; i++) {
		const UsLvVcpu *v = &g_array_index(d->vcpus, UsLvVcpu, i);

		if (v->id == id)
			return v;
	}
	return NULL;
}

UsLvVcpu *
us_lv_domain_vcpu(UsLvDomain *d, gint id, gboolean add)
{
	UsLvVcpu nv = { .id = id, .enabled = TRUE, .order = -1 };
	guint i;

	for (i = 0; i < d->vcpus->len; i++) {
		UsLvVcpu *v = &g_array_index(d->vcpus, UsLvVcpu, i);

		if (v->id == id)
			return v;
		if (v->id > id)
			break;
	}
	if (!add)
		return NULL;
	g_array_insert_val(d->vcpus, i, nv);
	return &g_array_index(d->vcpus, UsLvVcpu, i);
}

gchar *
us_uuid_normalize(const gchar *s)
{
	GString *hex;
	gchar *out;

	if (!s)
		return NULL;
	hex = g_string_new(NULL);
	for (const gchar *p = s; *p; p++) {
		if (g_ascii_isxdigit(*p))
			g_string_append_c(hex, g_ascii_tolower(*p));
		else if (*p != '-' || hex->len == 0) {
			g_string_free(hex, TRUE);
			return NULL;
		}
	}
	if (hex->len != 32 || s[strlen(s) - 1] == '-') {
		g_string_free(hex, TRUE);
		return NULL;
	}
	out = g_strdup_printf("%.8s-%.4s-%.4s-%.4s-%.12s", hex->str, hex->str + 8,
			      hex->str + 12, hex->str + 16, hex->str + 20);
	g_string_free(hex, TRUE);
	return out;
}
