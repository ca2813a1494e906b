// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swapoff_bench: swapoff(2) wall time against the number of processes on the
 * swap mm list that own no swap entries.  Runs inside the lab's QEMU guest
 * (tools/lab kselftest --bench swapoff); built static by tools/lablib.
 *
 *   swapoff_bench [-r RUNS] [-m MAPPED_MIB] [-s SWAPPED_MIB] N...
 *
 * For every N: N idle processes each map MAPPED_MIB of touched memory
 * (copy-on-write shared with the parent, so it costs page tables, not
 * pages); one process pages SWAPPED_MIB out.  Before each run the swapped
 * process pages its memory out first, then every idle process pages one page
 * out and writes it back: all N join the mm list ahead of it, none keeps a
 * swap entry.  Then swapoff of the first area in /proc/swaps is timed and
 * the area is turned on again.  One line per run:
 *
 *   swapoff-bench: idle=N run=I ms=T walked=W skipped=S ptkb_idle=P
 *                  ptkb_swapped=Q ok=1
 *
 * walked/skipped count the swap:swapoff_mm trace events of the run, in a
 * tracefs instance of the benchmark's own at /sys/kernel/tracing (-1 when
 * the kernel lacks the event, tracefs is not mounted there, or the buffer
 * lost events);
 * ptkb_idle and ptkb_swapped are the page tables (VmPTE, kB) of all idle
 * processes together and of the swapped process, read just before
 * swapoff: what a walk of their address spaces has to look through, in
 * units that do not depend on the machine; ok=1 means every page of the
 * swapped process was intact afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#define PM_SWAP (1ULL << 62)

static size_t pagesize;
static char dev[256];
static int prio;

static void die(const char *what)
{
	fprintf(stderr, "swapoff-bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int find_swap(void)
{
	char line[512], type[32];
	long size, used;
	FILE *f = fopen("/proc/swaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%255s %31s %ld %ld %d", dev, type, &size,
			   &used, &prio) == 5) {
			fclose(f);
			return 0;
		}
	fclose(f);
	return -1;
}

#define TRACE_DIR "/sys/kernel/tracing/instances/swapoff_bench"

static int write_file(const char *path, const char *val, int flags)
{
	int fd = open(path, O_WRONLY | flags);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/*
 * An empty instance (one left by an earlier run is emptied) with
 * swap:swapoff_mm enabled; 0, or -1 without the event.
 */
static int trace_start(void)
{
	if (mkdir(TRACE_DIR, 0700) && errno != EEXIST)
		return -1;
	if (write_file(TRACE_DIR "/trace", "", O_TRUNC) ||
	    write_file(TRACE_DIR "/events/swap/swapoff_mm/enable", "1", 0)) {
		rmdir(TRACE_DIR);
		return -1;
	}
	return 0;
}

/*
 * The mms swapoff walked and skipped since the buffer was last emptied
 * (only swapoff emits the event), which it is then again; -1 each if the
 * buffer lost events.
 */
static void trace_take(long *walked, long *skipped)
{
	unsigned long in_buffer, written;
	char line[512];
	FILE *f = fopen(TRACE_DIR "/trace", "r");

	*walked = *skipped = -1;
	if (!f)
		return;
	*walked = *skipped = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "# entries-in-buffer/entries-written: %lu/%lu",
			   &in_buffer, &written) == 2 && in_buffer != written) {
			*walked = *skipped = -1;
			break;
		}
		if (line[0] == '#' || !strstr(line, " swapoff_mm: "))
			continue;
		if (strstr(line, " skipped=1"))
			(*skipped)++;
		else
			(*walked)++;
	}
	fclose(f);
	write_file(TRACE_DIR "/trace", "", O_TRUNC);
}

static void trace_stop(void)
{
	write_file(TRACE_DIR "/events/enable", "0", 0);
	rmdir(TRACE_DIR);
}

/* A process's page tables in kB (VmPTE of /proc/PID/status), or -1. */
static long vmpte_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPTE: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static size_t swapped_pages(char *buf, size_t npages)
{
	uint64_t e;
	size_t i, n = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0)
		return 0;
	for (i = 0; i < npages; i++) {
		off_t off = ((uintptr_t)buf / pagesize + i) * sizeof(e);

		if (pread(fd, &e, sizeof(e), off) == sizeof(e) && (e & PM_SWAP))
			n++;
	}
	close(fd);
	return n;
}

