/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: host-side vCPU steal analyser (command line). */
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "config.h"
#ifdef HAVE_EXPORTER
# include "exporter.h"
#endif
#include "listen.h"
#ifdef HAVE_LIBVIRT
# include "libvirt.h"
#endif
#include "model.h"
#include "output.h"
#include "proc.h"
#include "totals.h"

static volatile sig_atomic_t stop_requested;

static void
on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void
sleep_interval(gdouble seconds)
{
	struct timespec ts;

	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (gdouble)ts.tv_sec) * 1e9);
	while (!stop_requested && nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

typedef enum { MODE_TOP, MODE_REPORT, MODE_EXPORTER } Mode;
typedef enum { FMT_JSON, FMT_PROM } Format;

typedef struct {
	Mode mode;
	gchar **roots;
	gdouble interval;
	gint count;
	gdouble threshold;
	gboolean vcpus;
	gboolean json, prometheus, no_timestamp;
	gchar *output;
	gchar *connect;
	gchar *listen;
} Args;

static const char usage_text[] =
	"Usage: unsteal top    [--interval S] [--count N] [--vcpus] [options]\n"
	"       unsteal report [--interval S] [--count N] [--json | --prometheus] [options]\n"
	"       unsteal exporter --listen ADDR:PORT [--interval S] [options]\n"
	"       unsteal --version\n"
	"Run 'unsteal COMMAND --help' for the options of a command.\n";

static gboolean
parse_args(int argc, char **argv, Args *a, gint *status)
{
	GOptionContext *ctx;
	GError *err = NULL;
	gboolean ok;
	GOptionEntry common[] = {
		{ "interval", 'i', 0, G_OPTION_ARG_DOUBLE, &a->interval,
		  "Seconds between samples (default 2)", "S" },
		{ "count", 'n', 0, G_OPTION_ARG_INT, &a->count,
		  "Number of intervals to print (default: until interrupted)", "N" },
		{ "busy-threshold", 'b', 0, G_OPTION_ARG_DOUBLE, &a->threshold,
		  "Classify a domain busy when utilisation+steal >= PCT % of its vCPUs (default 90)", "PCT" },
		{ "root", 'r', 0, G_OPTION_ARG_FILENAME_ARRAY, &a->roots,
		  "Read DIR/proc and DIR/sys/fs/cgroup instead of the live system; "
		  "repeat to replay one tree per sample", "DIR" },
		{ "connect", 'c', 0, G_OPTION_ARG_STRING, &a->connect,
		  "Take domains from libvirt at URI (read-only); falls back to "
		  "scanning /proc while it is unreachable", "URI" },
		{ NULL, 0, 0, 0, NULL, NULL, NULL }
	};
	GOptionEntry top[] = {
		{ "vcpus", 'V', 0, G_OPTION_ARG_NONE, &a->vcpus,
		  "Show one row per vCPU under each domain", NULL },
		{ NULL, 0, 0, 0, NULL, NULL, NULL }
	};
	GOptionEntry report[] = {
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &a->json,
		  "JSON lines, one object per sample (default)", NULL },
		{ "prometheus", 'p', 0, G_OPTION_ARG_NONE, &a->prometheus,
		  "Prometheus text exposition format", NULL },
		{ "no-timestamp", 0, 0, G_OPTION_ARG_NONE, &a->no_timestamp,
		  "Leave the wall-clock timestamp out of JSON (reproducible output)", NULL },
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &a->output,
		  "Replace FILE atomically with each sample instead of writing to stdout", "FILE" },
		{ NULL, 0, 0, 0, NULL, NULL, NULL }
	};
	GOptionEntry exporter[] = {
		{ "listen", 'l', 0, G_OPTION_ARG_STRING, &a->listen,
		  "Serve GET /metrics on ADDR:PORT (IPv4 address or host name, "
		  "[IPv6] address, or nothing for every address; port 0 = any "
		  "free one)", "ADDR:PORT" },
		{ NULL, 0, 0, 0, NULL, NULL, NULL }
	};
	static const gchar *const contexts[] = {
		[MODE_TOP] = "- per-domain steal table",
		[MODE_REPORT] = "- steal samples for scripts",
		[MODE_EXPORTER] = "- Prometheus exporter: serve /metrics over HTTP",
	};

	memset(a, 0, sizeof(*a));
	a->interval = 2.0;
	a->count = -1;
	a->threshold = US_DEFAULT_BUSY_THRESHOLD;
	*status = 2;

	if (argc < 2) {
		fputs(usage_text, stderr);
		return FALSE;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-v") == 0) {
		printf("unsteal %s\n", US_VERSION);
		*status = 0;
		return FALSE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(usage_text, stdout);
		*status = 0;
		return FALSE;
	}
	if (strcmp(argv[1], "top") == 0) {
		a->mode = MODE_TOP;
	} else if (strcmp(argv[1], "report") == 0) {
		a->mode = MODE_REPORT;
	} else if (strcmp(argv[1], "exporter") == 0) {
		a->mode = MODE_EXPORTER;
#ifndef HAVE_EXPORTER
		fprintf(stderr, "unsteal: exporter: this build has no HTTP server "
			"(built without libmicrohttpd-dev); rebuild with it, or use "
			"'unsteal report --prometheus --output FILE' for a textfile "
			"collector\n");
		return FALSE;
#endif
	} else {
		fprintf(stderr, "unsteal: unknown command '%s'\n%s", argv[1], usage_text);
		return FALSE;
	}

	ctx = g_option_context_new(contexts[a->mode]);
	g_option_context_set_summary(ctx,
		"Measures vCPU utilisation and steal from /proc schedstat and splits\n"
		"steal into busy steal and idle steal (see unsteal(8)).");
	g_option_context_add_main_entries(ctx, common, NULL);
	g_option_context_add_main_entries(ctx, a->mode == MODE_TOP ? top :
					  a->mode == MODE_REPORT ? report : exporter, NULL);
	argv[1] = argv[0];
	argc--;
	argv++;
	ok = g_option_context_parse(ctx, &argc, &argv, &err);
	g_option_context_free(ctx);
	if (!ok) {
		fprintf(stderr, "unsteal: %s\n", err->message);
		g_error_free(err);
		return FALSE;
	}
	if (argc > 1) {
		fprintf(stderr, "unsteal: unexpected argument '%s'\n", argv[1]);
		return FALSE;
	}
	if (!(a->interval > 0) || a->interval > 86400) {
		fprintf(stderr, "unsteal: --interval must be > 0 and <= 86400 seconds\n");
		return FALSE;
	}
	if (a->count == 0 || a->count < -1) {
		fprintf(stderr, "unsteal: --count must be at least 1\n");
		return FALSE;
	}
	if (!(a->threshold > 0) || a->threshold > 200) {
		fprintf(stderr, "unsteal: --busy-threshold must be in (0, 200]\n");
		return FALSE;
	}
	if (a->json && a->prometheus) {
		fprintf(stderr, "unsteal: --json and --prometheus are exclusive\n");
		return FALSE;
	}
	if (a->mode == MODE_EXPORTER && !a->listen) {
		fprintf(stderr, "unsteal: exporter needs --listen ADDR:PORT\n");
		return FALSE;
	}
	if (a->mode == MODE_EXPORTER) {
		gchar *host = NULL, *msg = NULL;
		guint port;

		if (!us_listen_parse(a->listen, &host, &port, &msg)) {
			fprintf(stderr, "unsteal: exporter: %s\n", msg);
			g_free(msg);
			return FALSE;
		}
		g_free(host);
	}
	if (a->mode == MODE_EXPORTER && a->roots && g_strv_length(a->roots) > 1) {
		fprintf(stderr, "unsteal: exporter samples one tree again and again: "
			"give --root once\n");
		return FALSE;
	}
