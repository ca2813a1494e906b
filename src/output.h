/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: the terminal table, JSON lines and Prometheus text formats.
 * What they write is in the metric tables of output_metrics.h. */
#pragma once

#include <glib.h>

#include "model.h"

typedef struct {
	gboolean vcpus;        /* table: one row per vCPU under each domain */
	gboolean timestamp;    /* JSON: include "timestamp" */
	gdouble busy_threshold;
} UsOutputOptions;

void us_output_table(GString *out, const UsResult *r, const UsOutputOptions *o);
void us_output_json(GString *out, const UsResult *r, const UsOutputOptions *o);
void us_output_prometheus(GString *out, const UsResult *r,
                          const UsOutputOptions *o);

/* Exposed for tests. */
void us_json_string(GString *out, const gchar *s);
void us_prom_label_value(GString *out, const gchar *s);
