/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libvirt mode without a daemon: UUIDs, the cputune rule, the domain XML. */
#include <string.h>

#include "config.h"
#include "lvinfo.h"
#include "model.h"
#include "proc.h"

static void
test_uuid(void)
{
	static const gchar cmd[] = "qemu-system-x86_64\0-name\0guest=a\0-uuid\0"
				   "6695EB01F6A4830479AA97F2502E193F\0-m\0512\0";
	static const gchar two[] = "qemu\0-uuid\0bad\0-uuid\0"
				   "00000000-0000-0000-0000-0000000000Ab\0";
	static const gchar none[] = "qemu\0-name\0x\0-uuid";
	gchar *u;

	u = us_uuid_normalize("6695eb01-f6a4-8304-79aa-97f2502e193f");
	g_assert_cmpstr(u, ==, "6695eb01-f6a4-8304-79aa-97f2502e193f");
	g_free(u);
	u = us_uuid_normalize("6695EB01F6A4830479AA97F2502E193F");
	g_assert_cmpstr(u, ==, "6695eb01-f6a4-8304-79aa-97f2502e193f");
	g_free(u);
	g_assert_null(us_uuid_normalize("6695eb01-f6a4-8304-79aa-97f2502e193"));
	g_assert_null(us_uuid_normalize("6695eb01-f6a4-8304-79aa-97f2502e193f0"));
	g_assert_null(us_uuid_normalize("6695eb01-f6a4-8304-79aa-97f2502e193g"));
	g_assert_null(us_uuid_normalize("-6695eb01f6a4830479aa97f2502e193f"));
	g_assert_null(us_uuid_normalize("6695eb01f6a4830479aa97f2502e193f-"));
	g_assert_null(us_uuid_normalize(""));
	g_assert_null(us_uuid_normalize(NULL));

	u = us_proc_qemu_uuid(cmd, sizeof(cmd) - 1);
	g_assert_cmpstr(u, ==, "6695eb01-f6a4-8304-79aa-97f2502e193f");
	g_free(u);
	/* the last -uuid wins, as in QEMU; a bad one is no UUID */
	u = us_proc_qemu_uuid(two, sizeof(two) - 1);
	g_assert_cmpstr(u, ==, "00000000-0000-0000-0000-0000000000ab");
	g_free(u);
	g_assert_null(us_proc_qemu_uuid(none, sizeof(none) - 1));
	g_assert_null(us_proc_qemu_uuid(two, 11)); /* truncated cmdline */
}

static void
test_rule(void)
{
	UsCputune t = { 0 };
	UsLvDomain *d;
	gchar *s;

	g_assert_true(us_cputune_is_default(&t));
	t.shares_set = TRUE;
	t.shares = 1024;
	t.period = 100000;
	t.quota = -1;
	t.global_period = 100000;
	t.global_quota = -1;
	t.emulator_period = 50000;
	t.emulator_quota = 10000;  /* emulator and iothread values never count */
	t.iothread_quota = 5000;
	g_assert_true(us_cputune_is_default(&t));
	s = us_cputune_describe(&t);
	g_assert_cmpstr(s, ==, "shares=1024,period=100000,quota=-1,global_period=100000,"
			"global_quota=-1,emulator_period=50000,emulator_quota=10000,"
			"iothread_quota=5000");
	g_free(s);

	t = (UsCputune){ .shares_set = TRUE, .shares = 2048 };
	g_assert_false(us_cputune_is_default(&t));
	t = (UsCputune){ .shares_set = TRUE, .shares = 0 };
	g_assert_false(us_cputune_is_default(&t));  /* set, and not 1024 */
	t = (UsCputune){ .period = 50000 };
	g_assert_false(us_cputune_is_default(&t));
	t = (UsCputune){ .quota = 20000 };
	g_assert_false(us_cputune_is_default(&t));
	t = (UsCputune){ .global_period = 200000 };
	g_assert_false(us_cputune_is_default(&t));
	t = (UsCputune){ .global_quota = 1 };
	g_assert_false(us_cputune_is_default(&t));
	s = us_cputune_describe(&(UsCputune){ 0 });
	g_assert_cmpstr(s, ==, "");
	g_free(s);

	t = (UsCputune){ .quota = 20000 };
	g_assert_true(us_cputune_is_vcpu_bandwidth_only(&t));
	t = (UsCputune){ .period = 50000, .emulator_quota = 10000 };
	g_assert_true(us_cputune_is_vcpu_bandwidth_only(&t));
	t = (UsCputune){ .quota = 20000, .global_quota = 100000 };
	g_assert_false(us_cputune_is_vcpu_bandwidth_only(&t));
	t = (UsCputune){ .quota = 20000, .shares_set = TRUE, .shares = 2048 };
	g_assert_false(us_cputune_is_vcpu_bandwidth_only(&t));
	g_assert_false(us_cputune_is_vcpu_bandwidth_only(&(UsCputune){ 0 }));

	d = us_lv_domain_new();
	g_assert_null(us_expected_placement(d, 1));   /* tunables unknown */
	d->have_tune = TRUE;
	g_assert_cmpstr(us_expected_placement(d, 1), ==, "shared");
	d->tune.quota = 20000;
	/* a vCPU quota alone: nested on cgroup v1, its own groups on v2 */
	g_assert_cmpstr(us_expected_placement(d, 1), ==, "nested");
	g_assert_cmpstr(us_expected_placement(d, 2), ==, "own");
	g_assert_null(us_expected_placement(d, 0));
	d->tune.global_quota = 100000;
	g_assert_cmpstr(us_expected_placement(d, 1), ==, "own");
	d->tune.global_quota = 0;
	g_assert_null(us_expected_placement(NULL, 1));
	/* vCPU entries stay sorted by id */
	us_lv_domain_vcpu(d, 3, TRUE)->order = 7;
	us_lv_domain_vcpu(d, 1, TRUE);
	g_assert_cmpint(g_array_index(d->vcpus, UsLvVcpu, 0).id, ==, 1);
	g_assert_cmpint(us_lv_domain_vcpu_const(d, 3)->order, ==, 7);
	g_assert_null(us_lv_domain_vcpu(d, 2, FALSE));
	us_lv_domain_free(d);
}

