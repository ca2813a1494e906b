/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Parsers of /proc and cgroup file formats. */
#include <string.h>

#include "cgroup.h"
#include "output.h"
#include "proc.h"
#include "util.h"

static void
test_cpulist(void)
{
	GArray *a = us_cpulist_parse("0-2,5, 7-8\n");

	g_assert_nonnull(a);
	g_assert_cmpuint(a->len, ==, 6);
	g_assert_cmpint(g_array_index(a, gint, 0), ==, 0);
	g_assert_cmpint(g_array_index(a, gint, 3), ==, 5);
	g_assert_cmpint(g_array_index(a, gint, 5), ==, 8);
	g_array_free(a, TRUE);
	a = us_cpulist_parse("");
	g_assert_nonnull(a);
	g_assert_cmpuint(a->len, ==, 0);
	g_array_free(a, TRUE);
	g_assert_null(us_cpulist_parse("3-1"));
	g_assert_null(us_cpulist_parse("1,,2"));
	g_assert_null(us_cpulist_parse("x"));
	g_assert_null(us_cpulist_parse("-1"));
	g_assert_null(us_cpulist_parse("0-99999999"));
	g_assert_null(us_cpulist_parse(NULL));
}

static void
test_comm(void)
{
	g_assert_true(us_proc_is_qemu("qemu-system-x86"));
	g_assert_true(us_proc_is_qemu("qemu-kvm"));
	g_assert_false(us_proc_is_qemu("qemu-img"));
	g_assert_false(us_proc_is_qemu("bash"));
	g_assert_cmpint(us_proc_vcpu_id("CPU 0/KVM"), ==, 0);
	g_assert_cmpint(us_proc_vcpu_id("CPU 17/TCG"), ==, 17);
	g_assert_cmpint(us_proc_vcpu_id("CPU 1/XYZ"), ==, -1);
	g_assert_cmpint(us_proc_vcpu_id("CPU /KVM"), ==, -1);
	g_assert_cmpint(us_proc_vcpu_id("CPU  1/KVM"), ==, -1);
	g_assert_cmpint(us_proc_vcpu_id("CPU 1a/KVM"), ==, -1);
	g_assert_cmpint(us_proc_vcpu_id("CPU 1/KVM2"), ==, -1);
	g_assert_cmpint(us_proc_vcpu_id("worker"), ==, -1);
}

static void
check_name(const gchar *cmd, gsize len, const gchar *want)
{
	gchar *n = us_proc_domain_name(cmd, len);

	g_assert_cmpstr(n, ==, want);
	g_free(n);
}

#define NAME(lit, want) check_name(lit, sizeof(lit) - 1, want)

static void
test_name(void)
{
	NAME("qemu\0-name\0guest=vm1,debug-threads=on\0", "vm1");
	NAME("qemu\0-name\0debug-threads=on,guest=vm2\0", "vm2");
	NAME("qemu\0-name\0plain\0", "plain");
	NAME("qemu\0--name\0plain2,process=x\0", "plain2");
	NAME("qemu\0-name\0guest=a,,b,debug-threads=on\0", "a,b");
	NAME("qemu\0-name\0process=x\0", NULL);
	NAME("qemu\0-name\0guest=\0", NULL);
	NAME("qemu\0-name\0", NULL);
	NAME("qemu\0-name", NULL);          /* unterminated */
	NAME("qemu\0-m\0512\0", NULL);
	NAME("qemu\0-name\0first\0-name\0guest=second\0", "second");
	check_name("", 0, NULL);
}

static void
test_stat(void)
{
	GArray *cpus = g_array_new(FALSE, TRUE, sizeof(UsCpuTimes));
	UsCpuTimes all = { 0 };
	const UsCpuTimes *c;

	g_assert_true(us_proc_parse_stat(
		"cpu  10 1 2 30 4 5 6 7 8 9\n"
		"cpu0 5 0 1 15 2 2 3 3 8 9\n"
		"cpu3 5 1 1 15 2 3 3 4\n"
		"intr 12\n", &all, cpus));
	/* user..steal summed, guest fields excluded; idle = idle + iowait */
	g_assert_cmpuint(all.total, ==, 65);
	g_assert_cmpuint(all.idle, ==, 34);
	g_assert_cmpuint(cpus->len, ==, 4);
	c = &g_array_index(cpus, UsCpuTimes, 0);
	g_assert_true(c->present);
	g_assert_cmpuint(c->total, ==, 31);
	g_assert_cmpuint(c->idle, ==, 17);
	g_assert_false(g_array_index(cpus, UsCpuTimes, 1).present);
	g_assert_true(g_array_index(cpus, UsCpuTimes, 3).present);
	g_array_free(cpus, TRUE);
	g_assert_false(us_proc_parse_stat("intr 1\n", &all, NULL));
}

