/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: <cputune> and <vcpus> of a libvirt domain XML, with libxml2. */
#include "lvinfo.h"

#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "util.h"

static gboolean
is_elem(const xmlNode *n, const gchar *name)
{
	return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static gchar *
node_text(xmlNode *n)
{
	xmlChar *c = xmlNodeGetContent(n);
	gchar *s = g_strdup(c ? (const gchar *)c : "");

	xmlFree(c);
	return g_strstrip(s);
}

static gchar *
node_attr(xmlNode *n, const gchar *name)
{
	xmlChar *c = xmlGetProp(n, (const xmlChar *)name);
	gchar *s = c ? g_strdup((const gchar *)c) : NULL;

	xmlFree(c);
	return s;
}

/* One <cputune> child; unknown elements (vcpupin, vcpusched, ...) are
 * ignored. */
static gboolean
cputune_child(xmlNode *n, UsCputune *t, gchar **err)
{
	static const struct {
		const gchar *name;
		gboolean is_signed;
		gsize off;
	} keys[] = {
		{ "shares", FALSE, G_STRUCT_OFFSET(UsCputune, shares) },
		{ "period", FALSE, G_STRUCT_OFFSET(UsCputune, period) },
		{ "quota", TRUE, G_STRUCT_OFFSET(UsCputune, quota) },
		{ "global_period", FALSE, G_STRUCT_OFFSET(UsCputune, global_period) },
		{ "global_quota", TRUE, G_STRUCT_OFFSET(UsCputune, global_quota) },
		{ "emulator_period", FALSE, G_STRUCT_OFFSET(UsCputune, emulator_period) },
		{ "emulator_quota", TRUE, G_STRUCT_OFFSET(UsCputune, emulator_quota) },
		{ "iothread_period", FALSE, G_STRUCT_OFFSET(UsCputune, iothread_period) },
		{ "iothread_quota", TRUE, G_STRUCT_OFFSET(UsCputune, iothread_quota) },
	};

	for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
		gchar *v;
		gboolean ok;

		if (!is_elem(n, keys[i].name))
			continue;
		v = node_text(n);
		if (keys[i].is_signed)
			ok = us_parse_i64(v, &G_STRUCT_MEMBER(gint64, t, keys[i].off));
		else
			ok = us_parse_u64(v, &G_STRUCT_MEMBER(guint64, t, keys[i].off));
		if (!ok)
			*err = g_strdup_printf("<cputune><%s>: not an integer: '%s'",
					       keys[i].name, v);
		else if (i == 0)
			t->shares_set = TRUE;
		g_free(v);
		return ok;
	}
	return TRUE;
}

static gboolean
parse_int_attr(xmlNode *n, const gchar *name, gint64 *out)
{
	gchar *v = node_attr(n, name);
	gboolean ok = v && us_parse_i64(v, out);

	g_free(v);
	return ok;
}

static gint
cmp_vcpu(gconstpointer a, gconstpointer b)
{
	const UsLvVcpu *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

gboolean
us_domain_xml_parse(const gchar *xml, UsCputune *tune, GArray *vcpus,
		    gchar **err)
{
	xmlDoc *doc;
	xmlNode *root;
	gint64 max = -1, current = -1;
	gboolean ok = TRUE, have_vcpus = FALSE;
	gchar *e = NULL;

	memset(tune, 0, sizeof(*tune));
	g_array_set_size(vcpus, 0);
	doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR |
			    XML_PARSE_NOWARNING);
	if (!doc) {
		*err = g_strdup("domain XML: not well-formed");
		return FALSE;
	}
	root = xmlDocGetRootElement(doc);
	if (!root || !is_elem(root, "domain")) {
		*err = g_strdup("domain XML: no <domain> root element");
		xmlFreeDoc(doc);
		return FALSE;
	}
	for (xmlNode *n = root->children; n && ok; n = n->next) {
		if (is_elem(n, "cputune")) {
			for (xmlNode *c = n->children; c && ok; c = c->next)
				ok = cputune_child(c, tune, &e);
		} else if (is_elem(n, "vcpu")) {
			gchar *v = node_text(n);
			guint64 m;

			if (us_parse_u64(v, &m) && m < 65536)
				max = (gint64)m;
			g_free(v);
			if (!parse_int_attr(n, "current", &current))
				current = max;
		} else if (is_elem(n, "vcpus")) {
			have_vcpus = TRUE;
			for (xmlNode *c = n->children; c; c = c->next) {
				UsLvVcpu v = { .enabled = TRUE, .order = -1 };
				gint64 id, order;
				gchar *en;

				if (!is_elem(c, "vcpu") || !parse_int_attr(c, "id", &id) ||
				    id < 0 || id >= 65536)
					continue;
				v.id = (gint)id;
				en = node_attr(c, "enabled");
				v.enabled = g_strcmp0(en, "no") != 0;
				g_free(en);
				if (parse_int_attr(c, "order", &order) && order >= 0 &&
				    order < G_MAXINT)
					v.order = (gint)order;
				g_array_append_val(vcpus, v);
			}
		}
	}
	if (ok && !have_vcpus) {
		/* no per-vCPU element: ids 0..max-1, the first `current` online */
		for (gint64 i = 0; i < max; i++) {
			UsLvVcpu v = { .id = (gint)i, .enabled = i < current, .order = -1 };

			g_array_append_val(vcpus, v);
		}
	}
	xmlFreeDoc(doc);
	g_array_sort(vcpus, cmp_vcpu);
	if (!ok) {
		*err = e;
		return FALSE;
	}
	return TRUE;
}
