/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A stand-in for a QEMU process on the live system: names itself
 * "qemu-system-x86", starts two threads named "CPU 0/TCG" and "CPU 1/TCG"
 * that burn some CPU, prints "ready" and exits when stdin closes (or after
 * 10 s).  Start it with argv "qemu-system-x86_64 -name guest=NAME".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile int done;

static void *
vcpu(void *arg)
{
	struct timespec nap = { 0, 2 * 1000 * 1000 };

	(void)arg;
	while (!done) {
		struct timespec t0, t;

		/* ~50 % duty cycle: spin 2 ms, sleep 2 ms */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000L +
		       (t.tv_nsec - t0.tv_nsec) < 2000000L);
		nanosleep(&nap, NULL);
	}
	return NULL;
}

int
main(void)
{
	pthread_t th[2];
	char c;

	prctl(PR_SET_NAME, "qemu-system-x86", 0, 0, 0);
	for (int i = 0; i < 2; i++) {
		char name[16];

		pthread_create(&th[i], NULL, vcpu, NULL);
		snprintf(name, sizeof(name), "CPU %d/TCG", i);
		pthread_setname_np(th[i], name);
	}
	alarm(10);
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	done = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}
