/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cgroupfault.c: a fault injector for the lab daemon (LD_PRELOAD).
 *
 * An open(2) for writing of a file below /sys/fs/cgroup/ whose path contains
 * the text in the file named by $UNSTEAL_CGROUP_FAULT fails with EIO.  The
 * test writes that text while the daemon runs, and empties the file to stop
 * the faults.  Everything else goes to the C library untouched.
 *
 * Built by tests/integration/test_vcpu_cgroup_faults.py:
 *   gcc -shared -fPIC -O2 -o cgroupfault.so cgroupfault.c -ldl
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup/"

static int
faulty(const char *path, int flags)
{
    const char *ctl = getenv("UNSTEAL_CGROUP_FAULT");
    char text[1024];
    ssize_t n;
    long fd;

    if (!ctl || !path || (flags & O_ACCMODE) == O_RDONLY ||
        strncmp(path, CGROUP_ROOT, strlen(CGROUP_ROOT)) != 0)
        return 0;

    /* the raw system call: open() here would call ourselves */
    fd = syscall(SYS_openat, AT_FDCWD, ctl, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    text[strcspn(text, "\n")] = '\0';

    return text[0] != '\0' && strstr(path, text) != NULL;
}


typedef int (*open_fn)(const char *, int, ...);


/* Fails an open @faulty names, hands any other to the C library's @name */
static int
forward(const char *name, open_fn *real, const char *path, int flags, int mode)
{
    if (faulty(path, flags)) {
        errno = EIO;
        return -1;
    }
    if (!*real)
        *real = (open_fn) dlsym(RTLD_NEXT, name);
    return (*real)(path, flags, mode);
}


/* open() and open64(): the mode argument exists only with O_CREAT or
 * O_TMPFILE */
#define DEFINE_OPEN(fn) \
int \
fn(const char *path, int flags, ...) \
{ \
    static open_fn real; \
    va_list ap; \
    int mode = 0; \
 \
    if (flags & (O_CREAT | O_TMPFILE)) { \
        va_start(ap, flags); \
        mode = va_arg(ap, int); \
        va_end(ap); \
    } \
    return forward(#fn, &real, path, flags, mode); \
}

DEFINE_OPEN(open)
DEFINE_OPEN(open64)
