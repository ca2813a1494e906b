/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "model.h"

#include <string.h>
#include <unistd.h>

#include "util.h"

const gchar *
us_placement_name(UsPlacement p)
{
	switch (p) {
	case US_PLACE_OWN: return "own";
	case US_PLACE_SHARED: return "shared";
	case US_PLACE_NESTED: return "nested";
	case US_PLACE_MIXED: return "mixed";
	case US_PLACE_UNKNOWN: break;
	}
	return "unknown";
}

/* @cpu_version: the cgroup version of the cpu controller, 0 if unknown:
 * only cgroup v1 nests a domain's vCPUs in the per-host group. */
static UsPlacement
expected_placement(const UsLvDomain *lv, gint cpu_version)
{
	if (!lv || !lv->have_tune)
		return US_PLACE_UNKNOWN;
	if (us_cputune_is_default(&lv->tune))
		return US_PLACE_SHARED;
	if (us_cputune_is_vcpu_bandwidth_only(&lv->tune))
		return cpu_version == 1 ? US_PLACE_NESTED :
		       cpu_version == 2 ? US_PLACE_OWN : US_PLACE_UNKNOWN;
	return US_PLACE_OWN;
}

const gchar *
us_expected_placement(const UsLvDomain *lv, gint cpu_version)
{
	UsPlacement p = expected_placement(lv, cpu_version);

	return p == US_PLACE_UNKNOWN ? NULL : us_placement_name(p);
}

static void
vcpu_result_free(UsVcpuResult *v)
{
	g_free(v->cpus);
	g_free(v->cgroup);
	g_free(v);
}

static void
domain_result_free(UsDomainResult *d)
{
	g_free(d->name);
	g_free(d->group);
	g_free(d->uuid);
	us_lv_domain_free(d->lv);
	g_ptr_array_free(d->cgroups, TRUE);
	g_ptr_array_free(d->vcpus, TRUE);
	g_free(d);
}

static void
cgroup_result_free(UsCgroupResult *c)
{
	g_free(c->key);
	g_free(c->path);
	g_free(c);
}

void
us_result_free(UsResult *r)
{
	if (!r)
		return;
	g_ptr_array_free(r->domains, TRUE);
	g_ptr_array_free(r->cgroups, TRUE);
	g_ptr_array_free(r->skipped, TRUE);
	g_free(r);
}

static const UsDomain *
find_domain(const UsSnapshot *s, gint pid)
{
	for (guint i = 0; i < s->domains->len; i++) {
		const UsDomain *d = g_ptr_array_index(s->domains, i);

		if (d->pid == pid)
			return d;
	}
	return NULL;
}

static const UsThread *
find_thread(const UsDomain *d, gint tid)
{
	if (!d)
		return NULL;
	for (guint i = 0; i < d->vcpus->len; i++) {
		const UsThread *t = g_ptr_array_index(d->vcpus, i);

		if (t->tid == tid)
			return t;
	}
	return NULL;
}

static const UsCpuTimes *
cpu_at(const UsSnapshot *s, gint cpu)
{
	const UsCpuTimes *t;

	if (cpu < 0 || (guint)cpu >= s->cpus->len)
		return NULL;
	t = &g_array_index(s->cpus, UsCpuTimes, cpu);
	return t->present ? t : NULL;
}

static gdouble
clamp01(gdouble v)
{
	return v < 0 ? 0 : (v > 1 ? 1 : v);
}

/* Idle fraction of the CPUs in ALLOWED (NULL = all) between A and B:
 * Σ Δ(idle+iowait) / Σ Δtotal. */
static gdouble
idle_fraction(const UsSnapshot *a, const UsSnapshot *b, const GArray *allowed)
{
	guint64 idle = 0, total = 0;
	guint n = allowed ? allowed->len : b->cpus->len;

	for (guint i = 0; i < n; i++) {
		gint cpu = allowed ? g_array_index(allowed, gint, i) : (gint)i;
		const UsCpuTimes *x = cpu_at(a, cpu), *y = cpu_at(b, cpu);

		if (!x || !y || y->total < x->total || y->idle < x->idle)
			continue;
		idle += y->idle - x->idle;
		total += y->total - x->total;
	}
	return total ? clamp01((gdouble)idle / (gdouble)total) : 0.0;
}

static gint
cmp_cgroup(gconstpointer a, gconstpointer b)
{
	const UsCgroupResult *x = *(UsCgroupResult * const *)a;
	const UsCgroupResult *y = *(UsCgroupResult * const *)b;

	return strcmp(x->key, y->key);
}

