/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "libvirt.h"

#include <string.h>
#include <time.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "util.h"

struct UsLibvirt {
	gchar *uri;
	virConnectPtr conn;
	gboolean was_connected;  /* a connection existed at some point */
};

/* libvirt prints errors on stderr by default; we report them ourselves. */
static void
quiet_error(void *opaque, virErrorPtr err)
{
	(void)opaque;
	(void)err;
}

static gchar *
last_error(void)
{
	const char *m = virGetLastErrorMessage();

	return g_strdup(m && *m ? m : "unknown error");
}

UsLibvirt *
us_libvirt_new(const gchar *uri)
{
	UsLibvirt *lv = g_new0(UsLibvirt, 1);

	virSetErrorFunc(NULL, quiet_error);
	lv->uri = g_strdup(uri);
	return lv;
}

void
us_libvirt_free(UsLibvirt *lv)
{
	if (!lv)
		return;
	if (lv->conn)
		virConnectClose(lv->conn);
	g_free(lv->uri);
	g_free(lv);
}

static void
drop_connection(UsLibvirt *lv)
{
	if (lv->conn) {
		virConnectClose(lv->conn);
		lv->conn = NULL;
	}
}

static void
note_down(UsLibvirt *lv, UsSnapshot *snap, const gchar *why)
{
	us_note(snap->notes, "libvirt: %s %s (%s); scanning /proc for QEMU "
		"processes, reconnecting every interval",
		lv->was_connected ? "connection lost to" : "cannot connect to",
		lv->uri, why);
	snap->libvirt = US_LV_DOWN;
}

/* vcpu.N.delay, vcpu.N.time and cpu.vcpu_cgroup of one stats record. */
static void
apply_stats(UsLvDomain *d, virTypedParameterPtr p, int n)
{
	for (int i = 0; i < n; i++) {
		const gchar *f = p[i].field;

		if (g_str_has_prefix(f, "vcpu.")) {
			gchar **parts = g_strsplit(f, ".", 3);
			guint64 id;

			if (g_strv_length(parts) == 3 && us_parse_u64(parts[1], &id) &&
			    id < 65536 && p[i].type == VIR_TYPED_PARAM_ULLONG) {
				if (strcmp(parts[2], "delay") == 0) {
					UsLvVcpu *v = us_lv_domain_vcpu(d, (gint)id, TRUE);

					v->have_delay = TRUE;
					v->delay_ns = p[i].value.ul;
				} else if (strcmp(parts[2], "time") == 0) {
					UsLvVcpu *v = us_lv_domain_vcpu(d, (gint)id, TRUE);

					v->have_time = TRUE;
					v->time_ns = p[i].value.ul;
				}
			}
			g_strfreev(parts);
		} else if (strcmp(f, "cpu.vcpu_cgroup") == 0 &&
			   p[i].type == VIR_TYPED_PARAM_STRING) {
			g_free(d->vcpu_cgroup);
			d->vcpu_cgroup = g_strdup(p[i].value.s);
		}
	}
}

static gdouble
boottime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (gdouble)ts.tv_sec + (gdouble)ts.tv_nsec / 1e9;
}

/* Parse XML into D, keeping the statistics already in D->vcpus. */
static gboolean
domain_xml(UsLvDomain *d, const gchar *xml, gchar **err)
{
	GArray *xv = g_array_new(FALSE, TRUE, sizeof(UsLvVcpu));
	gboolean ok = us_domain_xml_parse(xml, &d->tune, xv, err);

	for (guint i = 0; ok && i < xv->len; i++) {
		const UsLvVcpu *x = &g_array_index(xv, UsLvVcpu, i);
		UsLvVcpu *v = us_lv_domain_vcpu(d, x->id, TRUE);

		v->enabled = x->enabled;
		v->order = x->order;
	}
	g_array_free(xv, TRUE);
	return ok;
}

