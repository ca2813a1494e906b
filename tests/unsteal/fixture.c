/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The standard fixture: a 2-CPU host, sample 0 at uptime 100 s and sample 1
 * at 102 s (Δt = 2 s).
 *
 *   /proc/stat  cpu0: +150 user, +50 idle            -> idle 0.25
 *               cpu1: +100 user, +80 idle, +20 iowait -> idle 0.5
 *               all:  150 idle of 400                -> idle 0.375
 *
 *   pid 100 qemu-system-x86  -name guest=alpha,debug-threads=on
 *                            -uuid 6695eb01-f6a4-8304-79aa-97f2502e193f
 *     (the UUID of the domain "test" of libvirt's test:///default driver)
 *     tid 101 "CPU 0/KVM" cpus 0    run +1.5 s wait +0.4 s
 *     tid 102 "CPU 1/KVM" cpus 0-1  run +1.6 s wait +0.2 s
 *     tid 103 "IO iothread1" (not a vCPU)
 *     emulator in /machine/alpha.libvirt-qemu/emulator,
 *     vCPUs in the shared /machine/vcpus.partition
 *       (periods +20, throttled +5, throttled time +0.5 s, no quota,
 *        v2: cpu.pressure some total +0.4 s)
 *   pid 200 qemu-kvm  -name beta
 *     tid 201 "CPU 0/TCG" cpus 1    run +0.2 s wait +0.6 s
 *     emulator in /machine/beta.libvirt-qemu/emulator,
 *     vCPU in its own /machine/beta.libvirt-qemu/vcpu0
 *       (periods +20, throttled +0, quota 0.5 CPU)
 *   pid 300 bash (ignored)
 */
#include "fixture.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

gchar *
fx_tmpdir(void)
{
	const gchar *base = g_getenv("UNSTEAL_TEST_TMPDIR");
	gchar *tmpl, *d;

	/* Prefer a tmpfs: on a busy disk every rename/unlink is slow. */
	if (!base && g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) &&
	    g_access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	if (!base)
		base = g_get_tmp_dir();
	tmpl = g_build_filename(base, "unsteal-test-XXXXXX", NULL);
	d = g_mkdtemp(tmpl);
	g_assert_nonnull(d);
	return d;
}

static void
rm_rf(const gchar *path)
{
	GDir *d;

	if (g_file_test(path, G_FILE_TEST_IS_DIR) &&
	    !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
		const gchar *e;

		d = g_dir_open(path, 0, NULL);
		while (d && (e = g_dir_read_name(d))) {
			gchar *p = g_build_filename(path, e, NULL);

			rm_rf(p);
			g_free(p);
		}
		if (d)
			g_dir_close(d);
		g_rmdir(path);
	} else {
		g_unlink(path);
	}
}

void
fx_cleanup(gchar *dir)
{
	if (dir && strstr(dir, "unsteal-test-"))
		rm_rf(dir);
	g_free(dir);
}

void
fx_write(const gchar *root, const gchar *rel, const gchar *content, gssize len)
{
	gchar *p = g_build_filename(root, rel, NULL);
	gchar *dir = g_path_get_dirname(p);
	gsize n = len < 0 ? strlen(content) : (gsize)len;
	FILE *f;

	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	/* plain stdio: no fsync, fixtures are throw-away and must be fast */
	f = fopen(p, "wb");
	g_assert_nonnull(f);
	g_assert_cmpuint(fwrite(content, 1, n, f), ==, n);
	g_assert_cmpint(fclose(f), ==, 0);
	g_free(dir);
	g_free(p);
}

void
fx_remove(const gchar *root, const gchar *rel)
{
	gchar *p = g_build_filename(root, rel, NULL);

	rm_rf(p);
	g_free(p);
}

static void
task(const gchar *root, gint pid, gint tid, const gchar *comm,
     const gchar *schedstat, const gchar *cpus, const gchar *cgroup)
{
	gchar *base = g_strdup_printf("proc/%d/task/%d", pid, tid);
	gchar *p, *c;

	p = g_strdup_printf("%s/comm", base);
	c = g_strdup_printf("%s\n", comm);
	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
	p = g_strdup_printf("%s/schedstat", base);
	fx_write(root, p, schedstat, -1);
	g_free(p);
	p = g_strdup_printf("%s/status", base);
	c = g_strdup_printf("Name:\t%s\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\n"
			    "Cpus_allowed:\t3\nCpus_allowed_list:\t%s\n"
			    "voluntary_ctxt_switches:\t1\n", comm, pid, tid, cpus);
	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
	p = g_strdup_printf("%s/cgroup", base);
	fx_write(root, p, cgroup, -1);
	g_free(p);
	g_free(base);
}

static gchar *
cg_line(FxLayout l, const gchar *path)
{
	switch (l) {
	case FX_V1:
		return g_strdup_printf("5:memory:/machine\n4:cpuacct:%s\n3:cpu:%s\n"
				       "1:name=systemd:/\n", path, path);
	case FX_V1_COMOUNT:
		return g_strdup_printf("5:memory:/machine\n3:cpu,cpuacct:%s\n"
				       "1:name=systemd:/\n", path);
	case FX_V2:
		break;
	}
	return g_strdup_printf("0::%s\n", path);
}

static const gchar *
cg_base(FxLayout l)
{
	switch (l) {
	case FX_V1: return "sys/fs/cgroup/cpu";
	case FX_V1_COMOUNT: return "sys/fs/cgroup/cpu,cpuacct";
	case FX_V2: break;
	}
	return "sys/fs/cgroup";
}

static void
cg_files(const gchar *root, FxLayout l, const gchar *path, guint64 periods,
	 guint64 throttled, guint64 throttled_us, gint64 quota_us,
	 guint64 pressure_us)
{
	gchar *dir = g_strdup_printf("%s%s", cg_base(l), path);
	gchar *p, *c;

	p = g_strdup_printf("%s/cpu.stat", dir);
	if (l == FX_V2)
		c = g_strdup_printf("usage_usec 123\nuser_usec 100\nsystem_usec 23\n"
				    "nr_periods %" G_GUINT64_FORMAT "\nnr_throttled %"
				    G_GUINT64_FORMAT "\nthrottled_usec %" G_GUINT64_FORMAT
				    "\nnr_bursts 0\nburst_usec 0\n",
				    periods, throttled, throttled_us);
	else
		c = g_strdup_printf("nr_periods %" G_GUINT64_FORMAT "\nnr_throttled %"
				    G_GUINT64_FORMAT "\nthrottled_time %" G_GUINT64_FORMAT
				    "\nnr_bursts 0\nburst_time 0\n",
				    periods, throttled, throttled_us * 1000);
	fx_write(root, p, c, -1);
	g_free(p);
	g_free(c);
	if (l == FX_V2) {
		p = g_strdup_printf("%s/cpu.max", dir);
		c = quota_us < 0 ? g_strdup("max 100000\n")
				 : g_strdup_printf("%" G_GINT64_FORMAT " 100000\n", quota_us);
		fx_write(root, p, c, -1);
		g_free(p);
		g_free(c);
		p = g_strdup_printf("%s/cpu.pressure", dir);
		c = g_strdup_printf("some avg10=1.00 avg60=2.00 avg300=3.00 total=%"
				    G_GUINT64_FORMAT "\nfull avg10=0.00 avg60=0.00 "
				    "avg300=0.00 total=7\n", pressure_us);
		fx_write(root, p, c, -1);
		g_free(p);
		g_free(c);
	} else {
		p = g_strdup_printf("%s/cpu.cfs_quota_us", dir);
		c = g_strdup_printf("%" G_GINT64_FORMAT "\n", quota_us);
		fx_write(root, p, c, -1);
		g_free(p);
		g_free(c);
		p = g_strdup_printf("%s/cpu.cfs_period_us", dir);
		fx_write(root, p, "100000\n", -1);
		g_free(p);
	}
	g_free(dir);
}

void
fx_build(const gchar *root, FxLayout l, gint s)
{
	static const gchar alpha_cmd[] =
		"/usr/bin/qemu-system-x86_64\0-name\0guest=alpha,debug-threads=on\0"
		"-uuid\0006695eb01-f6a4-8304-79aa-97f2502e193f\0-m\0512\0";
	static const gchar beta_cmd[] = "/usr/libexec/qemu-kvm\0-name\0beta\0";
	gchar *ae = cg_line(l, "/machine/alpha.libvirt-qemu/emulator");
	gchar *av = cg_line(l, "/machine/vcpus.partition");
	gchar *be = cg_line(l, "/machine/beta.libvirt-qemu/emulator");
	gchar *bv = cg_line(l, "/machine/beta.libvirt-qemu/vcpu0");
	gchar *other = cg_line(l, "/user.slice");

	fx_write(root, "proc/uptime", s ? "102.00 150.00\n" : "100.00 148.00\n", -1);
	fx_write(root, "proc/stat", s ?
		 "cpu  2250 0 0 2130 20 0 0 0 0 0\n"
		 "cpu0 1150 0 0 1050 0 0 0 0 0 0\n"
		 "cpu1 1100 0 0 1080 20 0 0 0 0 0\n"
		 "intr 1 2 3\nctxt 42\nbtime 1700000000\n" :
		 "cpu  2000 0 0 2000 0 0 0 0 0 0\n"
		 "cpu0 1000 0 0 1000 0 0 0 0 0 0\n"
		 "cpu1 1000 0 0 1000 0 0 0 0 0 0\n"
		 "intr 1 2 3\nctxt 40\nbtime 1700000000\n", -1);

	fx_write(root, "proc/100/comm", "qemu-system-x86\n", -1);
	fx_write(root, "proc/100/cmdline", alpha_cmd, sizeof(alpha_cmd) - 1);
	task(root, 100, 100, "qemu-system-x86", "7000000 0 3\n", "0-1", ae);
	task(root, 100, 101, "CPU 0/KVM",
	     s ? "2500000000 900000000 20\n" : "1000000000 500000000 10\n", "0", av);
	task(root, 100, 102, "CPU 1/KVM",
	     s ? "1600000000 200000000 5\n" : "0 0 0\n", "0-1", av);
	task(root, 100, 103, "IO iothread1", "5 5 5\n", "0-1", ae);

	fx_write(root, "proc/200/comm", "qemu-kvm\n", -1);
	fx_write(root, "proc/200/cmdline", beta_cmd, sizeof(beta_cmd) - 1);
	task(root, 200, 200, "qemu-kvm", "1 1 1\n", "0-1", be);
	task(root, 200, 201, "CPU 0/TCG",
	     s ? "5200000000 1600000000 2\n" : "5000000000 1000000000 1\n", "1", bv);

	fx_write(root, "proc/300/comm", "bash\n", -1);
	fx_write(root, "proc/300/cmdline", "bash\0", 5);
	task(root, 300, 300, "bash", "1 1 1\n", "0-1", other);
	fx_write(root, "proc/self", "not a pid dir\n", -1);

	if (l == FX_V2)
		fx_write(root, "sys/fs/cgroup/cgroup.controllers",
			 "cpuset cpu io memory pids\n", -1);
	else
		fx_write(root, "sys/fs/cgroup/cpuacct/cpuacct.usage", "0\n", -1);
	cg_files(root, l, "/machine/vcpus.partition", s ? 120 : 100,
		 s ? 15 : 10, s ? 1500000 : 1000000, -1, s ? 1400000 : 1000000);
	cg_files(root, l, "/machine/beta.libvirt-qemu/vcpu0", s ? 70 : 50, 0, 0,
		 50000, 0);
	cg_files(root, l, "/machine/alpha.libvirt-qemu/emulator", 0, 0, 0, -1, 0);
	cg_files(root, l, "/machine/beta.libvirt-qemu/emulator", 0, 0, 0, -1, 0);

	g_free(ae);
	g_free(av);
	g_free(be);
	g_free(bv);
	g_free(other);
}

void
fx_nest_beta(const gchar *root, FxLayout l, gint s)
{
	static const gchar nested[] = "/machine/vcpus.partition/beta.libvirt-qemu/vcpu0";
	gchar *bv = cg_line(l, nested);

	fx_write(root, "proc/200/task/201/cgroup", bv, -1);
	cg_files(root, l, nested, s ? 70 : 50, 0, 0, 50000, 0);
	g_free(bv);
}