#ifndef HAVE_LIBVIRT
	if (a->connect) {
		fprintf(stderr, "unsteal: --connect: this build has no libvirt support "
			"(built without libvirt-dev); leave it out to scan /proc "
			"for QEMU processes\n");
		return FALSE;
	}
#endif
	if (a->connect && a->connect[0] == '\0') {
		fprintf(stderr, "unsteal: --connect needs a URI\n");
		return FALSE;
	}
	if (a->roots && g_strv_length(a->roots) > 1) {
		gint replay = (gint)g_strv_length(a->roots) - 1;

		if (a->count == -1)
			a->count = replay;
		if (a->count > replay) {
			fprintf(stderr, "unsteal: --count %d needs %d --root trees\n",
				a->count, a->count + 1);
			return FALSE;
		}
	}
	*status = 0;
	return TRUE;
}

#ifdef HAVE_EXPORTER
static UsExporter *exporter;
#endif

static void
emit(const Args *a, const UsResult *r, const UsOutputOptions *oo, gboolean first)
{
	GString *out = g_string_new(NULL);

#ifdef HAVE_EXPORTER
	if (a->mode == MODE_EXPORTER) {
		/* what was skipped is in unsteal_skipped, not in the log */
		us_output_prometheus(out, r, oo);
		us_exporter_publish(exporter, out->str, out->len);
		g_string_free(out, TRUE);
		return;
	}
#endif
	if (a->mode == MODE_TOP) {
		if (isatty(STDOUT_FILENO))
			g_string_append(out, "\033[H\033[2J");
		else if (!first)
			g_string_append_c(out, '\n');
		us_output_table(out, r, oo);
	} else if (a->prometheus) {
		us_output_prometheus(out, r, oo);
		for (guint i = 0; i < r->skipped->len; i++)
			fprintf(stderr, "unsteal: skipped: %s\n",
				(const gchar *)g_ptr_array_index(r->skipped, i));
	} else {
		us_output_json(out, r, oo);
	}

	if (a->output) {
		GError *err = NULL;

		if (!g_file_set_contents(a->output, out->str, (gssize)out->len, &err)) {
			fprintf(stderr, "unsteal: %s\n", err->message);
			g_error_free(err);
		}
	} else {
		fwrite(out->str, 1, out->len, stdout);
		fflush(stdout);
	}
	g_string_free(out, TRUE);
}

