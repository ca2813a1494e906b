/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vcpu-spin: one synthetic "domain" for tools/lab bench sched.
 *
 *   vcpu-spin NTHREADS DUTY_PCT [PERIOD_MS [WAKE_MS [MEM_MB]]]
 *
 * Starts NTHREADS threads named "vcpu N" that stand in for a domain's vCPU
 * threads.  With DUTY_PCT 100 a thread is a pure CPU hog; below 100 it
 * spins for DUTY_PCT % of each PERIOD_MS (default 100) period and sleeps
 * until the next period starts, like a mostly idle guest that wakes up on a
 * timer.  The duty cycle counts CPU time the thread actually got (its
 * CLOCK_THREAD_CPUTIME_ID), not wall time, so a thread that waits for a
 * CPU still asks for the same work per period.
 *
 * The main thread stands in for QEMU's main loop.  With WAKE_MS > 0 it
 * wakes up every WAKE_MS and goes back to sleep at once, as the main loop
 * of an idle guest does on its timers (an idle spinning lab guest's QEMU
 * wakes about 18 times a second); with 0 (the default) it sleeps until
 * stdin is closed.
 *
 * With MEM_MB > 0 each thread is memory-bound while it runs: it allocates
 * MEM_MB of its own (first touched by itself, so on the NUMA node it first
 * runs on) and writes one byte per cache line through it, over and over,
 * instead of spinning on a register.
 *
 * Prints one thread id per line, then "ready", and runs until stdin is
 * closed; the benchmark moves the threads between cgroups by TID.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct vcpu {
	pthread_t thread;
	pid_t tid;
	long duty;
	long period_ns;
	size_t mem_bytes;
	pthread_mutex_t lock;
	pthread_cond_t started;
};

static volatile int done;

static long long
now_ns(clockid_t clk)
{
	struct timespec t;

	clock_gettime(clk, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One step of work: nothing, or one write to the next cache line. */
static inline void
work_step(volatile unsigned char *mem, size_t bytes, size_t *pos)
{
	if (!mem)
		return;
	mem[*pos]++;
	*pos += 64;
	if (*pos >= bytes)
		*pos = 0;
}

static void *
vcpu_main(void *arg)
{
	struct vcpu *v = arg;
	volatile unsigned char *mem = NULL;
	size_t pos = 0;
	long long next;

	if (v->mem_bytes) {
		mem = malloc(v->mem_bytes);
		if (!mem) {
			perror("vcpu-spin: malloc");
			exit(1);
		}
		for (size_t i = 0; i < v->mem_bytes; i += 4096)
			mem[i] = 1;
	}

	pthread_mutex_lock(&v->lock);
	v->tid = (pid_t)syscall(SYS_gettid);
	pthread_cond_signal(&v->started);
	pthread_mutex_unlock(&v->lock);

	if (v->duty >= 100) {
		while (!done)
			work_step(mem, v->mem_bytes, &pos);
		return NULL;
	}

	next = now_ns(CLOCK_MONOTONIC);
	while (!done) {
		long long work = v->period_ns * v->duty / 100;
		long long c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		struct timespec until;

		while (!done && now_ns(CLOCK_THREAD_CPUTIME_ID) - c0 < work)
			for (int k = 0; k < 16; k++)
				work_step(mem, v->mem_bytes, &pos);
		next += v->period_ns;
		/* Fell behind by more than a period: start afresh, as a guest
		 * whose timer fired late would. */
		if (next < now_ns(CLOCK_MONOTONIC))
			next = now_ns(CLOCK_MONOTONIC);
		until.tv_sec = next / 1000000000LL;
		until.tv_nsec = next % 1000000000LL;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	struct vcpu *v;
	long n, duty, period_ms = 100, wake_ms = 0, mem_mb = 0;
	struct pollfd in = { .fd = 0, .events = POLLIN };
	char c;

	if (argc < 3 || argc > 6) {
		fprintf(stderr, "usage: vcpu-spin NTHREADS DUTY_PCT [PERIOD_MS [WAKE_MS [MEM_MB]]]\n");
		return 2;
	}
	n = strtol(argv[1], NULL, 10);
	duty = strtol(argv[2], NULL, 10);
	if (argc >= 4)
		period_ms = strtol(argv[3], NULL, 10);
	if (argc >= 5)
		wake_ms = strtol(argv[4], NULL, 10);
	if (argc == 6)
		mem_mb = strtol(argv[5], NULL, 10);
	if (n < 1 || n > 256 || duty < 1 || duty > 100 || period_ms < 1 || period_ms > 10000 ||
	    wake_ms < 0 || wake_ms > 10000 || mem_mb < 0 || mem_mb > 4096) {
		fprintf(stderr, "vcpu-spin: need 1..256 threads, duty 1..100 %%, period 1..10000 ms, "
			"wake 0..10000 ms, memory 0..4096 MiB\n");
		return 2;
	}
	v = calloc(n, sizeof(*v));
	if (!v)
		return 1;
	for (long i = 0; i < n; i++) {
		char name[16];

		v[i].duty = duty;
		v[i].period_ns = period_ms * 1000000L;
		v[i].mem_bytes = (size_t)mem_mb << 20;
		pthread_mutex_init(&v[i].lock, NULL);
		pthread_cond_init(&v[i].started, NULL);
		pthread_mutex_lock(&v[i].lock);
		if (pthread_create(&v[i].thread, NULL, vcpu_main, &v[i]) != 0) {
			perror("vcpu-spin: pthread_create");
			return 1;
		}
		while (!v[i].tid)
			pthread_cond_wait(&v[i].started, &v[i].lock);
		pthread_mutex_unlock(&v[i].lock);
		snprintf(name, sizeof(name), "vcpu %ld", i);
		pthread_setname_np(v[i].thread, name);
		printf("%d\n", (int)v[i].tid);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int r = poll(&in, 1, wake_ms > 0 ? (int)wake_ms : -1);

		if (r == 0)
			continue;
		if (r < 0 || read(0, &c, 1) <= 0)
			break;
	}
	done = 1;
	for (long i = 0; i < n; i++)
		pthread_join(v[i].thread, NULL);
	free(v);
	return 0;
}
