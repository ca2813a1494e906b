/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The unsteal binary end to end: exact JSON, Prometheus and table output on
 * fixture trees (two --root trees = two samples), error handling, a run
 * under valgrind, and a live run against a fake QEMU process.
 *
 * Usage: test-cli UNSTEAL EXPECTED_DIR FAKE_QEMU [VALGRIND]
 * Set UNSTEAL_REGENERATE=1 to rewrite the expected files (then review them).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "fixture.h"

static const gchar *unsteal_bin, *expected_dir, *fake_qemu, *valgrind_bin;

#define UNREACHABLE "qemu+unix:///system?socket=/nonexistent/unsteal-test-sock"
/* UUID of the domain "test" of libvirt's test:///default driver */
#define TEST_UUID "6695eb01-f6a4-8304-79aa-97f2502e193f"

typedef struct {
	gchar *root;
	gchar *a, *b;
} Fx;

static void
fx_setup(Fx *f, gconstpointer data)
{
	(void)data;
	f->root = fx_tmpdir();
	f->a = g_build_filename(f->root, "s0", NULL);
	f->b = g_build_filename(f->root, "s1", NULL);
}

static void
fx_teardown(Fx *f, gconstpointer data)
{
	(void)data;
	g_free(f->a);
	g_free(f->b);
	fx_cleanup(f->root);
}

/* Run ARGV (NULL-terminated); returns the exit status. */
static gint
run(const gchar *const *argv, gchar **out, gchar **err)
{
	GError *e = NULL;
	gint status = -1;

	g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
		     out, err, &status, &e);
	g_assert_no_error(e);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

static void
expect_file(const gchar *name, const gchar *got)
{
	gchar *p = g_build_filename(expected_dir, name, NULL);
	gchar *want = NULL;
	GError *e = NULL;

	if (g_strcmp0(g_getenv("UNSTEAL_REGENERATE"), "1") == 0) {
		g_file_set_contents(p, got, -1, &e);
		g_assert_no_error(e);
	}
	g_file_get_contents(p, &want, NULL, &e);
	g_assert_no_error(e);
	g_assert_cmpstr(got, ==, want);
	g_free(want);
	g_free(p);
}

/* FMT: "--json", "--prometheus" (report) or "top" (top --vcpus). */
static void
check_report_uri(Fx *f, FxLayout l, const gchar *fmt, const gchar *uri,
		 const gchar *expected)
{
	gboolean top = strcmp(fmt, "top") == 0;
	const gchar *argv[] = { unsteal_bin, top ? "top" : "report", "--root", f->a,
				"--root", f->b, top ? "--vcpus" : fmt,
				top ? "--vcpus" : "--no-timestamp",
				uri ? "--connect" : NULL, uri, NULL };
	gchar *out = NULL, *err = NULL;

	fx_build(f->a, l, 0);
	fx_build(f->b, l, 1);
	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	if (!uri)
		g_assert_cmpstr(err, ==, "");
	expect_file(expected, out);
	g_free(out);
	g_free(err);
}

static void
check_report(Fx *f, FxLayout l, const gchar *fmt, const gchar *expected)
{
	check_report_uri(f, l, fmt, NULL, expected);
}

static void
test_json_v1(Fx *f, gconstpointer d)
{
	(void)d;
	check_report(f, FX_V1, "--json", "report-v1.json");
}

static void
test_json_v2(Fx *f, gconstpointer d)
{
	(void)d;
	check_report(f, FX_V2, "--json", "report-v2.json");
}

static void
test_prometheus_v2(Fx *f, gconstpointer d)
{
	(void)d;
	check_report(f, FX_V2, "--prometheus", "report-v2.prom");
}

static void
make_racy(Fx *f)
{
	fx_build(f->a, FX_V1_COMOUNT, 0);
	fx_build(f->b, FX_V1_COMOUNT, 1);
	fx_remove(f->b, "proc/100/task/102");
	fx_remove(f->b, "proc/200/task/201/schedstat");
	fx_remove(f->b, "sys/fs/cgroup/cpu,cpuacct/machine/vcpus.partition/cpu.stat");
	fx_write(f->b, "proc/100/cmdline", "q\0-name\0guest=a\"b\\c,,d\0", 24);
}

