/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "cgroup.h"

#include <string.h>

#include "config.h"
#include "util.h"

#ifdef HAVE_LIBCGROUP
#include <libcgroup.h>
#endif

/* /proc/mounts escapes blanks and backslashes as \ooo. */
static gchar *
unescape_mount_dir(const gchar *s)
{
	GString *out = g_string_new(NULL);

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			g_string_append_c(out, (gchar)(((s[1] - '0') << 6) |
						       ((s[2] - '0') << 3) |
						       (s[3] - '0')));
			s += 4;
		} else {
			g_string_append_c(out, *s++);
		}
	}
	return g_string_free(out, FALSE);
}

static gboolean
has_option(const gchar *opts, const gchar *want)
{
	gchar **v = g_strsplit(opts, ",", -1);
	gboolean found = g_strv_contains((const gchar * const *)v, want);

	g_strfreev(v);
	return found;
}

static gboolean
is_dir(const gchar *p)
{
	return g_file_test(p, G_FILE_TEST_IS_DIR);
}

static void
parse_mounts(const gchar *root, UsMounts *m)
{
	gchar *path = us_path(root, "/proc/mounts");
	gchar *buf = NULL;
	gchar **lines;

	if (!us_read_file(path, &buf, NULL, NULL)) {
		g_free(path);
		return;
	}
	g_free(path);
	lines = g_strsplit(buf, "\n", -1);
	g_free(buf);
	for (guint i = 0; lines[i]; i++) {
		gchar **f = g_strsplit_set(lines[i], " \t", -1);

		if (g_strv_length(f) >= 4) {
			gchar *dir = unescape_mount_dir(f[1]);

			if (strcmp(f[2], "cgroup") == 0 && !m->cpu_v1 &&
			    has_option(f[3], "cpu")) {
				m->cpu_v1 = us_path(root, dir);
			} else if (strcmp(f[2], "cgroup2") == 0 && !m->v2) {
				m->v2 = us_path(root, dir);
			}
			g_free(dir);
		}
		g_strfreev(f);
	}
	g_strfreev(lines);
}

static void
guess_mounts(const gchar *root, UsMounts *m)
{
	static const gchar *const v1[] = {
		"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct",
		"/sys/fs/cgroup/cpuacct,cpu", NULL
	};

	for (guint i = 0; !m->cpu_v1 && v1[i]; i++) {
		gchar *p = us_path(root, v1[i]);

		if (is_dir(p))
			m->cpu_v1 = p;
		else
			g_free(p);
	}
	if (!m->v2) {
		gchar *u = us_path(root, "/sys/fs/cgroup/unified");
		gchar *top = us_path(root, "/sys/fs/cgroup");
		gchar *ctl = g_build_filename(top, "cgroup.controllers", NULL);

		if (is_dir(u)) {
			m->v2 = u;
			u = NULL;
		} else if (g_file_test(ctl, G_FILE_TEST_EXISTS)) {
			m->v2 = top;
			top = NULL;
		}
		g_free(u);
		g_free(top);
		g_free(ctl);
	}
}

void
us_mounts_find(const gchar *root, UsMounts *m)
{
	memset(m, 0, sizeof(*m));
#ifdef HAVE_LIBCGROUP
	/* On the live system ask libcgroup where the cpu controller is. */
	if (us_root_is_live(root) && cgroup_init() == 0) {
		char *mnt = NULL;

		if (cgroup_get_subsys_mount_point("cpu", &mnt) == 0 && mnt) {
			gchar *ctl = g_build_filename(mnt, "cgroup.controllers", NULL);

			if (g_file_test(ctl, G_FILE_TEST_EXISTS))
				m->v2 = g_strdup(mnt);
			else
				m->cpu_v1 = g_strdup(mnt);
			g_free(ctl);
			free(mnt);
		}
	}
#endif
	parse_mounts(root, m);
	guess_mounts(root, m);
	/* Without any v1 cpu hierarchy the cpu controller is in v2. */
	m->cpu_is_v2 = (m->cpu_v1 == NULL && m->v2 != NULL);
}

