/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Sampling + model on fixture trees: exact figures, layouts, races. */
#include <string.h>

#include "fixture.h"
#include "model.h"
#include "proc.h"

#define EPS 1e-9

typedef struct {
	gchar *root;
} Fx;

static void
fx_setup(Fx *f, gconstpointer data)
{
	(void)data;
	f->root = fx_tmpdir();
}

static void
fx_teardown(Fx *f, gconstpointer data)
{
	(void)data;
	fx_cleanup(f->root);
}

/* Take sample 0, let MUTATE change the tree into sample 1, take sample 1. */
typedef void (*Mutate)(const gchar *root, FxLayout l);

static UsResult *
run(const gchar *root, FxLayout l, Mutate m0, Mutate m1, gdouble threshold)
{
	UsSource *src;
	UsSnapshot *a, *b;
	UsResult *r;
	UsModelOptions mo = { threshold };
	gchar *err = NULL;

	fx_build(root, l, 0);
	if (m0)
		m0(root, l);
	src = us_source_new(root);
	a = us_snapshot_take(src);
	fx_build(root, l, 1);
	if (m1)
		m1(root, l);
	b = us_snapshot_take(src);
	r = us_model_compute(a, b, &mo, &err);
	g_assert_null(err);
	g_assert_nonnull(r);
	us_snapshot_free(a);
	us_snapshot_free(b);
	us_source_free(src);
	return r;
}

static const UsDomainResult *
dom(const UsResult *r, const gchar *name)
{
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		if (strcmp(d->name, name) == 0)
			return d;
	}
	return NULL;
}

static const UsVcpuResult *
vcpu(const UsDomainResult *d, guint i)
{
	g_assert_cmpuint(i, <, d->vcpus->len);
	return g_ptr_array_index(d->vcpus, i);
}

static gboolean
has_note(const UsResult *r, const gchar *text)
{
	for (guint i = 0; i < r->skipped->len; i++)
		if (strstr(g_ptr_array_index(r->skipped, i), text))
			return TRUE;
	return FALSE;
}

static void
check_figures(const UsResult *r)
{
	const UsDomainResult *a = dom(r, "alpha"), *b = dom(r, "beta");
	const UsVcpuResult *v;

	g_assert_cmpfloat_with_epsilon(r->interval, 2.0, EPS);
	g_assert_cmpuint(r->ncpus, ==, 2);
	g_assert_cmpfloat_with_epsilon(r->idle, 0.375, EPS);
	g_assert_cmpuint(r->ndomains, ==, 2);
	g_assert_cmpuint(r->nvcpus, ==, 3);

	g_assert_nonnull(a);
	g_assert_cmpint(a->pid, ==, 100);
	g_assert_cmpuint(a->nvcpus, ==, 2);
	v = vcpu(a, 0);
	g_assert_cmpint(v->vcpu, ==, 0);
	g_assert_cmpint(v->tid, ==, 101);
	g_assert_cmpstr(v->cpus, ==, "0");
	g_assert_cmpfloat_with_epsilon(v->util, 0.75, EPS);
	g_assert_cmpfloat_with_epsilon(v->steal, 0.2, EPS);
	/* idle steal: steal x host idle (0.375), whatever the allowed CPUs */
	g_assert_cmpfloat_with_epsilon(v->idle_frac, 0.375, EPS);
	g_assert_cmpfloat_with_epsilon(v->allowed_idle, 0.25, EPS);
	g_assert_cmpfloat_with_epsilon(v->idle_steal, 0.075, EPS);
	g_assert_cmpfloat_with_epsilon(v->busy_steal, 0.125, EPS);
	v = vcpu(a, 1);
	g_assert_cmpint(v->vcpu, ==, 1);
	g_assert_cmpint(v->tid, ==, 102);
	g_assert_cmpfloat_with_epsilon(v->util, 0.8, EPS);
	g_assert_cmpfloat_with_epsilon(v->steal, 0.1, EPS);
	g_assert_cmpfloat_with_epsilon(v->idle_frac, 0.375, EPS);
	g_assert_cmpfloat_with_epsilon(v->allowed_idle, 0.375, EPS);
	g_assert_cmpfloat_with_epsilon(v->idle_steal, 0.0375, EPS);
	g_assert_cmpfloat_with_epsilon(v->busy_steal, 0.0625, EPS);
	g_assert_cmpfloat_with_epsilon(a->util, 0.775, EPS);
	g_assert_cmpfloat_with_epsilon(a->steal, 0.15, EPS);
	g_assert_cmpfloat_with_epsilon(a->idle_steal, 0.05625, EPS);
	g_assert_cmpfloat_with_epsilon(a->busy_steal, 0.09375, EPS);
	g_assert_true(a->busy);    /* 0.775 + 0.15 = 92.5 % >= 90 % */

	g_assert_nonnull(b);
	g_assert_cmpint(b->pid, ==, 200);
	g_assert_cmpuint(b->nvcpus, ==, 1);
	v = vcpu(b, 0);
	g_assert_cmpint(v->tid, ==, 201);
	g_assert_cmpfloat_with_epsilon(v->util, 0.1, EPS);
	g_assert_cmpfloat_with_epsilon(v->steal, 0.3, EPS);
	g_assert_cmpfloat_with_epsilon(v->idle_frac, 0.375, EPS);
	g_assert_cmpfloat_with_epsilon(v->allowed_idle, 0.5, EPS);
	g_assert_cmpfloat_with_epsilon(v->idle_steal, 0.1125, EPS);
	g_assert_cmpfloat_with_epsilon(v->busy_steal, 0.1875, EPS);
	g_assert_false(b->busy);   /* 40 % */

	g_assert_cmpfloat_with_epsilon(r->util, 1.65, EPS);
	g_assert_cmpfloat_with_epsilon(r->steal, 0.6, EPS);
	g_assert_cmpfloat_with_epsilon(r->idle_steal, 0.225, EPS);
	g_assert_cmpfloat_with_epsilon(r->busy_steal, 0.375, EPS);
}