static uint64_t word(size_t page, size_t i)
{
	uint64_t x = (page << 20) ^ i ^ 0x9e3779b97f4a7c15ULL;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

/* The swapped process: 'p' pages out, 'v' verifies; answers '0' or 'b'. */
static void swapped_main(size_t npages, int cmd, int ack)
{
	size_t i, j, words = pagesize / 8;
	uint64_t *buf;
	char c;

	buf = mmap(NULL, npages * pagesize, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		_exit(1);
	madvise(buf, npages * pagesize, MADV_NOHUGEPAGE);
	for (i = 0; i < npages; i++)
		for (j = 0; j < words; j++)
			buf[i * words + j] = word(i, j);
	while (read(cmd, &c, 1) == 1) {
		if (c == 'p') {
			madvise(buf, npages * pagesize, MADV_PAGEOUT);
			c = swapped_pages((char *)buf, npages) * 10 >=
			    npages * 9 ? '0' : 'b';
		} else {
			c = '0';
			for (i = 0; i < npages; i++)
				for (j = 0; j < words; j++)
					if (buf[i * words + j] != word(i, j))
						c = 'b';
		}
		if (write(ack, &c, 1) != 1)
			break;
	}
	_exit(0);
}

/* An idle process: on SIGUSR1, page one page out and write it back. */
static void idle_main(int ack)
{
	cpu_set_t cpus;
	sigset_t set;
	char *page, c;
	int sig, cpu;

	/*
	 * Fault and MADV_PAGEOUT on the same CPU: MADV_PAGEOUT only drains
	 * this CPU's LRU batch.
	 */
	cpu = sched_getcpu();
	if (cpu >= 0) {
		CPU_ZERO(&cpus);
		CPU_SET(cpu, &cpus);
		sched_setaffinity(0, sizeof(cpus), &cpus);
	}
	page = mmap(NULL, pagesize, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		_exit(1);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	for (;;) {
		if (sigwait(&set, &sig))
			_exit(1);
		memset(page, getpid() & 0xff, pagesize);
		madvise(page, pagesize, MADV_PAGEOUT);
		c = swapped_pages(page, 1) ? '0' : 'b';
		page[0]++;
		if (write(ack, &c, 1) != 1)
			_exit(1);
	}
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char ask(int cmd, int ack, char c)
{
	if (write(cmd, &c, 1) != 1 || read(ack, &c, 1) != 1)
		die("helper");
	return c;
}

static void bench(int nidle, int runs, size_t mapped_mib, size_t swapped_mib)
{
	int scmd[2], sack[2], iack[2], i, r, bad = 0, traced;
	size_t npages = (mapped_mib << 20) / pagesize;
	pid_t swapped, *idle;
	sigset_t set;
	char *mem;

	mem = mmap(NULL, npages * pagesize, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	/*
	 * Base pages: the walk looks at every PTE of them.  A PMD-mapped THP
	 * is passed over with one check per 2 MiB (and the kernel turns THP
	 * on only for guests of 512 MiB or more).
	 */
	madvise(mem, npages * pagesize, MADV_NOHUGEPAGE);
	memset(mem, 0x5a, npages * pagesize);
	if (pipe(scmd) || pipe(sack) || pipe(iack))
		die("pipe");
	swapped = fork();
	if (!swapped)
		swapped_main((swapped_mib << 20) / pagesize, scmd[0], sack[1]);

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	idle = calloc(nidle + 1, sizeof(*idle));
	for (i = 0; i < nidle; i++) {
		idle[i] = fork();
		if (idle[i] < 0)
			die("fork");
		if (!idle[i])
			idle_main(iack[1]);
	}

	traced = !trace_start();
	for (r = 1; r <= runs; r++) {
		long walked = -1, skipped = -1, pt_idle = 0, pt_swapped;
		double t0, t1;
		char c;
		int flags = prio >= 0 ? SWAP_FLAG_PREFER | prio : 0;

		if (ask(scmd[1], sack[0], 'p') != '0')
			fprintf(stderr, "swapoff-bench: pageout incomplete\n");
		for (i = 0; i < nidle; i++)
			kill(idle[i], SIGUSR1);
		for (i = 0; i < nidle; i++)
			if (read(iack[0], &c, 1) != 1 || c != '0')
				bad++;
		for (i = 0; i < nidle; i++)
			pt_idle += vmpte_kb(idle[i]);
		pt_swapped = vmpte_kb(swapped);
		t0 = now_ms();
		if (swapoff(dev))
			die("swapoff");
		t1 = now_ms();
		if (traced)
			trace_take(&walked, &skipped);
		if (swapon(dev, flags))
			die("swapon");
		c = ask(scmd[1], sack[0], 'v');
		printf("swapoff-bench: idle=%d run=%d ms=%.1f walked=%ld skipped=%ld ptkb_idle=%ld ptkb_swapped=%ld ok=%d\n",
		       nidle, r, t1 - t0, walked, skipped, pt_idle, pt_swapped,
		       c == '0' && !bad);
		fflush(stdout);
	}
	if (traced)
		trace_stop();
	for (i = 0; i < nidle; i++)
		kill(idle[i], SIGKILL);
	kill(swapped, SIGKILL);
	while (wait(NULL) > 0)
		;
	close(scmd[0]);
	close(scmd[1]);
	close(sack[0]);
	close(sack[1]);
	close(iack[0]);
	close(iack[1]);
	free(idle);
	munmap(mem, npages * pagesize);
}

int main(int argc, char **argv)
{
	size_t mapped = 8, swapped = 16;
	int runs = 5, opt;

	pagesize = getpagesize();
	while ((opt = getopt(argc, argv, "r:m:s:")) != -1) {
		switch (opt) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 'm':
			mapped = strtoul(optarg, NULL, 0);
			break;
		case 's':
			swapped = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-r runs] [-m mapped MiB] [-s swapped MiB] N...\n",
				argv[0]);
			return 2;
		}
	}
	if (find_swap()) {
		fprintf(stderr, "swapoff-bench: no swap area in /proc/swaps\n");
		return 1;
	}
	printf("swapoff-bench: swap=%s runs=%d mapped=%zuMiB swapped=%zuMiB\n",
	       dev, runs, mapped, swapped);
	fflush(stdout);
	for (; optind < argc; optind++)
		bench(atoi(argv[optind]), runs, mapped, swapped);
	return 0;
}