#ifdef HAVE_LIBVIRT
static void
test_xml(void)
{
	UsCputune t;
	GArray *v = g_array_new(FALSE, TRUE, sizeof(UsLvVcpu));
	gchar *err = NULL;

	/* no <cputune>: defaults; <vcpu current> without <vcpus> */
	g_assert_true(us_domain_xml_parse(
		"<domain type='qemu'><name>a</name>"
		"<vcpu placement='static' current='2'>3</vcpu></domain>", &t, v, &err));
	g_assert_true(us_cputune_is_default(&t));
	g_assert_false(t.shares_set);
	g_assert_cmpuint(v->len, ==, 3);
	g_assert_true(g_array_index(v, UsLvVcpu, 1).enabled);
	g_assert_false(g_array_index(v, UsLvVcpu, 2).enabled);
	g_assert_cmpint(g_array_index(v, UsLvVcpu, 2).order, ==, -1);

	/* a live XML: every value, pinning elements ignored, hotplug order */
	g_assert_true(us_domain_xml_parse(
		"<domain type='kvm' id='3'><name>b</name><vcpu current='2'>3</vcpu>"
		"<vcpus><vcpu id='0' enabled='yes' hotpluggable='no' order='1'/>"
		"<vcpu id='2' enabled='yes' hotpluggable='yes' order='2'/>"
		"<vcpu id='1' enabled='no' hotpluggable='yes'/></vcpus>"
		"<cputune><vcpupin vcpu='0' cpuset='1'/><shares>2048</shares>"
		"<period> 50000 </period><quota>-1</quota>"
		"<global_period>100000</global_period><global_quota>30000</global_quota>"
		"<emulator_period>100000</emulator_period><emulator_quota>5000</emulator_quota>"
		"<iothread_period>100000</iothread_period><iothread_quota>-1</iothread_quota>"
		"<emulatorpin cpuset='0'/></cputune></domain>", &t, v, &err));
	g_assert_true(t.shares_set);
	g_assert_cmpuint(t.shares, ==, 2048);
	g_assert_cmpuint(t.period, ==, 50000);
	g_assert_cmpint(t.quota, ==, -1);
	g_assert_cmpuint(t.global_period, ==, 100000);
	g_assert_cmpint(t.global_quota, ==, 30000);
	g_assert_cmpint(t.emulator_quota, ==, 5000);
	g_assert_cmpint(t.iothread_quota, ==, -1);
	g_assert_false(us_cputune_is_default(&t));
	g_assert_cmpuint(v->len, ==, 3);
	g_assert_cmpint(g_array_index(v, UsLvVcpu, 1).id, ==, 1);   /* sorted */
	g_assert_false(g_array_index(v, UsLvVcpu, 1).enabled);
	g_assert_cmpint(g_array_index(v, UsLvVcpu, 2).id, ==, 2);
	g_assert_cmpint(g_array_index(v, UsLvVcpu, 2).order, ==, 2);

	/* only emulator tunables: still default for the vCPU rule */
	g_assert_true(us_domain_xml_parse(
		"<domain><cputune><emulator_quota>1000</emulator_quota></cputune></domain>",
		&t, v, &err));
	g_assert_true(us_cputune_is_default(&t));
	g_assert_cmpuint(v->len, ==, 0);

	g_assert_false(us_domain_xml_parse("<domain><cputune><quota>lots</quota>"
					   "</cputune></domain>", &t, v, &err));
	g_assert_cmpstr(err, ==, "<cputune><quota>: not an integer: 'lots'");
	g_clear_pointer(&err, g_free);
	g_assert_false(us_domain_xml_parse("<domain><cputune>", &t, v, &err));
	g_assert_cmpstr(err, ==, "domain XML: not well-formed");
	g_clear_pointer(&err, g_free);
	g_assert_false(us_domain_xml_parse("<network/>", &t, v, &err));
	g_assert_cmpstr(err, ==, "domain XML: no <domain> root element");
	g_clear_pointer(&err, g_free);
	g_array_free(v, TRUE);
}
#endif

int
main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/lvinfo/uuid", test_uuid);
	g_test_add_func("/lvinfo/rule", test_rule);
#ifdef HAVE_LIBVIRT
	g_test_add_func("/lvinfo/xml", test_xml);
#endif
	return g_test_run();
}