static void
test_json_racy(Fx *f, gconstpointer d)
{
	const gchar *argv[] = { unsteal_bin, "report", "--root", f->a, "--root",
				f->b, "--no-timestamp", NULL };
	gchar *out = NULL, *err = NULL;

	(void)d;
	make_racy(f);
	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	g_assert_cmpstr(err, ==, "");
	expect_file("report-racy.json", out);
	g_free(out);
	g_free(err);
}

static void
test_prometheus_racy(Fx *f, gconstpointer d)
{
	const gchar *argv[] = { unsteal_bin, "report", "--prometheus", "--root",
				f->a, "--root", f->b, NULL };
	gchar *out = NULL, *err = NULL;

	(void)d;
	make_racy(f);
	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	/* skipped items go to stderr */
	g_assert_nonnull(strstr(err, "unsteal: skipped: domain alpha vCPU 1 (tid 102): gone in second sample\n"));
	g_assert_nonnull(strstr(out, "unsteal_skipped 3\n"));
	g_assert_nonnull(strstr(out, "unsteal_domain_vcpus{domain=\"a\\\"b\\\\c,d\"} 1\n"));
	g_free(out);
	g_free(err);
}

#ifdef HAVE_LIBVIRT
/* The fixture's "alpha" carries the UUID of test:///default's "test". */
static void
test_json_libvirt(Fx *f, gconstpointer d)
{
	(void)d;
	check_report_uri(f, FX_V1, "--json", "test:///default", "report-libvirt.json");
}

static void
test_prometheus_libvirt(Fx *f, gconstpointer d)
{
	(void)d;
	check_report_uri(f, FX_V1, "--prometheus", "test:///default",
			 "report-libvirt.prom");
}

static void
test_top_libvirt(Fx *f, gconstpointer d)
{
	(void)d;
	check_report_uri(f, FX_V1, "top", "test:///default", "top-libvirt.txt");
}
#endif

static void
test_top(Fx *f, gconstpointer d)
{
	const gchar *argv[] = { unsteal_bin, "top", "--vcpus", "--root", f->a,
				"--root", f->b, NULL };
	gchar *out = NULL, *err = NULL;

	(void)d;
	fx_build(f->a, FX_V1, 0);
	fx_build(f->b, FX_V1, 1);
	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	expect_file("top-v1.txt", out);
	g_free(out);
	g_free(err);
}

static void
test_output_file(Fx *f, gconstpointer d)
{
	gchar *dest = g_build_filename(f->root, "unsteal.prom", NULL);
	const gchar *argv[] = { unsteal_bin, "report", "--prometheus", "--output",
				dest, "--root", f->a, "--root", f->b, NULL };
	gchar *out = NULL, *err = NULL, *file = NULL;

	(void)d;
	fx_build(f->a, FX_V2, 0);
	fx_build(f->b, FX_V2, 1);
	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	g_assert_cmpstr(out, ==, "");
	g_assert_true(g_file_get_contents(dest, &file, NULL, NULL));
	expect_file("report-v2.prom", file);
	g_free(file);
	g_free(out);
	g_free(err);
	g_free(dest);
}

static void
expect_usage_error(const gchar *const *argv, const gchar *msg)
{
	gchar *out = NULL, *err = NULL;

	g_assert_cmpint(run(argv, &out, &err), ==, 2);
	g_assert_nonnull(strstr(err, msg));
	g_free(out);
	g_free(err);
}