static UsCgroupResult *
cgroup_result(GHashTable *done, const UsSnapshot *a, const UsSnapshot *b,
	      const gchar *key, gdouble dt)
{
	const UsCgroupStat *x, *y;
	UsCgroupResult *c = g_hash_table_lookup(done, key);

	if (c)
		return c;
	y = g_hash_table_lookup(b->cgroups, key);
	if (!y)
		return NULL;
	x = g_hash_table_lookup(a->cgroups, key);
	c = g_new0(UsCgroupResult, 1);
	c->key = g_strdup(key);
	c->path = g_strdup(y->path);
	c->version = y->version;
	if (x && x->have_stat && y->have_stat &&
	    y->nr_periods >= x->nr_periods && y->nr_throttled >= x->nr_throttled &&
	    y->throttled_ns >= x->throttled_ns) {
		c->have_throttle = TRUE;
		c->periods = y->nr_periods - x->nr_periods;
		c->throttled = y->nr_throttled - x->nr_throttled;
		c->throttled_s = (gdouble)(y->throttled_ns - x->throttled_ns) / 1e9;
		c->throttled_ratio = c->throttled_s / dt;
	}
	if (y->have_stat) {
		c->have_total = TRUE;
		c->throttled_total_s = (gdouble)y->throttled_ns / 1e9;
	}
	c->have_quota = y->have_quota;
	c->quota_cpus = y->quota_cpus;
	if (x && x->have_pressure && y->have_pressure &&
	    y->pressure_some_us >= x->pressure_some_us) {
		c->have_pressure = TRUE;
		c->pressure_some = (gdouble)(y->pressure_some_us - x->pressure_some_us) /
				   1e6 / dt;
	}
	g_hash_table_insert(done, c->key, c);
	return c;
}

static UsPlacement
thread_placement(const UsDomain *d, const UsThread *t)
{
	g_autofree gchar *leaf = NULL;
	g_autofree gchar *parent = NULL;
	g_autofree gchar *name = NULL;
	g_autofree gchar *own = NULL;

	if (!d->group || !t->cg.cpu_path)
		return US_PLACE_UNKNOWN;
	if (us_cgroup_is_under(t->cg.cpu_path, d->group))
		return US_PLACE_OWN;
	/* .../NAME/vcpuN with NAME the basename of the domain's own group */
	leaf = g_path_get_basename(t->cg.cpu_path);
	parent = g_path_get_dirname(t->cg.cpu_path);
	name = g_path_get_basename(parent);
	own = g_path_get_basename(d->group);
	if (g_str_has_prefix(leaf, "vcpu") && strcmp(name, own) == 0)
		return US_PLACE_NESTED;
	return US_PLACE_SHARED;
}

static void
domain_cgroups(UsDomainResult *dr)
{
	dr->have_throttle = FALSE;
	dr->have_quota = dr->cgroups->len > 0;
	dr->quota_cpus = 0;
	for (guint i = 0; i < dr->cgroups->len; i++) {
		const UsCgroupResult *c = g_ptr_array_index(dr->cgroups, i);

		if (c->have_throttle) {
			dr->have_throttle = TRUE;
			dr->periods += c->periods;
			dr->throttled += c->throttled;
			dr->throttled_ratio += c->throttled_ratio;
		}
		if (!c->have_quota)
			dr->have_quota = FALSE;
		else if (c->quota_cpus < 0 || dr->quota_cpus < 0)
			dr->quota_cpus = -1;
		else
			dr->quota_cpus += c->quota_cpus;
	}
}

/* TRUE if the later snapshot already says why thread TID is missing. */
static gboolean
already_noted(const UsSnapshot *b, gint tid)
{
	gchar *needle = g_strdup_printf("(tid %d):", tid);
	gboolean found = FALSE;

	for (guint i = 0; i < b->notes->len && !found; i++)
		found = strstr(g_ptr_array_index(b->notes, i), needle) != NULL;
	g_free(needle);
	return found;
}

static void
note_exits(const UsSnapshot *a, const UsSnapshot *b, GPtrArray *skipped)
{
	for (guint i = 0; i < a->domains->len; i++) {
		const UsDomain *da = g_ptr_array_index(a->domains, i);
		const UsDomain *db = find_domain(b, da->pid);

		if (!db) {
			us_note(skipped, "domain %s (pid %d): exited", da->name,
				da->pid);
			continue;
		}
		for (guint j = 0; j < da->vcpus->len; j++) {
			const UsThread *t = g_ptr_array_index(da->vcpus, j);

			if (!find_thread(db, t->tid) && !already_noted(b, t->tid))
				us_note(skipped,
					"domain %s vCPU %d (tid %d): gone in second sample",
					da->name, t->vcpu, t->tid);
		}
	}
}