static void
test_schedstat(void)
{
	guint64 run = 0, wait = 0;

	g_assert_true(us_proc_parse_schedstat("123 456 7\n", &run, &wait));
	g_assert_cmpuint(run, ==, 123);
	g_assert_cmpuint(wait, ==, 456);
	g_assert_false(us_proc_parse_schedstat("123\n", &run, &wait));
	g_assert_false(us_proc_parse_schedstat("a b c\n", &run, &wait));
	g_assert_false(us_proc_parse_schedstat("", &run, &wait));
}

static void
test_status(void)
{
	gchar *v = us_proc_status_field("Name:\tx\nCpus_allowed:\tf\n"
					"Cpus_allowed_list:\t0-3\n", "Cpus_allowed_list");

	g_assert_cmpstr(v, ==, "0-3");
	g_free(v);
	g_assert_null(us_proc_status_field("Name:\tx\n", "Cpus_allowed_list"));
}

static void
check_cg(const gchar *content, gint version, const gchar *cpu, const gchar *v2)
{
	UsCgroupRef r;
	gboolean ok = us_cgroup_parse(content, &r);

	g_assert_cmpint(ok, ==, cpu != NULL);
	g_assert_cmpint(r.cpu_version, ==, version);
	g_assert_cmpstr(r.cpu_path, ==, cpu);
	g_assert_cmpstr(r.v2_path, ==, v2);
	us_cgroup_ref_clear(&r);
}

static void
test_cgroup_parse(void)
{
	check_cg("4:cpuacct:/a\n3:cpu:/b\n1:name=systemd:/\n", 1, "/b", NULL);
	check_cg("3:cpu,cpuacct:/m/x:y\n", 1, "/m/x:y", NULL);
	check_cg("3:cpuacct,cpu:/c\n0::/u\n", 1, "/c", "/u");
	check_cg("0::/machine/vcpus.partition\n", 2, "/machine/vcpus.partition",
		 "/machine/vcpus.partition");
	check_cg("2:cpuacct:/a\n2:cpuset:/a\n", 0, NULL, NULL);
	check_cg("garbage\n", 0, NULL, NULL);
	check_cg(NULL, 0, NULL, NULL);
}

static void
test_cgroup_paths(void)
{
	gchar *g;

	g_assert_true(us_cgroup_is_under("/machine/a/vcpu0", "/machine/a"));
	g_assert_true(us_cgroup_is_under("/machine/a", "/machine/a"));
	g_assert_true(us_cgroup_is_under("/machine/a/x", "/machine/a/"));
	g_assert_false(us_cgroup_is_under("/machine/ab", "/machine/a"));
	g_assert_false(us_cgroup_is_under("/machine/vcpus.partition", "/machine/a"));
	g_assert_true(us_cgroup_is_under("/anything", "/"));
	g_assert_false(us_cgroup_is_under(NULL, "/"));

	g = us_cgroup_domain_group("/machine/a.libvirt-qemu/emulator");
	g_assert_cmpstr(g, ==, "/machine/a.libvirt-qemu");
	g_free(g);
	g = us_cgroup_domain_group("/emulator");
	g_assert_cmpstr(g, ==, "/");
	g_free(g);
	g = us_cgroup_domain_group("/machine.slice/machine-qemu\\x2d1\\x2da.scope");
	g_assert_cmpstr(g, ==, "/machine.slice/machine-qemu\\x2d1\\x2da.scope");
	g_free(g);
	g_assert_null(us_cgroup_domain_group(NULL));
}

static void
test_escape(void)
{
	GString *s = g_string_new(NULL);

	us_json_string(s, "a\"b\\c\n\x01");
	g_assert_cmpstr(s->str, ==, "\"a\\\"b\\\\c\\n\\u0001\"");
	g_string_truncate(s, 0);
	us_prom_label_value(s, "a\"b\\c\nd");
	g_assert_cmpstr(s->str, ==, "\"a\\\"b\\\\c\\nd\"");
	g_string_free(s, TRUE);
}

static void
test_numbers(void)
{
	guint64 u;
	gint64 i;

	g_assert_true(us_parse_u64(" 42\n", &u));
	g_assert_cmpuint(u, ==, 42);
	g_assert_false(us_parse_u64("-1", &u));
	g_assert_false(us_parse_u64("4x", &u));
	g_assert_false(us_parse_u64("99999999999999999999999", &u));
	g_assert_true(us_parse_i64("-1\n", &i));
	g_assert_cmpint(i, ==, -1);
	g_assert_false(us_parse_i64("-", &i));
}

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/parse/cpulist", test_cpulist);
	g_test_add_func("/parse/comm", test_comm);
	g_test_add_func("/parse/name", test_name);
	g_test_add_func("/parse/stat", test_stat);
	g_test_add_func("/parse/schedstat", test_schedstat);
	g_test_add_func("/parse/status", test_status);
	g_test_add_func("/parse/cgroup", test_cgroup_parse);
	g_test_add_func("/parse/cgroup-paths", test_cgroup_paths);
	g_test_add_func("/parse/escape", test_escape);
	g_test_add_func("/parse/numbers", test_numbers);
	return g_test_run();
}