static void
test_usage(Fx *f, gconstpointer d)
{
	const gchar *a1[] = { unsteal_bin, NULL };
	const gchar *a2[] = { unsteal_bin, "frobnicate", NULL };
	const gchar *a3[] = { unsteal_bin, "report", "--json", "--prometheus", NULL };
	const gchar *a4[] = { unsteal_bin, "report", "--interval", "0", NULL };
	const gchar *a5[] = { unsteal_bin, "report", "--count", "3", "--root", f->a,
			      "--root", f->b, NULL };
	const gchar *a6[] = { unsteal_bin, "top", "--connect", "", NULL };
	const gchar *a7[] = { unsteal_bin, "report", "--bogus", NULL };
	const gchar *a8[] = { unsteal_bin, "top", "--busy-threshold", "-5", NULL };
	const gchar *v[] = { unsteal_bin, "--version", NULL };
	gchar *out = NULL;

	(void)d;
	expect_usage_error(a1, "Usage: unsteal top");
	expect_usage_error(a2, "unknown command 'frobnicate'");
	expect_usage_error(a3, "exclusive");
	expect_usage_error(a4, "--interval must be > 0");
	expect_usage_error(a5, "--count 3 needs 4 --root trees");
#ifdef HAVE_LIBVIRT
	expect_usage_error(a6, "--connect needs a URI");
#else
	expect_usage_error(a6, "no libvirt support");
#endif
	expect_usage_error(a7, "Unknown option --bogus");
	expect_usage_error(a8, "--busy-threshold");
	g_assert_cmpint(run(v, &out, NULL), ==, 0);
	g_assert_true(g_str_has_prefix(out, "unsteal "));
	g_free(out);
}

/* Same tree twice: a zero-length interval is reported, not divided by. */
static void
test_zero_interval(Fx *f, gconstpointer d)
{
	const gchar *argv[] = { unsteal_bin, "report", "--root", f->a, "--root",
				f->a, NULL };
	gchar *out = NULL, *err = NULL;

	(void)d;
	fx_build(f->a, FX_V1, 0);
	g_assert_cmpint(run(argv, &out, &err), ==, 1);
	g_assert_cmpstr(out, ==, "");
	g_assert_nonnull(strstr(err, "non-positive sampling interval"));
	g_free(out);
	g_free(err);
}

static void
test_valgrind(Fx *f, gconstpointer d)
{
	const gchar *modes[][4] = {
		{ "report", "--json", NULL, NULL },
		{ "report", "--prometheus", NULL, NULL },
		{ "top", "--vcpus", NULL, NULL },
#ifdef HAVE_LIBVIRT
		/* libvirt mode without a daemon: the test driver (domains, XML,
		 * stats, matching) and a connection that fails every interval */
		{ "top", "--vcpus", "--connect", "test:///default" },
		{ "report", "--json", "--connect", UNREACHABLE },
#endif
	};

	(void)d;
	if (!valgrind_bin) {
		g_test_skip("valgrind not found");
		return;
	}
	make_racy(f);
	/* a third sample with the domain gone entirely */
	{
		gchar *c = g_build_filename(f->root, "s2", NULL);

		fx_build(c, FX_V2, 1);
		fx_write(c, "proc/uptime", "104.00 1.00\n", -1);
		fx_remove(c, "proc/200");
		GPid pids[G_N_ELEMENTS(modes)];
		gint errfd[G_N_ELEMENTS(modes)];

		/* run them concurrently: valgrind's start-up dominates */
		for (guint i = 0; i < G_N_ELEMENTS(modes); i++) {
			const gchar *argv[] = { valgrind_bin, "-q", "--error-exitcode=1",
						"--leak-check=full", "--errors-for-leak-kinds=definite,possible",
						unsteal_bin, modes[i][0], modes[i][1],
						"--root", f->a, "--root", f->b, "--root", c,
						modes[i][2], modes[i][3], NULL };
			GError *e = NULL;

			g_spawn_async_with_pipes(NULL, (gchar **)argv, NULL,
						 G_SPAWN_DO_NOT_REAP_CHILD |
						 G_SPAWN_STDOUT_TO_DEV_NULL,
						 NULL, NULL, &pids[i], NULL, NULL,
						 &errfd[i], &e);
			g_assert_no_error(e);
		}
		for (guint i = 0; i < G_N_ELEMENTS(modes); i++) {
			GString *err = g_string_new(NULL);
			gchar buf[4096];
			gssize n;
			gint st = -1;

			while ((n = read(errfd[i], buf, sizeof(buf))) > 0)
				g_string_append_len(err, buf, n);
			close(errfd[i]);
			g_assert_cmpint(waitpid(pids[i], &st, 0), ==, pids[i]);
			g_spawn_close_pid(pids[i]);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				g_printerr("valgrind unsteal %s %s:\n%s", modes[i][0],
					   modes[i][1], err->str);
			g_assert_true(WIFEXITED(st));
			g_assert_cmpint(WEXITSTATUS(st), ==, 0);
			g_string_free(err, TRUE);
		}
		g_free(c);
	}
}