void
us_mounts_clear(UsMounts *m)
{
	g_clear_pointer(&m->cpu_v1, g_free);
	g_clear_pointer(&m->v2, g_free);
}

gboolean
us_cgroup_parse(const gchar *content, UsCgroupRef *ref)
{
	gchar **lines;

	memset(ref, 0, sizeof(*ref));
	if (!content)
		return FALSE;
	lines = g_strsplit(content, "\n", -1);
	for (guint i = 0; lines[i]; i++) {
		/* "ID:CONTROLLERS:PATH"; PATH may itself contain ':' */
		gchar **f = g_strsplit(lines[i], ":", 3);

		if (g_strv_length(f) == 3 && f[2][0] == '/') {
			if (strcmp(f[0], "0") == 0 && f[1][0] == '\0') {
				if (!ref->v2_path)
					ref->v2_path = g_strdup(f[2]);
			} else if (has_option(f[1], "cpu") && !ref->cpu_path) {
				ref->cpu_path = g_strdup(f[2]);
				ref->cpu_version = 1;
			}
		}
		g_strfreev(f);
	}
	g_strfreev(lines);
	if (!ref->cpu_path && ref->v2_path) {
		ref->cpu_path = g_strdup(ref->v2_path);
		ref->cpu_version = 2;
	}
	return ref->cpu_path != NULL;
}

void
us_cgroup_ref_clear(UsCgroupRef *ref)
{
	g_clear_pointer(&ref->cpu_path, g_free);
	g_clear_pointer(&ref->v2_path, g_free);
	ref->cpu_version = 0;
}

void
us_cgroup_ref_copy(UsCgroupRef *dst, const UsCgroupRef *src)
{
	dst->cpu_version = src->cpu_version;
	dst->cpu_path = g_strdup(src->cpu_path);
	dst->v2_path = g_strdup(src->v2_path);
}

