/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The idle/busy wait counters (src/totals.c) over six synthetic samples of
 * one fixture tree, 2 s apart, on a 2-CPU host whose idle fraction in the
 * five intervals is 0.25, 0.5, 1, 0 and 0.5:
 *
 *   alpha (pid 100) tid 101 vCPU 0: wait +0.4 +0.2 +1.0 +0.6 +0.2 s
 *                   tid 102 vCPU 1: wait +0.8 +0.4, then exits (sample 3)
 *                   tid 104 vCPU 1: appears in sample 3, wait +0.5 +0.1 s
 *   beta  (pid 200) tid 201 vCPU 0: wait +0.2 +0.2 +0.2, then the process
 *                   exits; in sample 4 a new beta (pid 250) runs its vCPU
 *                   in a thread that reuses tid 201: wait +0.3 s (5th)
 */
#include <string.h>

#include "fixture.h"
#include "model.h"
#include "output.h"
#include "proc.h"
#include "totals.h"

#define EPS 1e-9
#define NSAMPLES 6

/* per CPU idle ticks in each interval, of 200 */
static const guint idle_ticks[NSAMPLES - 1] = { 50, 100, 200, 0, 100 };
static const gdouble frac[NSAMPLES - 1] = { 0.25, 0.5, 1.0, 0.0, 0.5 };

static void
thread(const gchar *root, gint pid, gint tid, const gchar *comm, gdouble wait_s)
{
	gchar *p, *c;

	p = g_strdup_printf("proc/%d/task/%d/comm", pid, tid);
	c = g_strdup_printf("%s\n", comm);
	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
	p = g_strdup_printf("proc/%d/task/%d/schedstat", pid, tid);
	/* run time: anything increasing */
	c = g_strdup_printf("%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " 1\n",
			    (guint64)(wait_s * 3e9), (guint64)(wait_s * 1e9 + 0.5));
	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
	p = g_strdup_printf("proc/%d/task/%d/status", pid, tid);
	fx_write(root, p, "Name:\tx\nCpus_allowed_list:\t0-1\n", -1);
	g_free(p);
	p = g_strdup_printf("proc/%d/task/%d/cgroup", pid, tid);
	fx_write(root, p, "0::/machine/vcpus.partition\n", -1);
	g_free(p);
}

static void
process(const gchar *root, gint pid, const gchar *comm, const gchar *cmd, gsize len)
{
	gchar *p = g_strdup_printf("proc/%d/comm", pid);
	gchar *c = g_strdup_printf("%s\n", comm);

	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
	p = g_strdup_printf("proc/%d/cmdline", pid);
	fx_write(root, p, cmd, (gssize)len);
	g_free(p);
	p = g_strdup_printf("proc/%d/task/%d/comm", pid, pid);
	fx_write(root, p, comm, -1);
	g_free(p);
	p = g_strdup_printf("proc/%d/task/%d/cgroup", pid, pid);
	c = g_strdup_printf("0::/machine/%s.libvirt-qemu/emulator\n",
			    pid == 100 ? "alpha" : "beta");
	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
}

/* Cumulative wait of each thread at sample K (< 0: not there). */
static gdouble
wait_at(const gdouble *deltas, gint first, gint last, gint k)
{
	gdouble w = 1.0;

	if (k < first || k > last)
		return -1;
	for (gint i = first; i < k; i++)
		w += deltas[i - first];
	return w;
}

static const gdouble w101[] = { 0.4, 0.2, 1.0, 0.6, 0.2 };
static const gdouble w102[] = { 0.8, 0.4 };
static const gdouble w104[] = { 0.5, 0.1 };
static const gdouble w201[] = { 0.2, 0.2, 0.2 };
static const gdouble w251[] = { 0.3 };