UsResult *
us_model_compute(const UsSnapshot *a, const UsSnapshot *b,
		 const UsModelOptions *opt, gchar **err)
{
	gdouble dt = b->time - a->time;
	gdouble threshold = opt ? opt->busy_threshold : US_DEFAULT_BUSY_THRESHOLD;
	GHashTable *cgs;
	gdouble host_idle;
	UsResult *r;

	if (!(dt > 0)) {
		if (err)
			*err = g_strdup_printf("non-positive sampling interval (%.3f s)", dt);
		return NULL;
	}
	r = g_new0(UsResult, 1);
	r->interval = dt;
	r->realtime_us = b->realtime_us;
	r->libvirt = b->libvirt;
	r->domains = g_ptr_array_new_with_free_func((GDestroyNotify)domain_result_free);
	r->cgroups = g_ptr_array_new_with_free_func((GDestroyNotify)cgroup_result_free);
	r->skipped = g_ptr_array_new_with_free_func(g_free);
	/* Notes of both snapshots that concern the later one are what was
	 * skipped in this interval. */
	for (guint i = 0; i < b->notes->len; i++)
		g_ptr_array_add(r->skipped, g_strdup(g_ptr_array_index(b->notes, i)));
	note_exits(a, b, r->skipped);

	for (guint i = 0; i < b->cpus->len; i++)
		if (g_array_index(b->cpus, UsCpuTimes, i).present)
			r->ncpus++;
	if (a->all.present && b->all.present && b->all.total > a->all.total &&
	    b->all.idle >= a->all.idle)
		r->idle = clamp01((gdouble)(b->all.idle - a->all.idle) /
				  (gdouble)(b->all.total - a->all.total));
	if (b->all.present) {
		long hz = sysconf(_SC_CLK_TCK);

		r->have_idle_total = TRUE;
		r->idle_total_s = (gdouble)b->all.idle / (gdouble)(hz > 0 ? hz : 100);
	}

	host_idle = idle_fraction(a, b, NULL);
	cgs = g_hash_table_new(g_str_hash, g_str_equal);
	for (guint i = 0; i < b->domains->len; i++) {
		const UsDomain *db = g_ptr_array_index(b->domains, i);
		const UsDomain *da = find_domain(a, db->pid);
		UsDomainResult *dr;
		guint own = 0, shared = 0, nested = 0;

		if (!da) {
			us_note(r->skipped, "domain %s (pid %d): new, measured from the next sample",
				db->name, db->pid);
			continue;
		}
		dr = g_new0(UsDomainResult, 1);
		dr->name = g_strdup(db->name);
		dr->pid = db->pid;
		dr->group = g_strdup(db->group);
		dr->uuid = g_strdup(db->lv && db->lv->uuid ? db->lv->uuid : db->uuid);
		dr->lv = us_lv_domain_copy(db->lv);
		dr->expected = expected_placement(dr->lv, db->vcpus->len ?
			((const UsThread *)g_ptr_array_index(db->vcpus, 0))->cg.cpu_version : 0);
		dr->vcpus = g_ptr_array_new_with_free_func((GDestroyNotify)vcpu_result_free);
		dr->cgroups = g_ptr_array_new();

		for (guint j = 0; j < db->vcpus->len; j++) {
			const UsThread *tb = g_ptr_array_index(db->vcpus, j);
			const UsThread *ta = find_thread(da, tb->tid);
			UsVcpuResult *v;

			if (!ta) {
				us_note(r->skipped, "domain %s vCPU %d (tid %d): new, measured from the next sample",
					db->name, tb->vcpu, tb->tid);
				continue;
			}
			if (tb->run_ns < ta->run_ns || tb->wait_ns < ta->wait_ns) {
				us_note(r->skipped, "domain %s vCPU %d (tid %d): counters went backwards",
					db->name, tb->vcpu, tb->tid);
				continue;
			}
			v = g_new0(UsVcpuResult, 1);
			v->vcpu = tb->vcpu;
			v->tid = tb->tid;
			v->cpus = g_strdup(tb->cpus_allowed);
			v->cgroup = g_strdup(tb->cg.cpu_path);
			v->placement = thread_placement(db, tb);
			v->util = (gdouble)(tb->run_ns - ta->run_ns) / 1e9 / dt;
			v->steal = (gdouble)(tb->wait_ns - ta->wait_ns) / 1e9 / dt;
			/* idle steal counts every idle host CPU, not only the
			 * allowed ones: waiting while a CPU the vCPU may not use
			 * sits idle is a placement (pinning, cpuset, quota)
			 * problem, fixable in software (docs/unsteal.md) */
			v->idle_frac = host_idle;
			v->allowed_idle = idle_fraction(a, b, tb->allowed);
			v->idle_steal = v->steal * v->idle_frac;
			v->busy_steal = v->steal - v->idle_steal;
			/* the same split in seconds, from the delta itself */
			v->idle_wait_s = (gdouble)(tb->wait_ns - ta->wait_ns) / 1e9 *
					 v->idle_frac;
			v->busy_wait_s = MAX((gdouble)(tb->wait_ns - ta->wait_ns) / 1e9 -
					     v->idle_wait_s, 0.0);
			v->run_s = (gdouble)tb->run_ns / 1e9;
			v->wait_s = (gdouble)tb->wait_ns / 1e9;
			v->order = -1;
			if (db->lv) {
				const UsLvVcpu *lb = us_lv_domain_vcpu_const(db->lv, tb->vcpu);
				const UsLvVcpu *la = us_lv_domain_vcpu_const(da->lv, tb->vcpu);

				if (lb)
					v->order = lb->order;
				/* over the interval between libvirt's own two
				 * readings, which lag the /proc ones a little */
				gdouble ldt = da->lv ? db->lv->stats_time - da->lv->stats_time : 0;

				if (la && lb && la->have_delay && lb->have_delay &&
				    lb->delay_ns >= la->delay_ns && ldt > 0) {
					v->have_lv_steal = TRUE;
					v->lv_steal = (gdouble)(lb->delay_ns - la->delay_ns) / 1e9 / ldt;
				}
			}
			g_ptr_array_add(dr->vcpus, v);

			if (v->placement == US_PLACE_OWN)
				own++;
			else if (v->placement == US_PLACE_SHARED)
				shared++;
			else if (v->placement == US_PLACE_NESTED)
				nested++;
			if (tb->cg.cpu_path) {
				gchar *key = us_cgroup_key(tb->cg.cpu_version, tb->cg.cpu_path);
				UsCgroupResult *c = cgroup_result(cgs, a, b, key, dt);

				g_free(key);
				if (c) {
					c->users++;
					if (!g_ptr_array_find(dr->cgroups, c, NULL))
						g_ptr_array_add(dr->cgroups, c);
				}
			}
			dr->util += v->util;
			dr->steal += v->steal;
			dr->idle_steal += v->idle_steal;
			dr->busy_steal += v->busy_steal;
		}
		dr->nvcpus = dr->vcpus->len;
		r->util += dr->util;
		r->steal += dr->steal;
		r->idle_steal += dr->idle_steal;
		r->busy_steal += dr->busy_steal;
		r->nvcpus += dr->nvcpus;
		if (dr->nvcpus) {
			dr->util /= dr->nvcpus;
			dr->steal /= dr->nvcpus;
			dr->idle_steal /= dr->nvcpus;
			dr->busy_steal /= dr->nvcpus;
		}
		/* busy: utilisation + steal >= threshold % of the vCPU count */
		dr->busy = dr->nvcpus > 0 &&
			   (dr->util + dr->steal) * 100.0 >= threshold - 1e-9;
		if ((own > 0) + (shared > 0) + (nested > 0) > 1)
			dr->placement = US_PLACE_MIXED;
		else if (own)
			dr->placement = US_PLACE_OWN;
		else if (shared)
			dr->placement = US_PLACE_SHARED;
		else if (nested)
			dr->placement = US_PLACE_NESTED;
		g_ptr_array_sort(dr->cgroups, cmp_cgroup);
		domain_cgroups(dr);
		g_ptr_array_add(r->domains, dr);
	}
	r->ndomains = r->domains->len;

	{
		GHashTableIter it;
		gpointer k, val;

		g_hash_table_iter_init(&it, cgs);
		while (g_hash_table_iter_next(&it, &k, &val))
			g_ptr_array_add(r->cgroups, val);
		g_ptr_array_sort(r->cgroups, cmp_cgroup);
	}
	g_hash_table_destroy(cgs);
	return r;
}
