/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cgroupfault.c: a fault injector for the lab daemon (LD_PRELOAD).
 *
 * An open(2) for writing of a file below /sys/fs/cgroup/ whose path contains
 * the text in the file named by $UNSTEAL_CGROUP_FAULT fails with EIO.  The
 * test writes that text while the daemon runs, and empties the file to stop
 * the faults.
 *
 * An rmdir(2) of a directory below /sys/fs/cgroup/ whose path contains the
 * text in the file named by $UNSTEAL_CGROUP_BUSY fails with EBUSY for a
 * while, as the kernel refuses a group that still holds exiting threads:
 * that file holds "MS TEXT", and the EBUSY lasts MS milliseconds from the
 * first rmdir() of a path with TEXT.  Writing another TEXT starts anew.
 *
 * Everything else goes to the C library untouched.
 *
 * Built by tests/integration/test_vcpu_cgroup_faults.py:
 *   gcc -shared -fPIC -O2 -o cgroupfault.so cgroupfault.c -ldl -lpthread
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup/"

/* The first line of the control file named by $@env into @text: 0 if
 * there is a non-empty one, -1 otherwise */
static int
control(const char *env, char *text, size_t size)
{
    const char *ctl = getenv(env);
    ssize_t n;
    long fd;

    if (!ctl)
        return -1;
    /* the raw system call: open() here would call ourselves */
    fd = syscall(SYS_openat, AT_FDCWD, ctl, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, text, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    text[strcspn(text, "\n")] = '\0';
    return text[0] != '\0' ? 0 : -1;
}


static int
in_cgroupfs(const char *path)
{
    return path && strncmp(path, CGROUP_ROOT, strlen(CGROUP_ROOT)) == 0;
}


static int
faulty(const char *path, int flags)
{
    char text[1024];

    if ((flags & O_ACCMODE) == O_RDONLY || !in_cgroupfs(path) ||
        control("UNSTEAL_CGROUP_FAULT", text, sizeof(text)) < 0)
        return 0;
    return strstr(path, text) != NULL;
}


static long
ms_since(const struct timespec *then)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - then->tv_sec) * 1000 +
        (now.tv_nsec - then->tv_nsec) / 1000000;
}


/* Whether an rmdir() of @path is to fail with EBUSY */
static int
busy(const char *path)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char armed[1024];
    static struct timespec since;
    char line[1100];
    char *text;
    long ms;
    int ret;

    if (!in_cgroupfs(path) || control("UNSTEAL_CGROUP_BUSY", line, sizeof(line)) < 0)
        return 0;
    ms = strtol(line, &text, 10);
    text += strspn(text, " ");
    if (ms <= 0 || *text == '\0' || strlen(text) >= sizeof(armed) ||
        !strstr(path, text))
        return 0;

    pthread_mutex_lock(&lock);
    if (strcmp(armed, text) != 0) {
        strcpy(armed, text);
        clock_gettime(CLOCK_MONOTONIC, &since);
    }
    ret = ms_since(&since) < ms;
    pthread_mutex_unlock(&lock);
    return ret;
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


int
rmdir(const char *path)
{
    static int (*real)(const char *);

    if (busy(path)) {
        errno = EBUSY;
        return -1;
    }
    if (!real)
        real = (int (*)(const char *)) dlsym(RTLD_NEXT, "rmdir");
    return real(path);
}