#ifdef HAVE_LIBVIRT
static UsSnapshot *
take(UsSource *src, UsLibvirt *lv)
{
	UsSnapshot *snap = us_snapshot_take(src);

	if (lv)
		us_libvirt_apply(lv, snap);
	return snap;
}
#else
# define take(src, lv) us_snapshot_take(src)
#endif

int
main(int argc, char **argv)
{
	Args a;
	gint status = 0;
	guint nroots;
	UsSource **src;
	UsSnapshot *prev;
	UsModelOptions mo;
	UsOutputOptions oo;
	UsTotals *totals;
	struct sigaction sa;
#ifdef HAVE_LIBVIRT
	UsLibvirt *lv = NULL;
#endif

	setlocale(LC_ALL, "");
	setlocale(LC_NUMERIC, "C");
	if (!parse_args(argc, argv, &a, &status))
		goto out_args;
#ifdef HAVE_EXPORTER
	/* a bad or busy address fails before anything is sampled */
	if (a.mode == MODE_EXPORTER) {
		gchar *err = NULL, *bound = NULL;

		exporter = us_exporter_new(a.listen, &bound, &err);
		if (!exporter) {
			fprintf(stderr, "unsteal: exporter: %s\n", err);
			g_free(err);
			status = 1;
			goto out_args;
		}
		fprintf(stderr, "unsteal: exporter: serving /metrics on %s, "
			"sampling every %g s\n", bound, a.interval);
		g_free(bound);
	}
#endif

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* a libvirt daemon that goes away must not kill us with SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
#ifdef HAVE_LIBVIRT
	if (a.connect)
		lv = us_libvirt_new(a.connect);
#endif

	nroots = a.roots ? g_strv_length(a.roots) : 1;
	src = g_new0(UsSource *, nroots);
	for (guint i = 0; i < nroots; i++) {
		src[i] = us_source_new(a.roots ? a.roots[i] : NULL);
		/* one tree sampled repeatedly: real time; replay: its uptime */
		src[i]->use_uptime = nroots > 1;
	}
	if (!a.roots && geteuid() != 0)
		fprintf(stderr, "unsteal: note: not running as root; threads of "
			"other users' QEMU processes may be unreadable and are "
			"reported as skipped\n");

	mo.busy_threshold = a.threshold;
	oo.vcpus = a.vcpus;
	oo.timestamp = !a.no_timestamp;
	oo.busy_threshold = a.threshold;

	if (a.mode == MODE_TOP && isatty(STDOUT_FILENO) && nroots == 1)
		printf("unsteal: sampling for %.1f s...\n", a.interval);
	fflush(stdout);

	totals = us_totals_new();
	prev = take(src[0], lv);
	for (gint k = 1; a.count < 0 || k <= a.count; k++) {
		UsSnapshot *cur;
		UsResult *r;
		gchar *err = NULL;

		if (nroots == 1)
			sleep_interval(a.interval);
		if (stop_requested)
			break;
		cur = take(src[MIN((guint)k, nroots - 1)], lv);
		r = us_model_compute(prev, cur, &mo, &err);
		if (r) {
			us_totals_add(totals, r);
			emit(&a, r, &oo, k == 1);
			us_result_free(r);
		} else {
			fprintf(stderr, "unsteal: sample %d skipped: %s\n", k, err);
			g_free(err);
			status = 1;
		}
		us_snapshot_free(prev);
		prev = cur;
	}
	us_snapshot_free(prev);
	us_totals_free(totals);
	for (guint i = 0; i < nroots; i++)
		us_source_free(src[i]);
	g_free(src);
#ifdef HAVE_LIBVIRT
	us_libvirt_free(lv);
#endif
out_args:
#ifdef HAVE_EXPORTER
	us_exporter_free(exporter);
#endif
	g_strfreev(a.roots);
	g_free(a.listen);
	g_free(a.output);
	g_free(a.connect);
	return status;
}
