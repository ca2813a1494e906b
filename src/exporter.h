/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal exporter: serves the latest Prometheus text on GET /metrics. */
#pragma once

#include <glib.h>

typedef struct _UsExporter UsExporter;

/* Listen on SPEC (listen.h) and serve from a thread of its own.  Returns
 * NULL with *ERR set when the address is bad or cannot be listened on.
 * *BOUND (optional) gets the address actually bound. */
UsExporter *us_exporter_new(const gchar *spec, gchar **bound, gchar **err);
/* Replace what /metrics answers with TEXT (copied). */
void us_exporter_publish(UsExporter *e, const gchar *text, gsize len);
void us_exporter_free(UsExporter *e);
