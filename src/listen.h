/* SPDX-License-Identifier: GPL-2.0-or-later */
/* unsteal exporter: the --listen ADDR:PORT address and its socket. */
#pragma once

#include <glib.h>

/* Split SPEC, "ADDR:PORT" with ADDR an IPv4 address, a host name, an IPv6
 * address in brackets or empty (every address), into *HOST (NULL when
 * empty) and *PORT (0-65535; 0 = any free port).  Returns FALSE with *ERR
 * set when SPEC is not of that form. */
gboolean us_listen_parse(const gchar *spec, gchar **host, guint *port,
			 gchar **err);

/* A TCP socket listening on SPEC, or -1 with *ERR set (a bad SPEC, an
 * unknown host, an address in use or not local...).  *BOUND (optional)
 * gets the address actually bound, "127.0.0.1:43127" or "[::]:9000". */
gint us_listen_open(const gchar *spec, gchar **bound, gchar **err);
