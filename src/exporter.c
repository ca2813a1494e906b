/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The HTTP side of unsteal exporter, on libmicrohttpd: its own thread
 * accepts scrapes and answers each with a copy of the text the sampling
 * loop (main.c) last published, so a scrape never waits for a sample.
 * Only GET and HEAD of /metrics are served; other paths are 404, other
 * methods 405.  Before the first sample is in, /metrics answers 503.
 */
#include "exporter.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "listen.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct _UsExporter {
	struct MHD_Daemon *daemon;
	GMutex lock;
	gchar *text;     /* NULL until the first sample */
	gsize len;
};

static void
http_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fputs("unsteal: http: ", stderr);
	vfprintf(stderr, fmt, ap);
}

static enum MHD_Result
reply(struct MHD_Connection *c, unsigned int status, const gchar *body,
      gsize len, gboolean metrics)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				metrics ? CONTENT_TYPE : "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *url,
       const char *method, const char *version, const char *upload_data,
       size_t *upload_data_size, void **con_cls)
{
	static const gchar not_found[] = "unsteal exporter: only /metrics is served\n";
	static const gchar not_allowed[] = "unsteal exporter: only GET and HEAD\n";
	static const gchar not_yet[] = "unsteal exporter: no sample yet, the first "
				       "one comes one --interval after the start\n";
	UsExporter *e = cls;
	enum MHD_Result ret;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1, FALSE);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
			     sizeof(not_allowed) - 1, FALSE);
	g_mutex_lock(&e->lock);
	if (e->text)
		ret = reply(c, MHD_HTTP_OK, e->text, e->len, TRUE);
	else
		ret = reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, not_yet,
			    sizeof(not_yet) - 1, FALSE);
	g_mutex_unlock(&e->lock);
	return ret;
}

UsExporter *
us_exporter_new(const gchar *spec, gchar **bound, gchar **err)
{
	UsExporter *e;
	sigset_t all, old;
	gint fd = us_listen_open(spec, bound, err);

	if (fd < 0)
		return NULL;
	e = g_new0(UsExporter, 1);
	g_mutex_init(&e->lock);
	/* the server's thread takes its signal mask from here: with every
	 * signal blocked there, SIGTERM interrupts the sampling loop's sleep.
	 * A few scrapers at a time; a stalled client is dropped after 10 s. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG,
				     0, NULL, NULL, answer, e,
				     MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL,
				     MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned int)16,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
				     MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!e->daemon) {
		*err = g_strdup_printf("cannot start the HTTP server on %s", spec);
		close(fd);
		if (bound)
			g_clear_pointer(bound, g_free);
		g_mutex_clear(&e->lock);
		g_free(e);
		return NULL;
	}
	return e;
}

void
us_exporter_publish(UsExporter *e, const gchar *text, gsize len)
{
	gchar *copy = g_malloc(len + 1), *old;

	memcpy(copy, text, len);
	copy[len] = '\0';

	g_mutex_lock(&e->lock);
	old = e->text;
	e->text = copy;
	e->len = len;
	g_mutex_unlock(&e->lock);
	g_free(old);
}

void
us_exporter_free(UsExporter *e)
{
	if (!e)
		return;
	MHD_stop_daemon(e->daemon);
	g_mutex_clear(&e->lock);
	g_free(e->text);
	g_free(e);
}
