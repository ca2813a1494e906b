/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal: counters that unsteal keeps itself, across sampling intervals.
 *
 * The kernel counts a thread's run-queue wait (schedstat) but not how much
 * of it fell while host CPUs were idle: unsteal splits each interval's wait
 * into idle and busy wait (model.c).  To expose that split as Prometheus
 * counters, the splits are summed here per vCPU thread, keyed by process
 * and thread id, for as long as the thread is measured in every interval.
 * A thread that is not in an interval's result (it exited, its process
 * restarted, or its files were unreadable) is forgotten: if it shows up
 * again, its counters start again from zero, which Prometheus reads as a
 * counter reset.  The memory held is one small entry per measured thread. */
#pragma once

#include <glib.h>

#include "model.h"

typedef struct _UsTotals UsTotals;

UsTotals *us_totals_new(void);
void us_totals_free(UsTotals *t);

/* Add R's interval to T and write the totals into R: each vCPU's
 * idle_wait_total_s and busy_wait_total_s (have_totals), and the host's
 * idle_total_s, held at its highest value so far (the kernel's idle and
 * iowait sum can step back a little on tickless CPUs). */
void us_totals_add(UsTotals *t, UsResult *r);

/* Threads held (for tests and memory checks). */
guint us_totals_size(const UsTotals *t);