static void
check_placement(const UsResult *r, gint version)
{
	const UsDomainResult *a = dom(r, "alpha"), *b = dom(r, "beta");
	const UsCgroupResult *c;

	g_assert_cmpstr(a->group, ==, "/machine/alpha.libvirt-qemu");
	g_assert_cmpint(a->placement, ==, US_PLACE_SHARED);
	g_assert_cmpint(vcpu(a, 0)->placement, ==, US_PLACE_SHARED);
	g_assert_cmpstr(vcpu(a, 1)->cgroup, ==, "/machine/vcpus.partition");
	g_assert_cmpstr(b->group, ==, "/machine/beta.libvirt-qemu");
	g_assert_cmpint(b->placement, ==, US_PLACE_OWN);
	g_assert_cmpstr(vcpu(b, 0)->cgroup, ==, "/machine/beta.libvirt-qemu/vcpu0");

	/* throttling of the shared group */
	g_assert_true(a->have_throttle);
	g_assert_cmpuint(a->periods, ==, 20);
	g_assert_cmpuint(a->throttled, ==, 5);
	g_assert_cmpfloat_with_epsilon(a->throttled_ratio, 0.25, EPS);
	g_assert_true(a->have_quota);
	g_assert_cmpfloat(a->quota_cpus, <, 0);
	g_assert_true(b->have_throttle);
	g_assert_cmpuint(b->periods, ==, 20);
	g_assert_cmpuint(b->throttled, ==, 0);
	g_assert_cmpfloat_with_epsilon(b->quota_cpus, 0.5, EPS);

	g_assert_cmpuint(r->cgroups->len, ==, 2);
	c = g_ptr_array_index(r->cgroups, 1);
	g_assert_cmpstr(c->path, ==, "/machine/vcpus.partition");
	g_assert_cmpint(c->version, ==, version);
	g_assert_cmpuint(c->users, ==, 2);
	g_assert_cmpfloat_with_epsilon(c->throttled_s, 0.5, EPS);
	g_assert_cmpint(c->have_pressure, ==, version == 2);
	if (version == 2)
		g_assert_cmpfloat_with_epsilon(c->pressure_some, 0.2, EPS);
	g_assert_cmpuint(r->skipped->len, ==, 0);
}

/* The pinned case of docs/unsteal.md: alpha's two vCPUs may only use
 * CPU 0, which is never idle, while CPU 1 is idle the whole interval. */