static void
write_sample(const gchar *root, gint k)
{
	static const gchar alpha[] = "qemu-system-x86_64\0-name\0guest=alpha\0"
				     "-uuid\0006695eb01-f6a4-8304-79aa-97f2502e193f\0";
	static const gchar beta[] = "qemu-kvm\0-name\0beta\0";
	guint64 idle = 1000, user = 1000;
	gchar *stat, *up;

	fx_remove(root, "proc");
	fx_write(root, "sys/fs/cgroup/cgroup.controllers", "cpu\n", -1);
	for (gint i = 0; i < k; i++) {
		idle += idle_ticks[i];
		user += 200 - idle_ticks[i];
	}
	/* the all-CPU line steps back one tick in sample 5: the host's idle
	 * counter must not */
	stat = g_strdup_printf("cpu  %" G_GUINT64_FORMAT " 0 0 %" G_GUINT64_FORMAT
			       " 0 0 0 0 0 0\ncpu0 %" G_GUINT64_FORMAT " 0 0 %"
			       G_GUINT64_FORMAT " 0 0 0 0 0 0\ncpu1 %" G_GUINT64_FORMAT
			       " 0 0 %" G_GUINT64_FORMAT " 0 0 0 0 0 0\n",
			       2 * user, 2 * idle - (k == 5 ? 201 : 0), user, idle,
			       user, idle);
	fx_write(root, "proc/stat", stat, -1);
	up = g_strdup_printf("%d.00 1.00\n", 100 + 2 * k);
	fx_write(root, "proc/uptime", up, -1);
	g_free(stat);
	g_free(up);

	process(root, 100, "qemu-system-x86", alpha, sizeof(alpha) - 1);
	thread(root, 100, 101, "CPU 0/KVM", wait_at(w101, 0, 5, k));
	if (k <= 2)
		thread(root, 100, 102, "CPU 1/KVM", wait_at(w102, 0, 2, k));
	else
		thread(root, 100, 104, "CPU 1/KVM", wait_at(w104, 3, 5, k));
	if (k <= 3) {
		process(root, 200, "qemu-kvm", beta, sizeof(beta) - 1);
		thread(root, 200, 201, "CPU 0/TCG", wait_at(w201, 0, 3, k));
	} else {
		process(root, 250, "qemu-kvm", beta, sizeof(beta) - 1);
		thread(root, 250, 201, "CPU 0/TCG", wait_at(w251, 4, 5, k));
	}
}

static const UsVcpuResult *
find(const UsResult *r, gint pid, gint tid)
{
	for (guint i = 0; i < r->domains->len; i++) {
		const UsDomainResult *d = g_ptr_array_index(r->domains, i);

		for (guint j = 0; d->pid == pid && j < d->vcpus->len; j++) {
			const UsVcpuResult *v = g_ptr_array_index(d->vcpus, j);

			if (v->tid == tid)
				return v;
		}
	}
	return NULL;
}

/* Σ over intervals FIRST..K-1 of wait x idle fraction (IDLE) or the rest. */
static gdouble
expect(const gdouble *deltas, gint first, gint k, gboolean idle)
{
	gdouble s = 0;

	for (gint i = first; i < k; i++)
		s += deltas[i - first] * (idle ? frac[i] : 1.0 - frac[i]);
	return s;
}

static void
check_thread(const UsResult *r, gint pid, gint tid, const gdouble *deltas,
	     gint first, gint k)
{
	const UsVcpuResult *v = find(r, pid, tid);

	g_assert_nonnull(v);
	g_assert_true(v->have_totals);
	g_assert_cmpfloat_with_epsilon(v->idle_wait_total_s,
				       expect(deltas, first, k, TRUE), EPS);
	g_assert_cmpfloat_with_epsilon(v->busy_wait_total_s,
				       expect(deltas, first, k, FALSE), EPS);
	/* the split adds up to the interval's wait */
	g_assert_cmpfloat_with_epsilon(v->idle_wait_s + v->busy_wait_s,
				       deltas[k - 1 - first], EPS);
}

static void
test_counters(void)
{
	gchar *root = fx_tmpdir();
	UsSource *src;
	UsTotals *t = us_totals_new();
	UsSnapshot *prev;
	UsModelOptions mo = { US_DEFAULT_BUSY_THRESHOLD };
	gdouble last_idle = -1, last_busy = -1, last_host = -1;

	write_sample(root, 0);
	src = us_source_new(root);
	prev = us_snapshot_take(src);
	for (gint k = 1; k < NSAMPLES; k++) {
		UsSnapshot *cur;
		UsResult *r;
		const UsVcpuResult *v;
		gchar *err = NULL;

		write_sample(root, k);
		cur = us_snapshot_take(src);
		r = us_model_compute(prev, cur, &mo, &err);
		g_assert_null(err);
		us_totals_add(t, r);

		/* tid 101 lives through all: exact sums, never decreasing */
		check_thread(r, 100, 101, w101, 0, k);
		v = find(r, 100, 101);
		g_assert_cmpfloat(v->idle_wait_total_s, >=, last_idle);
		g_assert_cmpfloat(v->busy_wait_total_s, >=, last_busy);
		last_idle = v->idle_wait_total_s;
		last_busy = v->busy_wait_total_s;
		g_assert_true(r->have_idle_total);
		g_assert_cmpfloat(r->idle_total_s, >=, last_host);
		last_host = r->idle_total_s;

		if (k <= 2)
			check_thread(r, 100, 102, w102, 0, k);
		else
			g_assert_null(find(r, 100, 102));
		/* new in sample 3: measured from interval 4, from zero */
		if (k >= 4)
			check_thread(r, 100, 104, w104, 3, k);
		if (k <= 3)
			check_thread(r, 200, 201, w201, 0, k);
		/* the new beta's thread reuses tid 201: its own counters */
		if (k == 5)
			check_thread(r, 250, 201, w251, 4, k);
		else
			g_assert_null(find(r, 250, 201));

		/* one entry per measured thread, no more */
		g_assert_cmpuint(us_totals_size(t), ==,
				 k <= 2 ? 3 : k == 3 ? 2 : k == 4 ? 2 : 3);
		us_result_free(r);
		us_snapshot_free(prev);
		prev = cur;
	}
	/* the all-CPU line stepped back in sample 5; the counter held */
	g_assert_cmpfloat_with_epsilon(last_host, 2.0 * (1000 + 350) / 100.0, EPS);
	us_snapshot_free(prev);
	us_totals_free(t);
	us_source_free(src);
	fx_cleanup(root);
}

