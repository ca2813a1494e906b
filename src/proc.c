/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

UsSource *
us_source_new(const gchar *root)
{
	UsSource *src = g_new0(UsSource, 1);

	src->root = us_root_is_live(root) ? NULL : g_strdup(root);
	src->use_uptime = src->root != NULL;
	us_mounts_find(src->root, &src->mounts);
	return src;
}

void
us_source_free(UsSource *src)
{
	if (!src)
		return;
	us_mounts_clear(&src->mounts);
	g_free(src->root);
	g_free(src);
}

gboolean
us_proc_is_qemu(const gchar *comm)
{
	return g_str_has_prefix(comm, "qemu-system") ||
	       g_str_has_prefix(comm, "qemu-kvm");
}

gint
us_proc_vcpu_id(const gchar *comm)
{
	const gchar *p, *slash;
	guint64 id;
	gchar *num;
	gboolean ok;

	if (!g_str_has_prefix(comm, "CPU "))
		return -1;
	p = comm + 4;
	slash = strchr(p, '/');
	if (!slash || (strcmp(slash, "/KVM") != 0 && strcmp(slash, "/TCG") != 0))
		return -1;
	num = g_strndup(p, (gsize)(slash - p));
	ok = num[0] != '\0' && us_parse_u64(num, &id) && !g_ascii_isspace(num[0]) &&
	     id < G_MAXINT;
	g_free(num);
	return ok ? (gint)id : -1;
}

/* Value of the "guest" key of a QEMU -name option.  QEMU's option syntax
 * doubles commas inside values (",,"); the first key may be implicit. */
static gchar *
name_from_option(const gchar *opt)
{
	GString *cur = g_string_new(NULL);
	gboolean first = TRUE;
	gchar *result = NULL;
	const gchar *p = opt;

	for (;;) {
		if (*p == ',' && p[1] == ',') {
			g_string_append_c(cur, ',');
			p += 2;
			continue;
		}
		if (*p == ',' || *p == '\0') {
			const gchar *eq = strchr(cur->str, '=');

			if (!eq && first)
				result = g_strdup(cur->str);
			else if (eq && strncmp(cur->str, "guest=", 6) == 0)
				result = g_strdup(eq + 1);
			if (result || *p == '\0')
				break;
			g_string_truncate(cur, 0);
			first = FALSE;
			p++;
			continue;
		}
		g_string_append_c(cur, *p++);
	}
	g_string_free(cur, TRUE);
	if (result && result[0] == '\0')
		g_clear_pointer(&result, g_free);
	return result;
}

gchar *
us_proc_domain_name(const gchar *cmdline, gsize len)
{
	const gchar *p = cmdline, *end = cmdline + len;
	gchar *name = NULL;

	while (p < end) {
		gsize n = strnlen(p, (gsize)(end - p));
		const gchar *next = p + n + 1;

		if ((strcmp(p, "-name") == 0 || strcmp(p, "--name") == 0) &&
		    next < end) {
			gsize m = strnlen(next, (gsize)(end - next));
			gchar *opt = g_strndup(next, m);

			g_free(name);     /* the last -name wins, as in QEMU */
			name = name_from_option(opt);
			g_free(opt);
		}
		p = next;
	}
	return name;
}

/* The canonical value of QEMU's -uuid option (the last one wins). */
gchar *
us_proc_qemu_uuid(const gchar *cmdline, gsize len)
{
	const gchar *p = cmdline, *end = cmdline + len;
	gchar *uuid = NULL;

	while (p < end) {
		gsize n = strnlen(p, (gsize)(end - p));
		const gchar *next = p + n + 1;

		if ((strcmp(p, "-uuid") == 0 || strcmp(p, "--uuid") == 0) &&
		    next < end) {
			gchar *opt = g_strndup(next, strnlen(next, (gsize)(end - next)));

			g_free(uuid);
			uuid = us_uuid_normalize(opt);
			g_free(opt);
		}
		p = next;
	}
	return uuid;
}