static void
pin_to_cpu0(const gchar *root, gboolean later)
{
	static const gchar status[] = "Name:\tCPU\nCpus_allowed:\t1\n"
				      "Cpus_allowed_list:\t0\n";

	fx_write(root, "proc/stat", later ?
		 "cpu  1200 0 0 1200 0 0 0 0 0 0\n"
		 "cpu0 1200 0 0 0 0 0 0 0 0 0\n"
		 "cpu1 0 0 0 1200 0 0 0 0 0 0\n" :
		 "cpu  1000 0 0 1000 0 0 0 0 0 0\n"
		 "cpu0 1000 0 0 0 0 0 0 0 0 0\n"
		 "cpu1 0 0 0 1000 0 0 0 0 0 0\n", -1);
	fx_write(root, "proc/100/task/101/status", status, -1);
	fx_write(root, "proc/100/task/102/status", status, -1);
}

static void
pin0(const gchar *root, FxLayout l)
{
	(void)l;
	pin_to_cpu0(root, FALSE);
}

static void
pin1(const gchar *root, FxLayout l)
{
	(void)l;
	pin_to_cpu0(root, TRUE);
}

static void
test_pinned_idle(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, pin0, pin1, 90);
	const UsDomainResult *a = dom(r, "alpha");

	(void)data;
	g_assert_cmpfloat_with_epsilon(r->idle, 0.5, EPS);
	for (guint i = 0; i < 2; i++) {
		const UsVcpuResult *v = vcpu(a, i);

		g_assert_cmpstr(v->cpus, ==, "0");
		/* its allowed CPU never idled, yet CPU 1 idled all along:
		 * idle steal, half of the steal */
		g_assert_cmpfloat_with_epsilon(v->allowed_idle, 0.0, EPS);
		g_assert_cmpfloat_with_epsilon(v->idle_frac, 0.5, EPS);
		g_assert_cmpfloat_with_epsilon(v->idle_steal, v->steal * 0.5, EPS);
		g_assert_cmpfloat(v->idle_steal, >, 0.04);
	}
	us_result_free(r);
}

/* libvirt's view attached to alpha (as us_libvirt_apply does): vCPU 1
 * hot-plugged with order 2, delays +0.3 s and +0.1 s over libvirt's own
 * 2.5 s between its two readings. */
static UsLvDomain *
lv_alpha(gdouble t, guint64 d0, guint64 d1, gint64 quota)
{
	UsLvDomain *l = us_lv_domain_new();
	UsLvVcpu *v;

	l->name = g_strdup("alpha-lv");
	l->uuid = g_strdup("6695eb01-f6a4-8304-79aa-97f2502e193f");
	l->id = 7;
	l->have_tune = TRUE;
	l->tune.quota = quota;
	l->stats_time = t;
	v = us_lv_domain_vcpu(l, 0, TRUE);
	v->have_delay = TRUE;
	v->delay_ns = d0;
	v = us_lv_domain_vcpu(l, 1, TRUE);
	v->order = 2;
	v->have_delay = TRUE;
	v->delay_ns = d1;
	return l;
}

