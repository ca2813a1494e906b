/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unsteal exporter end to end on the live system: it serves /metrics on a
 * free port of 127.0.0.1 with the counters of a fake QEMU process's vCPU
 * threads, increasing from one scrape to the next; answers 404 elsewhere
 * and 405 to other methods; keeps serving after the process exits; stops
 * on SIGTERM; and refuses bad and busy addresses with a clear message.
 *
 * Usage: test-exporter UNSTEAL FAKE_QEMU
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>

#include "config.h"

static const gchar *unsteal_bin, *fake_qemu;

#define DOMAIN "unsteal-exporter-test"

/* Run ARGV; returns the exit status, *ERR its standard error. */
static gint
run(const gchar *const *argv, gchar **err)
{
	GError *e = NULL;
	gint status = -1;

	g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
		     NULL, NULL, err, &status, &e);
	g_assert_no_error(e);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void
expect_refused(const gchar *listen, gint code, const gchar *msg)
{
	const gchar *argv[] = { unsteal_bin, "exporter", "--listen", listen, NULL };
	gchar *err = NULL;

	g_assert_cmpint(run(argv, &err), ==, code);
	if (!strstr(err, msg))
		g_printerr("stderr: %s\n", err);
	g_assert_nonnull(strstr(err, msg));
	g_free(err);
}

#ifdef HAVE_EXPORTER

static void
test_bad_address(void)
{
	const gchar *none[] = { unsteal_bin, "exporter", NULL };
	gchar *err = NULL;

	expect_refused("nonsense", 2, "--listen 'nonsense': expected ADDR:PORT");
	expect_refused("1.2.3.4:99999", 2, "--listen '1.2.3.4:99999': port 99999 is out of range");
	expect_refused("127.0.0.1:http", 2, "port 'http' is not a number");
	expect_refused("::1:80", 2, "IPv6 address in brackets");
	/* a well-formed address that is not this host's (unless the host
	 * lets anyone bind such addresses) */
	if (!g_file_get_contents("/proc/sys/net/ipv4/ip_nonlocal_bind", &err, NULL, NULL) ||
	    err[0] != '1')
		expect_refused("192.0.2.1:9", 1, "cannot listen on 192.0.2.1:9: ");
	g_clear_pointer(&err, g_free);
	g_assert_cmpint(run(none, &err), ==, 2);
	g_assert_nonnull(strstr(err, "exporter needs --listen ADDR:PORT"));
	g_free(err);
}

static void
test_busy_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	gint fd = socket(AF_INET, SOCK_STREAM, 0);
	gchar *spec, *msg;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	g_assert_cmpint(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), ==, 0);
	g_assert_cmpint(listen(fd, 1), ==, 0);
	g_assert_cmpint(getsockname(fd, (struct sockaddr *)&sin, &len), ==, 0);
	spec = g_strdup_printf("127.0.0.1:%u", ntohs(sin.sin_port));
	msg = g_strdup_printf("unsteal: exporter: cannot listen on %s: %s", spec,
			      g_strerror(EADDRINUSE));
	expect_refused(spec, 1, msg);
	close(fd);
	g_free(msg);
	g_free(spec);
}

/* One HTTP/1.0 exchange; returns the status code, *BODY the body. */
static gint
http(guint port, const gchar *method, const gchar *path, gchar **body)
{
	GSocketClient *client = g_socket_client_new();
	GSocketConnection *conn;
	GError *e = NULL;
	GString *resp = g_string_new(NULL);
	gchar *req, buf[8192];
	gssize n;
	gint code = -1;
	const gchar *sep;

	conn = g_socket_client_connect_to_host(client, "127.0.0.1", (guint16)port, NULL, &e);
	g_assert_no_error(e);
	req = g_strdup_printf("%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", method, path);
	g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)),
				  req, strlen(req), NULL, NULL, &e);
	g_assert_no_error(e);
	while ((n = g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)),
					buf, sizeof(buf), NULL, &e)) > 0)
		g_string_append_len(resp, buf, n);
	g_assert_no_error(e);
	if (g_str_has_prefix(resp->str, "HTTP/1."))
		code = atoi(resp->str + 9);
	sep = strstr(resp->str, "\r\n\r\n");
	if (body)
		*body = g_strdup(sep ? sep + 4 : "");
	g_string_free(resp, TRUE);
	g_free(req);
	g_object_unref(conn);
	g_object_unref(client);
	return code;
}