gboolean
us_proc_parse_stat(const gchar *buf, UsCpuTimes *all, GArray *cpus)
{
	gchar **lines = g_strsplit(buf, "\n", -1);
	gboolean got_all = FALSE;

	for (guint i = 0; lines[i]; i++) {
		gchar **f;
		UsCpuTimes t = { TRUE, 0, 0 };
		guint nf;
		guint64 cpu = 0;
		gboolean ok = TRUE;

		if (!g_str_has_prefix(lines[i], "cpu"))
			continue;
		f = g_strsplit_set(lines[i], " ", -1);
		/* collapse empty fields ("cpu  1 2" has two spaces) */
		nf = 0;
		for (guint j = 0; f[j]; j++)
			if (f[j][0] != '\0')
				f[nf++] = f[j];
			else
				g_free(f[j]);
		f[nf] = NULL;
		if (nf < 5 || (strcmp(f[0], "cpu") != 0 &&
			       !us_parse_u64(f[0] + 3, &cpu))) {
			g_strfreev(f);
			continue;
		}
		/* user nice system idle iowait irq softirq steal guest guest_nice */
		for (guint j = 1; j < nf && j <= 8; j++) {
			guint64 v;

			if (!us_parse_u64(f[j], &v)) {
				ok = FALSE;
				break;
			}
			t.total += v;
			if (j == 4 || j == 5)
				t.idle += v;
		}
		if (ok) {
			if (strcmp(f[0], "cpu") == 0) {
				*all = t;
				got_all = TRUE;
			} else if (cpus && cpu < 65536) {
				if (cpus->len <= cpu)
					g_array_set_size(cpus, (guint)cpu + 1);
				g_array_index(cpus, UsCpuTimes, cpu) = t;
			}
		}
		g_strfreev(f);
	}
	g_strfreev(lines);
	return got_all;
}

gboolean
us_proc_parse_schedstat(const gchar *buf, guint64 *run, guint64 *wait)
{
	gchar **f = g_strsplit_set(buf, " \n", -1);
	gboolean ok = g_strv_length(f) >= 2 && us_parse_u64(f[0], run) &&
		      us_parse_u64(f[1], wait);

	g_strfreev(f);
	return ok;
}

