/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fake-domain: a stand-in for one QEMU process with many vCPU threads, for
 * tools/lab bench exporter.
 *
 *   fake-domain -name guest=NAME NTHREADS DUTY_PCT
 *
 * What unsteal looks for in /proc is all there is to it: the process calls
 * itself "qemu-system-x86" (its comm), its command line holds
 * "-name guest=NAME" (the domain's name), and it starts NTHREADS threads
 * named "CPU 0/KVM", "CPU 1/KVM", ... (QEMU's names with debug-threads=on).
 * argv[0] may be anything.
 *
 * Each thread wakes every 100 ms and runs for DUTY_PCT % of the period
 * (decimals allowed: 0.2 is 200 us), counted in the CPU time the thread got
 * (CLOCK_THREAD_CPUTIME_ID), then sleeps until its next period.  The
 * threads' periods are spread over the 100 ms so that they do not all wake
 * at once.  Use a low duty: 200 threads at 0.2 % ask for 0.4 of a CPU.
 * DUTY_PCT 0: the threads only wake up.
 *
 * Prints "ready" once every thread runs and has its name, and exits when
 * stdin is closed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 100000000LL
#define MAX_THREADS 1024
/* A vCPU thread here needs next to no stack; 2000 threads stay small. */
#define STACK_BYTES (64 * 1024)

struct vcpu {
	pthread_t thread;
	long long work_ns;   /* CPU time per period */
	long long phase_ns;  /* offset of its first period */
};

static atomic_int stopping;

static long long
clock_ns(clockid_t clk)
{
	struct timespec t;

	clock_gettime(clk, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void
sleep_until(long long when)
{
	struct timespec t = { .tv_sec = when / 1000000000LL,
			      .tv_nsec = when % 1000000000LL };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0 &&
	       !atomic_load(&stopping))
		;
}

static void *
vcpu_thread(void *arg)
{
	const struct vcpu *v = arg;
	long long wake = clock_ns(CLOCK_MONOTONIC) + v->phase_ns;

	while (!atomic_load(&stopping)) {
		long long start, now;

		sleep_until(wake);
		start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		while (!atomic_load(&stopping) &&
		       clock_ns(CLOCK_THREAD_CPUTIME_ID) - start < v->work_ns)
			;
		wake += PERIOD_NS;
		now = clock_ns(CLOCK_MONOTONIC);
		/* a thread that fell a period behind keeps its phase, skipping
		 * the periods it missed, instead of running them all at once */
		if (wake < now)
			wake += (now - wake) / PERIOD_NS * PERIOD_NS + PERIOD_NS;
	}
	return NULL;
}

static int
usage(void)
{
	fprintf(stderr, "usage: fake-domain -name guest=NAME NTHREADS DUTY_PCT\n"
		"  NTHREADS 1..%d, DUTY_PCT 0..100 (decimals allowed)\n", MAX_THREADS);
	return 2;
}

int
main(int argc, char **argv)
{
	struct vcpu *vcpus;
	pthread_attr_t attr;
	char *end;
	long n;
	double duty;
	char c;

	if (argc != 5 || strcmp(argv[1], "-name") != 0 ||
	    strncmp(argv[2], "guest=", 6) != 0 || argv[2][6] == '\0')
		return usage();
	n = strtol(argv[3], &end, 10);
	if (*argv[3] == '\0' || *end != '\0' || n < 1 || n > MAX_THREADS)
		return usage();
	duty = strtod(argv[4], &end);
	if (*argv[4] == '\0' || *end != '\0' || !(duty >= 0 && duty <= 100))
		return usage();

	/* the comm unsteal takes for QEMU's; the threads inherit it until
	 * they are named below */
	if (prctl(PR_SET_NAME, "qemu-system-x86", 0, 0, 0) != 0) {
		perror("fake-domain: prctl(PR_SET_NAME)");
		return 1;
	}
	vcpus = calloc((size_t)n, sizeof(*vcpus));
	if (!vcpus) {
		perror("fake-domain");
		return 1;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_BYTES);
	for (long i = 0; i < n; i++) {
		char name[16];
		int err;

		vcpus[i].work_ns = (long long)(PERIOD_NS * duty / 100.0);
		vcpus[i].phase_ns = PERIOD_NS * i / n;
		err = pthread_create(&vcpus[i].thread, &attr, vcpu_thread, &vcpus[i]);
		if (err != 0) {
			fprintf(stderr, "fake-domain: thread %ld of %ld: %s\n", i, n, strerror(err));
			return 1;
		}
		snprintf(name, sizeof(name), "CPU %ld/KVM", i);
		err = pthread_setname_np(vcpus[i].thread, name);
		if (err != 0) {
			fprintf(stderr, "fake-domain: naming thread %ld: %s\n", i, strerror(err));
			return 1;
		}
	}
	pthread_attr_destroy(&attr);
	printf("ready\n");
	fflush(stdout);

	while (read(0, &c, 1) > 0)
		;
	atomic_store(&stopping, 1);
	for (long i = 0; i < n; i++)
		pthread_join(vcpus[i].thread, NULL);
	free(vcpus);
	return 0;
}