/* Series -> value of a Prometheus text. */
static GHashTable *
parse(const gchar *text)
{
	GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	gchar **lines = g_strsplit(text, "\n", -1);

	for (guint i = 0; lines[i]; i++) {
		gchar *sp = strrchr(lines[i], ' ');
		gdouble *v;

		if (lines[i][0] == '#' || !sp)
			continue;
		v = g_new(gdouble, 1);
		*v = g_ascii_strtod(sp + 1, NULL);
		g_hash_table_insert(h, g_strndup(lines[i], (gsize)(sp - lines[i])), v);
	}
	g_strfreev(lines);
	return h;
}

static gdouble
value(GHashTable *h, const gchar *series)
{
	const gdouble *v = g_hash_table_lookup(h, series);

	if (!v)
		g_printerr("missing: %s\n", series);
	g_assert_nonnull(v);
	return *v;
}

static const gchar *const counters[] = {
	"unsteal_vcpu_run_seconds_total", "unsteal_vcpu_wait_seconds_total",
	"unsteal_vcpu_idle_wait_seconds_total", "unsteal_vcpu_busy_wait_seconds_total",
};

/* Scrape until /metrics has the fake domain's vCPU 1 (the first answers
 * are 503 until the first interval is over). */
static GHashTable *
scrape_with_domain(guint port)
{
	for (gint i = 0; i < 100; i++) {
		gchar *body = NULL;
		gint code = http(port, "GET", "/metrics", &body);

		g_assert_true(code == 200 || code == 503);
		if (code == 200 && strstr(body, "unsteal_vcpu_idle_wait_seconds_total{domain=\""
					  DOMAIN "\",vcpu=\"1\"}")) {
			GHashTable *h = parse(body);

			g_free(body);
			return h;
		}
		g_free(body);
		g_usleep(100 * 1000);
	}
	g_assert_not_reached();
	return NULL;
}