/* The counters in the Prometheus text: labels, microsecond precision. */
static void
test_prometheus(void)
{
	gchar *root = fx_tmpdir();
	UsSource *src;
	UsTotals *t = us_totals_new();
	UsSnapshot *a, *b;
	UsResult *r;
	UsOutputOptions oo = { .busy_threshold = US_DEFAULT_BUSY_THRESHOLD };
	GString *out = g_string_new(NULL);

	write_sample(root, 0);
	src = us_source_new(root);
	a = us_snapshot_take(src);
	write_sample(root, 1);
	b = us_snapshot_take(src);
	r = us_model_compute(a, b, NULL, NULL);
	g_assert_nonnull(r);
	/* without totals, no idle/busy counters are written */
	us_output_prometheus(out, r, &oo);
	g_assert_null(strstr(out->str, "unsteal_vcpu_idle_wait_seconds_total{"));
	g_string_truncate(out, 0);
	us_totals_add(t, r);
	us_output_prometheus(out, r, &oo);
	g_assert_nonnull(strstr(out->str,
		"# TYPE unsteal_vcpu_idle_wait_seconds_total counter\n"
		"unsteal_vcpu_idle_wait_seconds_total{domain=\"alpha\",vcpu=\"0\","
		"uuid=\"6695eb01-f6a4-8304-79aa-97f2502e193f\"} 0.100000\n"
		"unsteal_vcpu_idle_wait_seconds_total{domain=\"alpha\",vcpu=\"1\","
		"uuid=\"6695eb01-f6a4-8304-79aa-97f2502e193f\"} 0.200000\n"
		"unsteal_vcpu_idle_wait_seconds_total{domain=\"beta\",vcpu=\"0\"} 0.050000\n"));
	g_assert_nonnull(strstr(out->str,
		"unsteal_vcpu_busy_wait_seconds_total{domain=\"beta\",vcpu=\"0\"} 0.150000\n"));
	g_assert_nonnull(strstr(out->str, "# TYPE unsteal_host_idle_seconds_total counter\n"
				"unsteal_host_idle_seconds_total 21.000000\n"));
	g_assert_nonnull(strstr(out->str, "unsteal_domain_info{domain=\"alpha\","
				"uuid=\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
				"placement=\"shared\",group=\"/machine/alpha.libvirt-qemu\"} 1\n"));
	/* libvirt mode: the <cputune> values that are set, one label each */
	{
		UsDomainResult *d = g_ptr_array_index(r->domains, 0);

		d->lv = us_lv_domain_new();
		d->lv->have_tune = TRUE;
		d->lv->tune.shares_set = TRUE;
		d->lv->tune.shares = 2048;
		d->lv->tune.quota = 20000;
		r->libvirt = US_LV_UP;
		g_string_truncate(out, 0);
		us_output_prometheus(out, r, &oo);
		g_assert_nonnull(strstr(out->str, "unsteal_domain_cputune_info{domain=\"alpha\","
					"uuid=\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
					"shares=\"2048\",quota=\"20000\"} 1\n"));
	}
	g_string_free(out, TRUE);
	us_result_free(r);
	us_snapshot_free(a);
	us_snapshot_free(b);
	us_totals_free(t);
	us_source_free(src);
	fx_cleanup(root);
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/totals/counters", test_counters);
	g_test_add_func("/totals/prometheus", test_prometheus);
	return g_test_run();
}
