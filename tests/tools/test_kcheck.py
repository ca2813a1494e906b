# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab check kernel: checkpatch's findings against checkpatch.accepted,
and a matrix fragment's options checked by their last value.

A stand-in checkpatch.pl (a small Perl script in a scratch tree) prints the
findings each scratch patch asks for, in checkpatch's --terse --show-types
form; tools/lab test runs the real one on the real series.  The check must
pass a clean series and accepted findings, and fail on a finding nobody
accepted, on a count that differs, on an accepted finding that is gone, on
a malformed or doubled entry and on a helper that crashed; a matrix
configuration fails when it does not build or builds with a warning.
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-kcheck-test-")
ok = tap.ok

from lablib.build import kcheck, kernel  # noqa: E402
from lablib.common import LabError  # noqa: E402

TREE = os.path.join(WORK, "tree")
STACK = os.path.join(WORK, "stack")
os.makedirs(os.path.join(TREE, "scripts"))
os.makedirs(STACK)
# Prints every "find: LEVEL:TYPE: message" line of the patch as a finding;
# "crash" makes it print a traceback on stderr, as a failing spdxcheck.py does.
with open(os.path.join(TREE, "scripts", "checkpatch.pl"), "w") as fh:
    fh.write(r'''
my $patch = $ARGV[-1]; my $n = 0; my $bad = 0;
open(my $f, '<', $patch) or die;
while (<$f>) {
    $n++;
    if (/^find: (\w+):(\w+): (.*)$/) { print "$patch:$n: $1:$2: $3\n"; $bad = 1; }
    if (/^crash$/) { print STDERR "Traceback (most recent call last):\n  boom\n"; }
}
exit $bad;
''')
kcheck._worktree = lambda stack_dir: TREE


def series(patches, accepted=None):
    for name in os.listdir(STACK):
        os.unlink(os.path.join(STACK, name))
    for name, body in patches.items():
        with open(os.path.join(STACK, name), "w") as fh:
            fh.write(body)
    with open(os.path.join(STACK, "series"), "w") as fh:
        fh.write("".join(n + "\n" for n in patches))
    if accepted is not None:
        with open(os.path.join(STACK, kcheck.ACCEPTED), "w") as fh:
            fh.write("# comment\n\n" + accepted)


def check():
    try:
        return kcheck.checkpatch(STACK), None
    except LabError as e:
        return None, str(e)


series({"0001-a.patch": "clean\n", "0002-b.patch": "clean\n"})
res, err = check()
ok(res == 2 and err is None, "a clean series passes without an accepted list", err)

two = "find: WARNING:UNKNOWN_COMMIT_ID: Unknown commit id 'abc'\n" * 2
series({"0001-a.patch": two, "0002-b.patch": "clean\n"},
       "0001-a.patch UNKNOWN_COMMIT_ID 2 upstream ids\n")
res, err = check()
ok(res == 2 and err is None, "accepted findings pass", err)

series({"0001-a.patch": two, "0002-b.patch": "find: CHECK:PARENTHESIS_ALIGNMENT: Alignment\n"},
       "0001-a.patch UNKNOWN_COMMIT_ID 2 upstream ids\n")
ok(check()[1] is not None and "0002-b.patch: CHECK:PARENTHESIS_ALIGNMENT" in check()[1],
   "a finding nobody accepted fails, naming the patch and the type", check()[1])

series({"0001-a.patch": two + two, "0002-b.patch": "clean\n"},
       "0001-a.patch UNKNOWN_COMMIT_ID 2 upstream ids\n")
err = check()[1]
ok(err is not None and "4 UNKNOWN_COMMIT_ID" in err and "accepts 2" in err,
   "more findings of an accepted type than accepted fail", err)

series({"0001-a.patch": "clean\n", "0002-b.patch": "clean\n"},
       "0001-a.patch UNKNOWN_COMMIT_ID 2 upstream ids\n"
       "0009-gone.patch FILE_PATH_CHANGES 1 a patch since dropped\n")
err = check()[1]
ok(err is not None and "no longer reports" in err and "0009-gone.patch" in err
   and "not in the series" in err,
   "an accepted finding that checkpatch no longer reports fails", err)

series({"0001-a.patch": "clean\n"}, "0001-a.patch UNKNOWN_COMMIT_ID two ids\n")
err = check()[1]
ok(err is not None and "PATCH TYPE COUNT reason" in err, "a malformed entry is refused", err)

series({"0001-a.patch": two}, "0001-a.patch UNKNOWN_COMMIT_ID 2 ids\n"
       "0001-a.patch UNKNOWN_COMMIT_ID 2 the same again\n")
err = check()[1]
ok(err is not None and "listed twice" in err, "an entry listed twice is refused", err)

series({"0001-a.patch": "crash\n"})
err = check()[1]
ok(err is not None and "helper failed" in err and "boom" in err,
   "a crash of checkpatch's helper fails instead of skipping its check", err)

# A matrix fragment turns off what lab.config turns on: the last value counts.
dotconfig = os.path.join(WORK, "dotconfig")
frag = "CONFIG_NUMA=y\nCONFIG_SWAP=y\n# matrix\nCONFIG_NUMA=n\n"


def verify(have):
    """kernel.verify_config of frag against a .config holding have: None if
    it passes, else its error."""
    with open(dotconfig, "w") as fh:
        fh.write(have)
    try:
        kernel.verify_config(dotconfig, frag)
        return None
    except LabError as e:
        return str(e)


err = verify("CONFIG_SWAP=y\n# CONFIG_NUMA is not set\n")
ok(err is None, "an option turned off by a later fragment is checked as off", err)
err = verify("CONFIG_SWAP=y\nCONFIG_NUMA=y\n")
ok(err is not None and "CONFIG_NUMA should be off" in err,
   "an option that stayed on against the last fragment fails", err)

# build_matrix: a configuration that does not build, or builds with a
# compiler warning, fails; the others count as built.
LOGS = os.path.join(os.environ["UNSTEAL_BUILD"], "logs")
os.makedirs(LOGS, exist_ok=True)


def fake_build(patched=True, debug=False, extra=()):
    name = extra[0][len("matrix-"):]
    if name == "numa-off":
        raise LabError("make failed")
    with open(os.path.join(LOGS, f"kernel-patched-matrix-{name}.log"), "w") as fh:
        fh.write("  CC mm/migrate.o\n" + ("mm/mempolicy.c:12:5: warning: unused variable 'x'\n"
                                         if name == "migration-off" else ""))
    return "/fake/bzImage"


kernel.build = fake_build
with contextlib.redirect_stdout(sys.stderr):
    got = kcheck.build_matrix()
ok(got == (len(kcheck.matrix()) - 2, 2),
   "a matrix configuration that fails to build or warns is counted as failed", got)

names = kcheck.matrix()
ok({"numa-off", "migration-off", "ksm-memcg"} <= set(names),
   "the matrix has NUMA off, NUMA without migration, KSM with memcg", names)

sys.exit(tap.end())