static void
test_libvirt(Fx *f, gconstpointer data)
{
	UsSource *src;
	UsSnapshot *a, *b;
	UsResult *r;
	UsModelOptions mo = { 90 };
	const UsDomainResult *d;
	const UsVcpuResult *v;

	(void)data;
	fx_build(f->root, FX_V1, 0);
	src = us_source_new(f->root);
	a = us_snapshot_take(src);
	fx_build(f->root, FX_V1, 1);
	b = us_snapshot_take(src);
	for (guint i = 0; i < a->domains->len; i++) {
		UsDomain *x = g_ptr_array_index(a->domains, i);

		if (x->pid == 100) {
			g_assert_cmpstr(x->uuid, ==, "6695eb01-f6a4-8304-79aa-97f2502e193f");
			x->lv = lv_alpha(50.0, 1000000000, 5000000000, 0);
		}
	}
	for (guint i = 0; i < b->domains->len; i++) {
		UsDomain *x = g_ptr_array_index(b->domains, i);

		if (x->pid == 100)
			x->lv = lv_alpha(52.5, 1300000000, 5100000000, 20000);
	}
	b->libvirt = US_LV_UP;
	r = us_model_compute(a, b, &mo, NULL);
	g_assert_nonnull(r);
	g_assert_cmpint(r->libvirt, ==, US_LV_UP);
	d = dom(r, "alpha");
	g_assert_nonnull(d->lv);
	g_assert_cmpint(d->lv->id, ==, 7);
	/* the later sample's tunables count: a vCPU quota alone nests on v1 */
	g_assert_cmpstr(us_expected_placement(d->lv, 1), ==, "nested");
	g_assert_cmpint(d->expected, ==, US_PLACE_NESTED);
	v = vcpu(d, 0);
	g_assert_true(v->have_lv_steal);
	g_assert_cmpfloat_with_epsilon(v->lv_steal, 0.12, EPS);  /* 0.3 / 2.5 */
	g_assert_cmpint(v->order, ==, -1);
	v = vcpu(d, 1);
	g_assert_cmpfloat_with_epsilon(v->lv_steal, 0.04, EPS);  /* 0.1 / 2.5 */
	g_assert_cmpint(v->order, ==, 2);
	/* schedstat figures are untouched by libvirt's */
	g_assert_cmpfloat_with_epsilon(v->steal, 0.1, EPS);
	g_assert_null(dom(r, "beta")->lv);
	g_assert_cmpint(dom(r, "beta")->expected, ==, US_PLACE_UNKNOWN);
	g_assert_false(vcpu(dom(r, "beta"), 0)->have_lv_steal);
	us_result_free(r);

	/* libvirt's counter went backwards (daemon restarted): no cross-check */
	for (guint i = 0; i < b->domains->len; i++) {
		UsDomain *x = g_ptr_array_index(b->domains, i);

		if (x->pid == 100) {
			us_lv_domain_free(x->lv);
			x->lv = lv_alpha(52.5, 10, 5100000000, 0);
		}
	}
	r = us_model_compute(a, b, &mo, NULL);
	d = dom(r, "alpha");
	g_assert_false(vcpu(d, 0)->have_lv_steal);
	g_assert_true(vcpu(d, 1)->have_lv_steal);
	g_assert_cmpstr(us_expected_placement(d->lv, 1), ==, "shared");
	g_assert_cmpint(d->expected, ==, US_PLACE_SHARED);
	us_result_free(r);
	us_snapshot_free(a);
	us_snapshot_free(b);
	us_source_free(src);
}

static void
test_figures(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, NULL, NULL, 90);

	(void)data;
	check_figures(r);
	us_result_free(r);
}

static void
test_layout_v1(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, NULL, NULL, 90);

	(void)data;
	check_figures(r);
	check_placement(r, 1);
	us_result_free(r);
}

static void
test_layout_v1_comount(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1_COMOUNT, NULL, NULL, 90);

	(void)data;
	check_figures(r);
	check_placement(r, 1);
	us_result_free(r);
}

static void
test_layout_v2(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V2, NULL, NULL, 90);

	(void)data;
	check_figures(r);
	check_placement(r, 2);
	us_result_free(r);
}

static void
test_threshold(Fx *f, gconstpointer data)
{
	UsResult *r;

	(void)data;
	/* alpha is at 92.5 %, beta at 40 % */
	r = run(f->root, FX_V1, NULL, NULL, 92.5);
	g_assert_true(dom(r, "alpha")->busy);
	us_result_free(r);
	r = run(f->root, FX_V1, NULL, NULL, 93);
	g_assert_false(dom(r, "alpha")->busy);
	us_result_free(r);
	r = run(f->root, FX_V1, NULL, NULL, 40);
	g_assert_true(dom(r, "beta")->busy);
	us_result_free(r);
}

/* tid 102 exits between the samples; beta's vCPU thread vanishes after its
 * comm was read (its other files are gone). */
static void
racy_second(const gchar *root, FxLayout l)
{
	(void)l;
	fx_remove(root, "proc/100/task/102");
	fx_remove(root, "proc/200/task/201/schedstat");
	fx_remove(root, "proc/200/task/201/status");
	fx_remove(root, "proc/200/task/201/cgroup");
}