/* Live /proc: a fake QEMU process with two busy vCPU threads. */
static void
test_live(void)
{
	const gchar *fargv[] = { fake_qemu, "qemu-system-x86_64", "-name",
				 "guest=unsteal-fake,debug-threads=on", NULL };
	const gchar *argv[] = { unsteal_bin, "report", "--interval", "0.3",
				"--count", "1", "--json", NULL };
	GError *e = NULL;
	GPid pid;
	gint in_fd, out_fd;
	gchar buf[16] = "";
	gchar *out = NULL, *err = NULL;
	GRegex *re;
	GMatchInfo *m = NULL;

	g_spawn_async_with_pipes(NULL, (gchar **)fargv, NULL,
				 G_SPAWN_FILE_AND_ARGV_ZERO | G_SPAWN_DO_NOT_REAP_CHILD,
				 NULL, NULL, &pid, &in_fd, &out_fd, NULL, &e);
	g_assert_no_error(e);
	g_assert_cmpint(read(out_fd, buf, 6), ==, 6);
	g_assert_cmpstr(buf, ==, "ready\n");

	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	close(in_fd);     /* lets the fake QEMU exit */
	close(out_fd);
	waitpid(pid, NULL, 0);
	g_spawn_close_pid(pid);

	re = g_regex_new("\"name\":\"unsteal-fake\",\"pid\":[0-9]+,\"vcpus\":2,"
			 "\"util_pct\":([0-9.]+),", 0, 0, NULL);
	if (!g_regex_match(re, out, 0, &m))
		g_printerr("output: %s\nstderr: %s\n", out, err);
	g_assert_true(g_match_info_matches(m));
	{
		gchar *u = g_match_info_fetch(m, 1);

		/* each thread spins about half the time when it gets a CPU;
		 * other load on a shared 2-CPU host can leave it only a few
		 * per cent, so only check that its run time was measured */
		g_assert_cmpfloat(g_ascii_strtod(u, NULL), >, 1.0);
		g_free(u);
	}
	g_assert_nonnull(strstr(out, "\"id\":0,"));
	g_assert_nonnull(strstr(out, "\"id\":1,"));
	g_match_info_free(m);
	g_regex_unref(re);
	g_free(out);
	g_free(err);
}

#ifdef HAVE_LIBVIRT

/* No daemon: every interval says what it skipped, and the run goes on. */
static void
test_libvirt_unreachable(void)
{
	const gchar *argv[] = { unsteal_bin, "report", "--json", "--no-timestamp",
				"--interval", "0.1", "--count", "3",
				"--connect", UNREACHABLE, NULL };
	gchar *out = NULL, *err = NULL;
	gchar **lines;

	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	lines = g_strsplit(g_strchomp(out), "\n", -1);
	g_assert_cmpuint(g_strv_length(lines), ==, 3);
	for (guint i = 0; lines[i]; i++) {
		g_assert_nonnull(strstr(lines[i], "\"libvirt\":\"disconnected\""));
		g_assert_nonnull(strstr(lines[i], "libvirt: cannot connect to " UNREACHABLE));
		g_assert_nonnull(strstr(lines[i], "scanning /proc for QEMU processes"));
	}
	g_strfreev(lines);
	g_free(out);
	g_free(err);
}

static GPid
start_fake(const gchar *name, const gchar *uuid, gint *in_fd)
{
	gchar *opt = g_strdup_printf("guest=%s,debug-threads=on", name);
	const gchar *fargv[] = { fake_qemu, "qemu-system-x86_64", "-name", opt,
				 "-uuid", uuid, NULL };
	GError *e = NULL;
	GPid pid;
	gint out_fd;
	gchar buf[8] = "";

	g_spawn_async_with_pipes(NULL, (gchar **)fargv, NULL,
				 G_SPAWN_FILE_AND_ARGV_ZERO | G_SPAWN_DO_NOT_REAP_CHILD,
				 NULL, NULL, &pid, in_fd, &out_fd, NULL, &e);
	g_assert_no_error(e);
	g_assert_cmpint(read(out_fd, buf, 6), ==, 6);
	g_assert_cmpstr(buf, ==, "ready\n");
	close(out_fd);
	g_free(opt);
	return pid;
}

