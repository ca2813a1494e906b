/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

gboolean
us_root_is_live(const gchar *root)
{
	return root == NULL || root[0] == '\0' || g_strcmp0(root, "/") == 0;
}

gchar *
us_path(const gchar *root, const gchar *rel)
{
	if (us_root_is_live(root))
		return g_strdup(rel);
	return g_build_filename(root, rel, NULL);
}

gboolean
us_read_file(const gchar *path, gchar **contents, gsize *len, gchar **why)
{
	GError *err = NULL;
	gchar *buf = NULL;
	gsize n = 0;

	if (!g_file_get_contents(path, &buf, &n, &err)) {
		if (why) {
			if (err->domain == G_FILE_ERROR &&
			    err->code == G_FILE_ERROR_NOENT)
				*why = g_strdup("missing");
			else if (err->domain == G_FILE_ERROR &&
				 (err->code == G_FILE_ERROR_ACCES ||
				  err->code == G_FILE_ERROR_PERM))
				*why = g_strdup("permission denied");
			else
				*why = g_strdup(err->message);
		}
		g_error_free(err);
		return FALSE;
	}
	*contents = buf;
	if (len)
		*len = n;
	return TRUE;
}

void
us_note(GPtrArray *notes, const gchar *fmt, ...)
{
	va_list ap;

	if (!notes)
		return;
	va_start(ap, fmt);
	g_ptr_array_add(notes, g_strdup_vprintf(fmt, ap));
	va_end(ap);
}

/* Leading white space is allowed before a number, trailing after it. */
static const gchar *
skip_space(const gchar *s)
{
	while (g_ascii_isspace(*s))
		s++;
	return s;
}

gboolean
us_parse_u64(const gchar *s, guint64 *out)
{
	gchar *end;
	guint64 v;

	if (!s)
		return FALSE;
	s = skip_space(s);
	if (!g_ascii_isdigit(*s))
		return FALSE;
	errno = 0;
	v = g_ascii_strtoull(s, &end, 10);
	if (errno != 0 || *skip_space(end) != '\0')
		return FALSE;
	*out = v;
	return TRUE;
}

gboolean
us_parse_i64(const gchar *s, gint64 *out)
{
	gchar *end;
	gint64 v;

	if (!s)
		return FALSE;
	s = skip_space(s);
	if (!g_ascii_isdigit(*s) && *s != '-')
		return FALSE;
	errno = 0;
	v = g_ascii_strtoll(s, &end, 10);
	if (errno != 0 || end == s || *skip_space(end) != '\0')
		return FALSE;
	*out = v;
	return TRUE;
}

static gint
cmp_int(gconstpointer a, gconstpointer b)
{
	gint x = *(const gint *)a, y = *(const gint *)b;

	return (x > y) - (x < y);
}

#define US_MAX_CPU 65536

GArray *
us_cpulist_parse(const gchar *s)
{
	GArray *cpus = g_array_new(FALSE, FALSE, sizeof(gint));
	gchar **parts;
	gchar *copy;
	guint i;

	if (!s)
		goto bad_nofree;
	copy = g_strstrip(g_strdup(s));
	parts = g_strsplit(copy, ",", -1);
	g_free(copy);
	for (i = 0; parts[i]; i++) {
		gchar *p = parts[i];
		gchar *dash;
		guint64 lo, hi;

		g_strstrip(p);
		if (*p == '\0') {
			if (parts[i + 1] == NULL && i == 0)
				break; /* empty list */
			goto bad;
		}
		dash = strchr(p, '-');
		if (dash) {
			*dash = '\0';
			if (!us_parse_u64(p, &lo) || !us_parse_u64(dash + 1, &hi))
				goto bad;
		} else {
			if (!us_parse_u64(p, &lo))
				goto bad;
			hi = lo;
		}
		if (lo > hi || hi >= US_MAX_CPU)
			goto bad;
		for (guint64 c = lo; c <= hi; c++) {
			gint v = (gint)c;
			g_array_append_val(cpus, v);
		}
	}
	g_strfreev(parts);
	g_array_sort(cpus, cmp_int);
	return cpus;
bad:
	g_strfreev(parts);
bad_nofree:
	g_array_free(cpus, TRUE);
	return NULL;
}