gchar *
us_proc_status_field(const gchar *status, const gchar *field)
{
	gsize flen = strlen(field);
	const gchar *p = status;

	while (p && *p) {
		if (strncmp(p, field, flen) == 0 && p[flen] == ':') {
			const gchar *v = p + flen + 1;
			const gchar *eol = strchr(v, '\n');
			gchar *val = eol ? g_strndup(v, (gsize)(eol - v)) : g_strdup(v);

			return g_strstrip(val);
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

static gdouble
sample_time(const UsSource *src)
{
	struct timespec ts;

	if (src->root && src->use_uptime) {
		gchar *p = us_path(src->root, "/proc/uptime");
		gchar *buf = NULL;
		gdouble t = -1;

		if (us_read_file(p, &buf, NULL, NULL)) {
			gchar *end;

			t = g_ascii_strtod(buf, &end);
			if (end == buf)
				t = -1;
		}
		g_free(buf);
		g_free(p);
		if (t >= 0)
			return t;
	}
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (gdouble)ts.tv_sec + (gdouble)ts.tv_nsec / 1e9;
}

static gchar *
read_small(const UsSource *src, const gchar *rel, gsize *len, gchar **why)
{
	gchar *p = us_path(src->root, rel);
	gchar *buf = NULL;

	if (!us_read_file(p, &buf, len, why))
		buf = NULL;
	g_free(p);
	return buf;
}

static void
thread_free(UsThread *t)
{
	if (!t)
		return;
	g_free(t->cpus_allowed);
	if (t->allowed)
		g_array_free(t->allowed, TRUE);
	us_cgroup_ref_clear(&t->cg);
	g_free(t);
}

static void
domain_free(UsDomain *d)
{
	if (!d)
		return;
	g_free(d->name);
	g_free(d->group);
	g_free(d->uuid);
	us_lv_domain_free(d->lv);
	g_ptr_array_free(d->vcpus, TRUE);
	g_free(d);
}

static gint
cmp_thread(gconstpointer a, gconstpointer b)
{
	const UsThread *x = *(UsThread * const *)a, *y = *(UsThread * const *)b;

	if (x->vcpu != y->vcpu)
		return (x->vcpu > y->vcpu) - (x->vcpu < y->vcpu);
	return (x->tid > y->tid) - (x->tid < y->tid);
}

static gint
cmp_domain(gconstpointer a, gconstpointer b)
{
	const UsDomain *x = *(UsDomain * const *)a, *y = *(UsDomain * const *)b;
	gint c = g_strcmp0(x->name, y->name);

	if (c)
		return c;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

static gint
cmp_pid(gconstpointer a, gconstpointer b)
{
	gint x = *(const gint *)a, y = *(const gint *)b;

	return (x > y) - (x < y);
}

/* Sorted numeric entries of a /proc directory. */
static GArray *
list_pids(const gchar *dir)
{
	GArray *out = g_array_new(FALSE, FALSE, sizeof(gint));
	GDir *d = g_dir_open(dir, 0, NULL);
	const gchar *e;

	if (!d)
		return out;
	while ((e = g_dir_read_name(d))) {
		guint64 v;

		if (us_parse_u64(e, &v) && v > 0 && v <= G_MAXINT) {
			gint pid = (gint)v;

			g_array_append_val(out, pid);
		}
	}
	g_dir_close(d);
	g_array_sort(out, cmp_pid);
	return out;
}

/* Read one vCPU thread.  Returns NULL (with a note) when it vanished. */
static UsThread *
read_thread(UsSnapshot *snap, const UsSource *src, const gchar *dname,
	    gint pid, gint tid, gint vcpu)
{
	gchar *base = g_strdup_printf("/proc/%d/task/%d/", pid, tid);
	gchar *rel, *buf, *why = NULL;
	UsThread *t = g_new0(UsThread, 1);

	t->tid = tid;
	t->vcpu = vcpu;

	rel = g_strconcat(base, "schedstat", NULL);
	buf = read_small(src, rel, NULL, &why);
	g_free(rel);
	if (!buf || !us_proc_parse_schedstat(buf, &t->run_ns, &t->wait_ns)) {
		us_note(snap->notes, "domain %s vCPU %d (tid %d): schedstat: %s",
			dname, vcpu, tid, buf ? "malformed" : why);
		g_free(buf);
		g_free(why);
		g_free(base);
		thread_free(t);
		return NULL;
	}
	g_free(buf);

	rel = g_strconcat(base, "status", NULL);
	buf = read_small(src, rel, NULL, &why);
	g_free(rel);
	if (buf) {
		t->cpus_allowed = us_proc_status_field(buf, "Cpus_allowed_list");
		if (t->cpus_allowed)
			t->allowed = us_cpulist_parse(t->cpus_allowed);
		g_free(buf);
	}
	if (!t->allowed) {
		us_note(snap->notes,
			"domain %s vCPU %d (tid %d): Cpus_allowed_list: %s, assuming all CPUs",
			dname, vcpu, tid, why ? why : "unreadable");
		g_clear_pointer(&t->cpus_allowed, g_free);
	}
	g_clear_pointer(&why, g_free);

	rel = g_strconcat(base, "cgroup", NULL);
	buf = read_small(src, rel, NULL, &why);
	g_free(rel);
	if (!buf || !us_cgroup_parse(buf, &t->cg))
		us_note(snap->notes, "domain %s vCPU %d (tid %d): cgroup: %s",
			dname, vcpu, tid, buf ? "no cpu controller line" : why);
	g_free(buf);
	g_free(why);
	g_free(base);
	return t;
}

static void
add_cgroup(UsSnapshot *snap, const UsSource *src, const UsCgroupRef *ref)
{
	gchar *key;
	UsCgroupStat *st;

	if (!ref->cpu_path)
		return;
	key = us_cgroup_key(ref->cpu_version, ref->cpu_path);
	if (!g_hash_table_contains(snap->cgroups, key)) {
		st = us_cgroup_stat_read(&src->mounts, ref, snap->notes);
		if (st)
			g_hash_table_insert(snap->cgroups, g_strdup(st->key), st);
	}
	g_free(key);
}

static void
read_domain(UsSnapshot *snap, const UsSource *src, gint pid)
{
	gchar *rel, *buf, *why = NULL;
	gsize len = 0;
	UsDomain *d;
	GArray *tids;
	gchar *taskdir;

	rel = g_strdup_printf("/proc/%d/comm", pid);
	buf = read_small(src, rel, NULL, NULL);
	g_free(rel);
	if (!buf)
		return; /* exited, or not ours to see: not a domain we know of */
	g_strchomp(buf);
	if (!us_proc_is_qemu(buf)) {
		g_free(buf);
		return;
	}
	g_free(buf);

	d = g_new0(UsDomain, 1);
	d->pid = pid;
	d->vcpus = g_ptr_array_new_with_free_func((GDestroyNotify)thread_free);

	rel = g_strdup_printf("/proc/%d/cmdline", pid);
	buf = read_small(src, rel, &len, &why);
	g_free(rel);
	if (buf) {
		d->name = us_proc_domain_name(buf, len);
		d->uuid = us_proc_qemu_uuid(buf, len);
	}
	g_free(buf);
	if (!d->name) {
		d->name = g_strdup_printf("pid-%d", pid);
		if (why)
			us_note(snap->notes, "QEMU pid %d: cmdline: %s", pid, why);
	}
	g_clear_pointer(&why, g_free);

	/* The main thread is the emulator thread. */
	rel = g_strdup_printf("/proc/%d/task/%d/cgroup", pid, pid);
	buf = read_small(src, rel, NULL, NULL);
	g_free(rel);
	if (buf) {
		UsCgroupRef ref;

		if (us_cgroup_parse(buf, &ref))
			d->group = us_cgroup_domain_group(ref.cpu_path);
		us_cgroup_ref_clear(&ref);
		g_free(buf);
	}

	rel = g_strdup_printf("/proc/%d/task", pid);
	taskdir = us_path(src->root, rel);
	g_free(rel);
	tids = list_pids(taskdir);
	g_free(taskdir);
	if (tids->len == 0)
		us_note(snap->notes, "domain %s (pid %d): no readable threads",
			d->name, pid);
	for (guint i = 0; i < tids->len; i++) {
		gint tid = g_array_index(tids, gint, i);
		gint vcpu;
		UsThread *t;

		rel = g_strdup_printf("/proc/%d/task/%d/comm", pid, tid);
		buf = read_small(src, rel, NULL, NULL);
		g_free(rel);
		if (!buf)
			continue; /* thread exited; if it was a vCPU, model notes it */
		g_strchomp(buf);
		vcpu = us_proc_vcpu_id(buf);
		g_free(buf);
		if (vcpu < 0)
			continue;
		t = read_thread(snap, src, d->name, pid, tid, vcpu);
		if (!t)
			continue;
		add_cgroup(snap, src, &t->cg);
		g_ptr_array_add(d->vcpus, t);
	}
	g_array_free(tids, TRUE);
	g_ptr_array_sort(d->vcpus, cmp_thread);
	g_ptr_array_add(snap->domains, d);
}

UsSnapshot *
us_snapshot_take(UsSource *src)
{
	UsSnapshot *snap = g_new0(UsSnapshot, 1);
	gchar *buf, *why = NULL, *procdir;
	GArray *pids;

	snap->notes = g_ptr_array_new_with_free_func(g_free);
	snap->domains = g_ptr_array_new_with_free_func((GDestroyNotify)domain_free);
	snap->cgroups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
					      (GDestroyNotify)us_cgroup_stat_free);
	snap->cpus = g_array_new(FALSE, TRUE, sizeof(UsCpuTimes));
	snap->time = sample_time(src);
	snap->realtime_us = g_get_real_time();

	buf = read_small(src, "/proc/stat", NULL, &why);
	if (!buf || !us_proc_parse_stat(buf, &snap->all, snap->cpus))
		us_note(snap->notes, "/proc/stat: %s", buf ? "malformed" : why);
	g_free(buf);
	g_free(why);

	procdir = us_path(src->root, "/proc");
	pids = list_pids(procdir);
	g_free(procdir);
	for (guint i = 0; i < pids->len; i++)
		read_domain(snap, src, g_array_index(pids, gint, i));
	g_array_free(pids, TRUE);
	g_ptr_array_sort(snap->domains, cmp_domain);
	return snap;
}

void
us_snapshot_sort(UsSnapshot *snap)
{
	g_ptr_array_sort(snap->domains, cmp_domain);
}

void
us_snapshot_free(UsSnapshot *snap)
{
	if (!snap)
		return;
	g_ptr_array_free(snap->notes, TRUE);
	g_ptr_array_free(snap->domains, TRUE);
	g_hash_table_destroy(snap->cgroups);
	g_array_free(snap->cpus, TRUE);
	g_free(snap);
}