static void
stop_fake(GPid pid, gint in_fd)
{
	close(in_fd);
	waitpid(pid, NULL, 0);
	g_spawn_close_pid(pid);
}

/* libvirt's test driver knows a running domain "test": a fake QEMU process
 * carrying its UUID (in upper case, without dashes: QEMU accepts both) is
 * found under libvirt's name, with its tunables; one with another UUID is
 * not this daemon's and is left out. */
static void
test_libvirt_test_driver(void)
{
	const gchar *argv[] = { unsteal_bin, "report", "--json", "--no-timestamp",
				"--interval", "0.3", "--count", "1",
				"--connect", "test:///default", NULL };
	const gchar *pargv[] = { unsteal_bin, "report", "--prometheus",
				 "--interval", "0.3", "--count", "1",
				 "--connect", "test:///default", NULL };
	gint in1, in2;
	GPid p1 = start_fake("renamed-by-libvirt", "6695EB01F6A4830479AA97F2502E193F", &in1);
	GPid p2 = start_fake("not-libvirts", "00000000-0000-0000-0000-000000000001", &in2);
	gchar *out = NULL, *err = NULL, *pout = NULL;
	gchar *want;

	g_assert_cmpint(run(argv, &out, &err), ==, 0);
	g_assert_cmpint(run(pargv, &pout, NULL), ==, 0);
	stop_fake(p1, in1);
	stop_fake(p2, in2);

	if (!strstr(out, "\"name\":\"test\""))
		g_printerr("output: %s\nstderr: %s\n", out, err);
	g_assert_nonnull(strstr(out, "\"libvirt\":\"connected\""));
	want = g_strdup_printf("\"name\":\"test\",\"pid\":%d,\"vcpus\":2,", p1);
	g_assert_nonnull(strstr(out, want));
	g_free(want);
	g_assert_null(strstr(out, "renamed-by-libvirt"));
	g_assert_null(strstr(out, "not-libvirts"));
	g_assert_nonnull(strstr(out, "\"libvirt\":{\"id\":1,\"uuid\":\"" TEST_UUID
				"\",\"tunables\":\"default\",\"cputune\":\"\","
				"\"expected_placement\":\"shared\","));
	g_assert_nonnull(strstr(pout, "unsteal_libvirt_connected 1\n"));
	g_assert_nonnull(strstr(pout, "unsteal_domain_tunables_default{domain=\"test\"} 1\n"));
	g_free(out);
	g_free(err);
	g_free(pout);
}
#endif

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	if (argc < 4) {
		g_printerr("usage: %s UNSTEAL EXPECTED_DIR FAKE_QEMU [VALGRIND]\n", argv[0]);
		return 2;
	}
	unsteal_bin = argv[1];
	expected_dir = argv[2];
	fake_qemu = argv[3];
	valgrind_bin = argc > 4 && argv[4][0] ? argv[4] : NULL;
#define ADD(name, fn) g_test_add(name, Fx, NULL, fx_setup, fn, fx_teardown)
	ADD("/cli/json/v1", test_json_v1);
	ADD("/cli/json/v2", test_json_v2);
	ADD("/cli/json/racy", test_json_racy);
	ADD("/cli/prometheus/v2", test_prometheus_v2);
	ADD("/cli/prometheus/racy", test_prometheus_racy);
	ADD("/cli/prometheus/output-file", test_output_file);
	ADD("/cli/top", test_top);
#ifdef HAVE_LIBVIRT
	ADD("/cli/json/libvirt", test_json_libvirt);
	ADD("/cli/prometheus/libvirt", test_prometheus_libvirt);
	ADD("/cli/top/libvirt", test_top_libvirt);
#endif
	ADD("/cli/usage", test_usage);
	ADD("/cli/zero-interval", test_zero_interval);
	ADD("/cli/valgrind", test_valgrind);
	g_test_add_func("/cli/live", test_live);
#ifdef HAVE_LIBVIRT
	g_test_add_func("/cli/libvirt/unreachable", test_libvirt_unreachable);
	g_test_add_func("/cli/libvirt/test-driver", test_libvirt_test_driver);
#endif
	return g_test_run();
}