/* The daemon's active domains by UUID; NULL when the connection failed. */
static GHashTable *
list_domains(UsLibvirt *lv, UsSnapshot *snap, gchar **why)
{
	virDomainPtr *doms = NULL;
	virDomainStatsRecordPtr *recs = NULL;
	GHashTable *byuuid;
	int n;

	n = virConnectListAllDomains(lv->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
	if (n < 0) {
		*why = last_error();
		return NULL;
	}
	byuuid = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
				       (GDestroyNotify)us_lv_domain_free);
	for (int i = 0; i < n; i++) {
		UsLvDomain *d = us_lv_domain_new();
		char uuid[VIR_UUID_STRING_BUFLEN];

		d->name = g_strdup(virDomainGetName(doms[i]));
		if (virDomainGetUUIDString(doms[i], uuid) == 0)
			d->uuid = us_uuid_normalize(uuid);
		d->id = (gint)virDomainGetID(doms[i]);
		if (!d->name || !d->uuid) {
			us_lv_domain_free(d);
			continue;
		}
		g_hash_table_replace(byuuid, d->uuid, d);
	}

	/* statistics first: they should be read as close as possible to the
	 * /proc sample they are compared with */
	if (n > 0) {
		int nr;
		gdouble t0 = boottime(), t;

		nr = virDomainListGetStats(doms, VIR_DOMAIN_STATS_VCPU |
					       VIR_DOMAIN_STATS_CPU_TOTAL, &recs, 0);
		t = (t0 + boottime()) / 2;  /* the daemon read them in between */

		if (nr < 0) {
			gchar *e = last_error();

			us_note(snap->notes, "libvirt: domain statistics: %s; "
				"vcpu.N.delay cross-check unavailable", e);
			g_free(e);
		}
		for (int i = 0; i < nr; i++) {
			char uuid[VIR_UUID_STRING_BUFLEN];
			gchar *u;
			UsLvDomain *d;

			if (virDomainGetUUIDString(recs[i]->dom, uuid) != 0)
				continue;
			u = us_uuid_normalize(uuid);
			d = u ? g_hash_table_lookup(byuuid, u) : NULL;
			if (d) {
				/* the XML (below) adds enabled/order to these entries */
				apply_stats(d, recs[i]->params, recs[i]->nparams);
				d->stats_time = t;
			}
			g_free(u);
		}
		if (recs)
			virDomainStatsRecordListFree(recs);
	}
	for (int i = 0; i < n; i++) {
		char uuid[VIR_UUID_STRING_BUFLEN];
		gchar *u = NULL, *err = NULL;
		UsLvDomain *d = NULL;
		char *xml;

		if (virDomainGetUUIDString(doms[i], uuid) == 0)
			u = us_uuid_normalize(uuid);
		if (u)
			d = g_hash_table_lookup(byuuid, u);
		g_free(u);
		if (!d)
			continue;
		xml = virDomainGetXMLDesc(doms[i], 0);
		if (!xml) {
			gchar *e = last_error();

			us_note(snap->notes, "libvirt: domain %s: XML: %s; tunables unknown",
				d->name, e);
			g_free(e);
		} else if (!domain_xml(d, xml, &err)) {
			us_note(snap->notes, "libvirt: domain %s: %s; tunables unknown",
				d->name, err);
			g_free(err);
		} else {
			d->have_tune = TRUE;
		}
		free(xml);
	}
	for (int i = 0; i < n; i++)
		virDomainFree(doms[i]);
	free(doms);
	return byuuid;
}

/* The vCPU thread names and libvirt's vCPU ids must agree. */
static void
check_mapping(UsSnapshot *snap, const UsDomain *d)
{
	for (guint i = 0; i < d->vcpus->len; i++) {
		const UsThread *t = g_ptr_array_index(d->vcpus, i);
		const UsLvVcpu *v = us_lv_domain_vcpu_const(d->lv, t->vcpu);

		if (d->lv->have_tune && (!v || !v->enabled))
			us_note(snap->notes, "libvirt: domain %s: thread 'CPU %d' (tid %d) "
				"is not an enabled vCPU in the domain XML",
				d->name, t->vcpu, t->tid);
	}
	for (guint i = 0; d->lv->have_tune && i < d->lv->vcpus->len; i++) {
		const UsLvVcpu *v = &g_array_index(d->lv->vcpus, UsLvVcpu, i);
		gboolean found = FALSE;

		if (!v->enabled)
			continue;
		for (guint j = 0; j < d->vcpus->len && !found; j++)
			found = ((const UsThread *)g_ptr_array_index(d->vcpus, j))->vcpu == v->id;
		if (!found)
			us_note(snap->notes, "libvirt: domain %s: vCPU %d has no readable "
				"'CPU %d/…' thread", d->name, v->id, v->id);
	}
}

static gint
cmp_lv_name(gconstpointer a, gconstpointer b)
{
	const UsLvDomain *x = a, *y = b;
	gint c = g_strcmp0(x->name, y->name);

	return c ? c : g_strcmp0(x->uuid, y->uuid);
}

void
us_libvirt_apply(UsLibvirt *lv, UsSnapshot *snap)
{
	GHashTable *byuuid;
	gchar *why = NULL;

	if (!lv->conn) {
		lv->conn = virConnectOpenReadOnly(lv->uri);
		if (!lv->conn) {
			why = last_error();
			note_down(lv, snap, why);
			g_free(why);
			return;
		}
	}
	byuuid = list_domains(lv, snap, &why);
	if (!byuuid) {
		/* a daemon that went away fails the first call after it did */
		drop_connection(lv);
		note_down(lv, snap, why);
		g_free(why);
		return;
	}
	lv->was_connected = TRUE;
	snap->libvirt = US_LV_UP;

	for (guint i = 0; i < snap->domains->len;) {
		UsDomain *d = g_ptr_array_index(snap->domains, i);
		UsLvDomain *l = d->uuid ? g_hash_table_lookup(byuuid, d->uuid) : NULL;

		if (!l) {
			/* a QEMU process this daemon does not manage */
			g_ptr_array_remove_index(snap->domains, i);
			continue;
		}
		g_hash_table_steal(byuuid, d->uuid);
		g_free(d->name);
		d->name = g_strdup(l->name);
		d->lv = l;
		check_mapping(snap, d);
		i++;
	}
	{
		/* in name order, so that the list is the same every interval */
		GList *left = g_list_sort(g_hash_table_get_values(byuuid), cmp_lv_name);

		for (GList *x = left; x; x = x->next) {
			const UsLvDomain *l = x->data;

			us_note(snap->notes, "libvirt: domain %s (uuid %s): no QEMU "
				"process with this -uuid on this host", l->name, l->uuid);
		}
		g_list_free(left);
	}
	g_hash_table_destroy(byuuid);
	us_snapshot_sort(snap);
}