static void
test_racy(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, NULL, racy_second, 90);
	const UsDomainResult *a = dom(r, "alpha"), *b = dom(r, "beta");

	(void)data;
	g_assert_cmpuint(a->nvcpus, ==, 1);
	g_assert_cmpfloat_with_epsilon(a->util, 0.75, EPS);
	g_assert_cmpfloat_with_epsilon(a->steal, 0.2, EPS);
	g_assert_cmpuint(b->nvcpus, ==, 0);
	g_assert_false(b->busy);
	g_assert_cmpuint(r->nvcpus, ==, 1);
	g_assert_true(has_note(r, "domain alpha vCPU 1 (tid 102): gone in second sample"));
	g_assert_true(has_note(r, "domain beta vCPU 0 (tid 201): schedstat: missing"));
	us_result_free(r);
}

/* a whole QEMU process exits; another one starts */
static void
exit_second(const gchar *root, FxLayout l)
{
	(void)l;
	fx_remove(root, "proc/200");
	fx_write(root, "proc/400/comm", "qemu-system-aar\n", -1);
	fx_write(root, "proc/400/cmdline", "q\0-name\0guest=gamma,,x\0", 23);
	fx_write(root, "proc/400/task/401/comm", "CPU 0/TCG\n", -1);
	fx_write(root, "proc/400/task/401/schedstat", "1 2 3\n", -1);
}

static void
test_exit(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, NULL, exit_second, 90);

	(void)data;
	g_assert_cmpuint(r->ndomains, ==, 1);
	g_assert_nonnull(dom(r, "alpha"));
	g_assert_true(has_note(r, "domain beta (pid 200): exited"));
	g_assert_true(has_note(r, "domain gamma,x (pid 400): new"));
	/* 401 has no status and no cgroup file */
	g_assert_true(has_note(r, "domain gamma,x vCPU 0 (tid 401): Cpus_allowed_list: missing"));
	g_assert_true(has_note(r, "domain gamma,x vCPU 0 (tid 401): cgroup: missing"));
	us_result_free(r);
}

static void
missing_cgroup(const gchar *root, FxLayout l)
{
	const gchar *base = l == FX_V2 ? "sys/fs/cgroup" : "sys/fs/cgroup/cpu";
	gchar *p = g_strdup_printf("%s/machine/vcpus.partition/cpu.stat", base);
	gchar *q = g_strdup_printf("%s/machine/beta.libvirt-qemu/vcpu0", base);

	fx_remove(root, p);
	fx_remove(root, q);
	fx_remove(root, "proc/100/task/100/cgroup");
	g_free(p);
	g_free(q);
}

static void
nest0(const gchar *root, FxLayout l)
{
	fx_nest_beta(root, l, 0);
}

static void
nest1(const gchar *root, FxLayout l)
{
	fx_nest_beta(root, l, 1);
}

/* A vCPU in a group named as its domain's own group, inside another group:
 * libvirt's per-host placement of a domain with only a vCPU quota */
static void
test_layout_nested(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, nest0, nest1, 90);
	const UsDomainResult *b = dom(r, "beta");

	(void)data;
	check_figures(r);
	g_assert_cmpint(b->placement, ==, US_PLACE_NESTED);
	g_assert_cmpint(vcpu(b, 0)->placement, ==, US_PLACE_NESTED);
	g_assert_cmpstr(us_placement_name(b->placement), ==, "nested");
	g_assert_cmpstr(vcpu(b, 0)->cgroup, ==,
			"/machine/vcpus.partition/beta.libvirt-qemu/vcpu0");
	/* its quota is read where the thread is */
	g_assert_true(b->have_quota);
	g_assert_cmpint(dom(r, "alpha")->placement, ==, US_PLACE_SHARED);
	us_result_free(r);
}