gboolean
us_cgroup_is_under(const gchar *path, const gchar *parent)
{
	gsize n;

	if (!path || !parent)
		return FALSE;
	if (strcmp(parent, "/") == 0)
		return path[0] == '/';
	n = strlen(parent);
	while (n > 1 && parent[n - 1] == '/')
		n--;
	return strncmp(path, parent, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

gchar *
us_cgroup_domain_group(const gchar *emulator_path)
{
	const gchar *slash;

	if (!emulator_path)
		return NULL;
	slash = strrchr(emulator_path, '/');
	if (slash && strcmp(slash, "/emulator") == 0) {
		if (slash == emulator_path)
			return g_strdup("/");
		return g_strndup(emulator_path, (gsize)(slash - emulator_path));
	}
	return g_strdup(emulator_path);
}

gchar *
us_cgroup_key(gint version, const gchar *path)
{
	return g_strdup_printf("v%d:%s", version, path);
}

/* "key value" lines, e.g. cpu.stat. */
static gboolean
kv_get(const gchar *buf, const gchar *key, guint64 *out)
{
	gsize klen = strlen(key);
	const gchar *p = buf;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			const gchar *eol = strchr(p, '\n');
			gchar *val = eol ? g_strndup(p + klen + 1, (gsize)(eol - p - (gssize)klen - 1))
					 : g_strdup(p + klen + 1);
			gboolean ok = us_parse_u64(val, out);

			g_free(val);
			return ok;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return FALSE;
}

static gchar *
read_cg_file(const gchar *dir, const gchar *name, gchar **why)
{
	gchar *p = g_build_filename(dir, name, NULL);
	gchar *buf = NULL;

	if (!us_read_file(p, &buf, NULL, why))
		buf = NULL;
	g_free(p);
	return buf;
}

static void
read_stat(UsCgroupStat *st, const gchar *dir, GPtrArray *notes)
{
	gchar *why = NULL;
	gchar *buf = read_cg_file(dir, "cpu.stat", &why);
	guint64 t = 0;

	if (!buf) {
		us_note(notes, "cgroup %s: cpu.stat: %s", st->path, why);
		g_free(why);
		return;
	}
	if (kv_get(buf, "nr_periods", &st->nr_periods) &&
	    kv_get(buf, "nr_throttled", &st->nr_throttled)) {
		if (st->version == 1 && kv_get(buf, "throttled_time", &t)) {
			st->throttled_ns = t;
			st->have_stat = TRUE;
		} else if (st->version == 2 && kv_get(buf, "throttled_usec", &t)) {
			st->throttled_ns = t * 1000;
			st->have_stat = TRUE;
		}
	}
	if (!st->have_stat)
		us_note(notes, "cgroup %s: cpu.stat: no throttling counters",
			st->path);
	g_free(buf);
}

static void
read_quota(UsCgroupStat *st, const gchar *dir)
{
	if (st->version == 1) {
		gchar *q = read_cg_file(dir, "cpu.cfs_quota_us", NULL);
		gchar *p = read_cg_file(dir, "cpu.cfs_period_us", NULL);
		gint64 quota;
		guint64 period;

		if (q && p && us_parse_i64(q, &quota) &&
		    us_parse_u64(p, &period) && period > 0) {
			st->have_quota = TRUE;
			st->quota_cpus = quota < 0 ? -1.0 : (gdouble)quota / (gdouble)period;
		}
		g_free(q);
		g_free(p);
	} else {
		gchar *max = read_cg_file(dir, "cpu.max", NULL);
		gchar **f = max ? g_strsplit_set(g_strstrip(max), " \t", -1) : NULL;
		guint64 quota, period;

		if (f && g_strv_length(f) == 2 && us_parse_u64(f[1], &period) &&
		    period > 0) {
			if (strcmp(f[0], "max") == 0) {
				st->have_quota = TRUE;
				st->quota_cpus = -1.0;
			} else if (us_parse_u64(f[0], &quota)) {
				st->have_quota = TRUE;
				st->quota_cpus = (gdouble)quota / (gdouble)period;
			}
		}
		g_strfreev(f);
		g_free(max);
	}
}

static void
read_pressure(UsCgroupStat *st, const gchar *dir)
{
	gchar *buf = read_cg_file(dir, "cpu.pressure", NULL);
	gchar **lines;

	if (!buf)
		return;
	lines = g_strsplit(buf, "\n", -1);
	for (guint i = 0; lines[i]; i++) {
		const gchar *tot;

		if (!g_str_has_prefix(lines[i], "some "))
			continue;
		tot = strstr(lines[i], " total=");
		if (tot && us_parse_u64(tot + 7, &st->pressure_some_us))
			st->have_pressure = TRUE;
	}
	g_strfreev(lines);
	g_free(buf);
}

UsCgroupStat *
us_cgroup_stat_read(const UsMounts *m, const UsCgroupRef *ref, GPtrArray *notes)
{
	const gchar *mnt;
	UsCgroupStat *st;

	if (!ref->cpu_path || ref->cpu_version == 0)
		return NULL;
	st = g_new0(UsCgroupStat, 1);
	st->version = ref->cpu_version;
	st->path = g_strdup(ref->cpu_path);
	st->key = us_cgroup_key(st->version, st->path);
	mnt = st->version == 1 ? m->cpu_v1 : m->v2;
	if (!mnt) {
		us_note(notes, "cgroup %s: no cgroup v%d hierarchy mounted",
			st->path, st->version);
	} else {
		gchar *dir = g_build_filename(mnt, st->path, NULL);

		if (!is_dir(dir)) {
			us_note(notes, "cgroup %s: directory missing", st->path);
		} else {
			read_stat(st, dir, notes);
			read_quota(st, dir);
			if (st->version == 2)
				read_pressure(st, dir);
		}
		g_free(dir);
	}
	/* PSI lives in the unified hierarchy even when cpu is in v1. */
	if (!st->have_pressure && ref->v2_path && m->v2) {
		gchar *dir = g_build_filename(m->v2, ref->v2_path, NULL);

		read_pressure(st, dir);
		g_free(dir);
	}
	return st;
}

void
us_cgroup_stat_free(UsCgroupStat *st)
{
	if (!st)
		return;
	g_free(st->key);
	g_free(st->path);
	g_free(st);
}
