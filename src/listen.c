/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FORM "expected ADDR:PORT (an IPv4 address or host name, or an IPv6 " \
	     "address in brackets, or nothing for every address; a port 0-65535)"

gboolean
us_listen_parse(const gchar *spec, gchar **host, guint *port, gchar **err)
{
	const gchar *colon = spec ? strrchr(spec, ':') : NULL;
	const gchar *p;
	guint64 n = 0;
	gchar *h;

	*host = NULL;
	if (!colon) {
		*err = g_strdup_printf("--listen '%s': %s", spec ? spec : "", FORM);
		return FALSE;
	}
	if (colon[1] == '\0' || strlen(colon + 1) > 5) {
		*err = g_strdup_printf("--listen '%s': port '%s' is not a number in 0-65535",
				       spec, colon + 1);
		return FALSE;
	}
	for (p = colon + 1; *p; p++) {
		if (!g_ascii_isdigit(*p)) {
			*err = g_strdup_printf("--listen '%s': port '%s' is not a number in 0-65535",
					       spec, colon + 1);
			return FALSE;
		}
		n = n * 10 + (guint64)(*p - '0');
	}
	if (n > 65535) {
		*err = g_strdup_printf("--listen '%s': port %" G_GUINT64_FORMAT
				       " is out of range (0-65535)", spec, n);
		return FALSE;
	}
	h = g_strndup(spec, (gsize)(colon - spec));
	if (h[0] == '[') {
		gsize len = strlen(h);

		if (len < 3 || h[len - 1] != ']') {
			*err = g_strdup_printf("--listen '%s': %s", spec, FORM);
			g_free(h);
			return FALSE;
		}
		memmove(h, h + 1, len - 2);
		h[len - 2] = '\0';
	} else if (strchr(h, ':') || strchr(h, ']')) {
		*err = g_strdup_printf("--listen '%s': %s", spec, FORM);
		g_free(h);
		return FALSE;
	}
	if (h[0] == '\0') {
		g_free(h);
		h = NULL;
	}
	*host = h;
	*port = (guint)n;
	return TRUE;
}

static gchar *
describe(const struct sockaddr *sa, socklen_t len)
{
	gchar host[NI_MAXHOST], serv[NI_MAXSERV];

	if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return g_strdup("?");
	if (sa->sa_family == AF_INET6)
		return g_strdup_printf("[%s]:%s", host, serv);
	return g_strdup_printf("%s:%s", host, serv);
}

/* A socket listening on AI, or -1 with the error in *ERRNUM. */
static gint
open_on(const struct addrinfo *ai, gint *errnum)
{
	gint fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	gint one = 1, zero = 0;

	if (fd < 0) {
		*errnum = errno;
		return -1;
	}
	/* a restart need not wait for old connections' TIME_WAIT; a port
	 * another socket listens on stays refused */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* "[::]:PORT" and ":PORT" take IPv4 too */
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		*errnum = errno;
		close(fd);
		return -1;
	}
	return fd;
}

gint
us_listen_open(const gchar *spec, gchar **bound, gchar **err)
{
	struct addrinfo hints, *res = NULL;
	gchar *host = NULL, *serv;
	guint port;
	gint rc, fd = -1, errnum = 0;

	if (!us_listen_parse(spec, &host, &port, err))
		return -1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	/* every address: IPv6's, which takes IPv4 too, where there is IPv6 */
	if (!host)
		hints.ai_family = AF_INET6;
	serv = g_strdup_printf("%u", port);
	rc = getaddrinfo(host, serv, &hints, &res);
	if (rc != 0 && !host) {
		hints.ai_family = AF_UNSPEC;
		rc = getaddrinfo(NULL, serv, &hints, &res);
	}
	if (rc != 0) {
		*err = g_strdup_printf("--listen '%s': cannot resolve '%s': %s", spec,
				       host ? host : "", gai_strerror(rc));
	} else {
		fd = open_on(res, &errnum);
		if (fd < 0 && !host && res->ai_family == AF_INET6 &&
		    errnum == EAFNOSUPPORT) {
			struct sockaddr_in sin = { .sin_family = AF_INET,
						   .sin_port = htons((guint16)port) };
			struct addrinfo v4 = { .ai_family = AF_INET,
					       .ai_socktype = SOCK_STREAM,
					       .ai_addr = (struct sockaddr *)&sin,
					       .ai_addrlen = sizeof(sin) };

			fd = open_on(&v4, &errnum);
		}
		if (fd < 0)
			*err = g_strdup_printf("cannot listen on %s: %s", spec,
					       g_strerror(errnum));
	}
	if (fd >= 0 && bound) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
			*bound = describe((struct sockaddr *)&ss, len);
		else
			*bound = g_strdup(spec);
	}
	if (res)
		freeaddrinfo(res);
	g_free(serv);
	g_free(host);
	return fd;
}