static void
run_missing(const gchar *root, FxLayout l)
{
	UsResult *r = run(root, l, missing_cgroup, missing_cgroup, 90);
	const UsDomainResult *a = dom(r, "alpha"), *b = dom(r, "beta");

	/* figures do not depend on cgroups */
	check_figures(r);
	g_assert_false(a->have_throttle);
	g_assert_null(a->group);   /* emulator's cgroup file is gone */
	g_assert_cmpint(a->placement, ==, US_PLACE_UNKNOWN);
	g_assert_false(b->have_throttle);
	g_assert_false(b->have_quota);
	g_assert_cmpint(b->placement, ==, US_PLACE_OWN);
	g_assert_true(has_note(r, "cgroup /machine/vcpus.partition: cpu.stat: missing"));
	g_assert_true(has_note(r, "cgroup /machine/beta.libvirt-qemu/vcpu0: directory missing"));
	us_result_free(r);
}

static void
test_missing_cgroup(Fx *f, gconstpointer data)
{
	(void)data;
	run_missing(f->root, FX_V1);
}

static void
test_missing_cgroup_v2(Fx *f, gconstpointer data)
{
	(void)data;
	run_missing(f->root, FX_V2);
}

static void
no_mount(const gchar *root, FxLayout l)
{
	(void)l;
	fx_remove(root, "sys");
}

static void
test_no_cgroupfs(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, no_mount, no_mount, 90);

	(void)data;
	check_figures(r);
	g_assert_true(has_note(r, "no cgroup v1 hierarchy mounted"));
	us_result_free(r);
}

static void
test_bad_interval(Fx *f, gconstpointer data)
{
	UsSource *src;
	UsSnapshot *a, *b;
	gchar *err = NULL;

	(void)data;
	fx_build(f->root, FX_V1, 0);
	src = us_source_new(f->root);
	a = us_snapshot_take(src);
	b = us_snapshot_take(src);
	g_assert_null(us_model_compute(a, b, NULL, &err));
	g_assert_nonnull(err);
	g_free(err);
	us_snapshot_free(a);
	us_snapshot_free(b);
	us_source_free(src);
}

/* Garbage everywhere: nothing may crash. */
static void
garbage(const gchar *root, FxLayout l)
{
	(void)l;
	fx_write(root, "proc/stat", "cpu x y\ncpu0\ncpuZ 1 2 3 4 5\n", -1);
	fx_write(root, "proc/100/task/101/schedstat", "abc\n", -1);
	fx_write(root, "proc/100/task/102/status", "Cpus_allowed_list:\t9-2\n", -1);
	fx_write(root, "proc/100/task/102/cgroup", ":::\n\n3:cpu\n", -1);
	fx_write(root, "proc/200/cmdline", "", 0);
	fx_write(root, "sys/fs/cgroup/cpu/machine/beta.libvirt-qemu/vcpu0/cpu.stat",
		 "nr_periods\nnr_throttled -1\n", -1);
}

static void
test_garbage(Fx *f, gconstpointer data)
{
	UsResult *r = run(f->root, FX_V1, NULL, garbage, 90);

	(void)data;
	g_assert_cmpuint(r->ndomains, ==, 2);
	g_assert_nonnull(dom(r, "pid-200"));
	g_assert_true(has_note(r, "/proc/stat: malformed"));
	g_assert_true(has_note(r, "tid 101): schedstat: malformed"));
	g_assert_true(has_note(r, "tid 102): Cpus_allowed_list"));
	g_assert_true(has_note(r, "tid 102): cgroup: no cpu controller line"));
	g_assert_true(has_note(r, "no throttling counters"));
	us_result_free(r);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
#define ADD(name, fn) g_test_add(name, Fx, NULL, fx_setup, fn, fx_teardown)
	ADD("/model/figures", test_figures);
	ADD("/model/threshold", test_threshold);
	ADD("/model/layout/v1", test_layout_v1);
	ADD("/model/layout/v1-comount", test_layout_v1_comount);
	ADD("/model/layout/v2", test_layout_v2);
	ADD("/model/layout/nested", test_layout_nested);
	ADD("/model/racy", test_racy);
	ADD("/model/exit", test_exit);
	ADD("/model/missing-cgroup/v1", test_missing_cgroup);
	ADD("/model/missing-cgroup/v2", test_missing_cgroup_v2);
	ADD("/model/no-cgroupfs", test_no_cgroupfs);
	ADD("/model/bad-interval", test_bad_interval);
	ADD("/model/garbage", test_garbage);
	ADD("/model/libvirt", test_libvirt);
	ADD("/model/pinned-idle", test_pinned_idle);
	return g_test_run();
}