static void
test_metrics(void)
{
	const gchar *fargv[] = { fake_qemu, "qemu-system-x86_64", "-name",
				 "guest=" DOMAIN ",debug-threads=on", NULL };
	const gchar *argv[] = { unsteal_bin, "exporter", "--listen", "127.0.0.1:0",
				"--interval", "0.2", NULL };
	GError *e = NULL;
	GPid fpid, pid;
	gint fin, fout, errfd, st = -1;
	gchar buf[512] = "", *p, *body = NULL;
	gssize n, got = 0;
	guint port;
	GHashTable *h1, *h2;

	g_spawn_async_with_pipes(NULL, (gchar **)fargv, NULL,
				 G_SPAWN_FILE_AND_ARGV_ZERO | G_SPAWN_DO_NOT_REAP_CHILD,
				 NULL, NULL, &fpid, &fin, &fout, NULL, &e);
	g_assert_no_error(e);
	g_assert_cmpint(read(fout, buf, 6), ==, 6);
	g_assert_cmpstr(buf, ==, "ready\n");
	close(fout);

	g_spawn_async_with_pipes(NULL, (gchar **)argv, NULL,
				 G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
				 NULL, NULL, &pid, NULL, NULL, &errfd, &e);
	g_assert_no_error(e);
	/* "unsteal: exporter: serving /metrics on 127.0.0.1:PORT, ..." (after
	 * a note about not being root, perhaps) */
	memset(buf, 0, sizeof(buf));
	while (!(p = strstr(buf, "serving /metrics on 127.0.0.1:")) || !strchr(p, ',')) {
		n = read(errfd, buf + got, sizeof(buf) - 1 - (gsize)got);
		g_assert_cmpint(n, >, 0);
		got += n;
	}
	port = (guint)atoi(p + strlen("serving /metrics on 127.0.0.1:"));
	g_assert_cmpuint(port, >, 0);

	h1 = scrape_with_domain(port);
	g_usleep(700 * 1000);   /* a few more intervals */
	h2 = scrape_with_domain(port);
	for (guint i = 0; i < G_N_ELEMENTS(counters); i++) {
		for (gint v = 0; v < 2; v++) {
			gchar *s = g_strdup_printf("%s{domain=\"" DOMAIN "\",vcpu=\"%d\"}",
						   counters[i], v);
			gdouble a = value(h1, s), b = value(h2, s);

			if (b < a)
				g_printerr("%s went from %f to %f\n", s, a, b);
			g_assert_cmpfloat(b, >=, a);
			g_free(s);
		}
	}
	/* the threads ran in between */
	g_assert_cmpfloat(value(h2, "unsteal_vcpu_run_seconds_total{domain=\"" DOMAIN "\",vcpu=\"0\"}"),
			  >, value(h1, "unsteal_vcpu_run_seconds_total{domain=\"" DOMAIN "\",vcpu=\"0\"}"));
	g_assert_cmpfloat(value(h2, "unsteal_host_idle_seconds_total"), >=,
			  value(h1, "unsteal_host_idle_seconds_total"));
	g_assert_cmpfloat(value(h2, "unsteal_host_cpus"), >=, 1);
	g_hash_table_unref(h1);
	g_hash_table_unref(h2);

	g_assert_cmpint(http(port, "GET", "/", NULL), ==, 404);
	g_assert_cmpint(http(port, "GET", "/metricsx", NULL), ==, 404);
	g_assert_cmpint(http(port, "GET", "/metrics/", NULL), ==, 404);
	g_assert_cmpint(http(port, "POST", "/metrics", NULL), ==, 405);
	g_assert_cmpint(http(port, "HEAD", "/metrics", NULL), ==, 200);

	/* the domain goes away: the exporter serves on, without it */
	close(fin);
	waitpid(fpid, NULL, 0);
	g_spawn_close_pid(fpid);
	for (gint i = 0; i < 50; i++) {
		g_free(body);
		body = NULL;
		g_assert_cmpint(http(port, "GET", "/metrics?x=1", &body), ==, 200);
		if (!strstr(body, DOMAIN))
			break;
		g_usleep(100 * 1000);
	}
	g_assert_null(strstr(body, DOMAIN));
	g_assert_nonnull(strstr(body, "# TYPE unsteal_vcpu_idle_wait_seconds_total counter\n"));
	g_free(body);

	kill(pid, SIGTERM);
	g_assert_cmpint(waitpid(pid, &st, 0), ==, pid);
	g_spawn_close_pid(pid);
	close(errfd);
	g_assert_true(WIFEXITED(st));
	g_assert_cmpint(WEXITSTATUS(st), ==, 0);
}

#else

static void
test_not_built(void)
{
	expect_refused("127.0.0.1:0", 2, "built without libmicrohttpd-dev");
}

#endif

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	if (argc < 3) {
		g_printerr("usage: %s UNSTEAL FAKE_QEMU\n", argv[0]);
		return 2;
	}
	unsteal_bin = argv[1];
	fake_qemu = argv[2];
#ifdef HAVE_EXPORTER
	g_test_add_func("/exporter/bad-address", test_bad_address);
	g_test_add_func("/exporter/busy-port", test_busy_port);
	g_test_add_func("/exporter/metrics", test_metrics);
#else
	g_test_add_func("/exporter/not-built", test_not_built);
#endif
	return g_test_run();
}
