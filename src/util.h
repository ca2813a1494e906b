/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: small helpers shared by the sampling, cgroup and output code. */
#pragma once

#include <glib.h>

/* ROOT + REL, where ROOT is NULL or "/" for the live system.  REL must be
 * absolute ("/proc/stat"). */
gchar *us_path(const gchar *root, const gchar *rel);

/* Read a whole (proc/sysfs/cgroup) file.  On failure returns FALSE and, if
 * WHY is not NULL, sets *WHY to a short, newly allocated reason. */
gboolean us_read_file(const gchar *path, gchar **contents, gsize *len,
                      gchar **why);

/* Append a printf-formatted "skipped" note to NOTES (a GPtrArray of
 * g_free'd strings).  NOTES may be NULL. */
void us_note(GPtrArray *notes, const gchar *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Strict unsigned / signed decimal parsers: the whole token must be a
 * number (leading and trailing white space allowed). */
gboolean us_parse_u64(const gchar *s, guint64 *out);
gboolean us_parse_i64(const gchar *s, gint64 *out);

/* Parse a kernel CPU list ("0-3,8,10-11").  Returns a sorted GArray of gint
 * or NULL when the list is malformed. */
GArray *us_cpulist_parse(const gchar *s);

/* TRUE when ROOT designates the live system. */
gboolean us_root_is_live(const gchar *root);
