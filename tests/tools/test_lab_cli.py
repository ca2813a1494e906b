# SPDX-License-Identifier: GPL-2.0-or-later
"""tools/lab's command line (tools/lablib/commands.py) against the docs.

1. Every command line the docs quote parses: each 'tools/lab ...' in a code
   block or code span of README.md, HACKING.md, ci/README.md and docs/*.md.
   An option's value in upper case ('--out DIR') stands for any value and
   is replaced by one.  A line with another placeholder (an upper-case word
   such as NAME, '...', '[', '|', '$'), or that fails only with such a
   value, is a synopsis: it is not parsed, but the options it names must
   be its command's.  Text shlex cannot split is skipped.  Command words
   alone ('tools/lab bench', 'tools/lab check'), or followed by options
   ('tools/lab guest --workload'), name a command or an option, which must
   exist.
2. docs/lab.md's generated reference is what commands.reference() renders
   now, so that it cannot go stale ('tools/lab help --markdown --write').
3. Every command has a function; bench takes a benchmark, and each
   benchmark only the options it reads.
4. tools/lab itself: importing lablib.commands imports lablib.config only;
   'tools/lab', 'tools/lab help' print help; a LabError is one 'lab: error:'
   line and exit status 1.

Nothing runs a command: the lines are only parsed.
"""

import contextlib
import difflib
import glob
import io
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

tap.setup("unsteal-lab-cli-")
from lablib import commands  # noqa: E402

ok = tap.ok
ROOT = tap.ROOT
LAB = os.path.join(ROOT, "tools", "lab")
DOCS = ["README.md", "HACKING.md", os.path.join("ci", "README.md")] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")
CALL = re.compile(r"(?:^|\s)tools/lab(?=\s|$)(.*)", re.S)
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|\.\.\.|[\[\]|<>$*]")


def without_generated(text):
    """text without the generated reference (test 2 checks that part)."""
    begin, end = text.find(commands.MARKERS[0]), text.find(commands.MARKERS[1])
    if begin < 0 or end < begin:
        return text
    return text[:begin] + "\n" * text.count("\n", begin, end) + text[end:]


def quoted(text):
    """[(line number, command text after 'tools/lab')] of a Markdown text."""
    out = []

    def line_of(pos):
        return text.count("\n", 0, pos) + 1  # rest below keeps the lines where they are

    for m in FENCE.finditer(text):
        block = m.group(1).replace("\\\n", " ")  # continued lines
        first = line_of(m.start(1))
        for i, line in enumerate(block.split("\n")):
            line = re.sub(r"(^|\s)#.*", "", line)  # a comment
            for part in re.split(r"&&|;", line):
                c = CALL.search(part)
                if c:
                    out.append((first + i, c.group(1)))
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in SPAN.finditer(text):
        span = m.group(1).replace("\\|", "|").replace("\n", " ")
        for part in re.split(r"&&|;", span):
            c = CALL.search(part)
            if c:
                out.append((line_of(m.start()), c.group(1)))
    return out


def parse(argv, parser):
    """(namespace, None) or (None, argparse's error message)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(argv), None
    except SystemExit:
        return None, err.getvalue().strip().splitlines()[-1:] or ["exit"]


def command_of(argv, parser):
    """The command that argv's leading words name and its parser."""
    p, words = parser, []
    for w in argv:
        if w not in commands.subcommands(p):
            break
        p = commands.subcommands(p)[w]
        words.append(w)
    return " ".join(words), p


def names_command(argv, parser):
    """True when argv names a command, or an option of one: command words,
    each a command of the one before, then options of the last, each
    followed by no value or one of its choices ('tools/lab guest
    --workload', 'tools/lab guest --workload balloon')."""
    p, i = parser, 0
    while i < len(argv) and argv[i] in commands.subcommands(p):
        p = commands.subcommands(p)[argv[i]]
        i += 1
    options = {o: a for a in p._actions for o in a.option_strings}
    while i < len(argv):
        a = options.get(argv[i].split("=")[0])
        if a is None:
            return False
        value = argv[i].partition("=")[2] or (argv[i + 1] if i + 1 < len(argv)
                                              and not argv[i + 1].startswith("-") else None)
        if value is not None and (a.nargs == 0 or a.choices is not None
                                  and value not in a.choices):
            return False
        i += 1 if "=" in argv[i] or value is None else 2
    return True


parser = commands.build_parser()

# 1. The docs' command lines
seen = {}
for doc in DOCS:
    with open(os.path.join(ROOT, doc)) as fh:
        text = without_generated(fh.read())
    for line, rest in quoted(text):
        seen.setdefault(" ".join(rest.split()), f"{doc}:{line}")
ok(len(seen) > 50, f"the docs quote tools/lab command lines ({len(seen)} distinct found)",
   "\n".join(seen))
skipped = 0
for cmd, where in seen.items():
    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        print(f"# skipped, not split by shlex ({e}): {where}: tools/lab {cmd}")
        skipped += 1
        continue
    # An upper-case word as an option's value ('--out DIR') stands for any
    # value: the line is checked with one in its place, when that parses
    values = [i for i, w in enumerate(argv)
              if i and argv[i - 1].startswith("--") and re.fullmatch(r"[A-Z][A-Z0-9_]*", w)]
    filled = [("placeholder" if i in values else w) for i, w in enumerate(argv)]
    if any(PLACEHOLDER.search(w) for w in filled) or values and parse(filled, parser)[0] is None:
        print(f"# skipped, a synopsis: {where}: tools/lab {cmd}")
        skipped += 1
        path, p = command_of(argv, parser)
        if path and not commands.subcommands(p):
            known = {o for a in p._actions for o in a.option_strings}
            unknown = [o for o in re.findall(r"--[\w-]+", cmd) if o not in known]
            ok(not unknown, f"{where}: the synopsis names options of 'tools/lab {path}' only",
               unknown)
        continue
    args, err = parse(filled, parser)
    if args is None and names_command(argv, parser):
        ok(True, f"{where}: 'tools/lab {cmd}' names a command or an option of one")
        continue
    good = args is not None and (args.cmd is None or callable(getattr(args, "func", None)))
    ok(good, f"{where}: 'tools/lab {cmd}' parses", "\n".join(err or ["no function"]))
print(f"# {skipped} of {len(seen)} quoted command lines skipped as synopses")

# 2. docs/lab.md's reference is the generator's
with open(commands.LAB_MD) as fh:
    lab_md = fh.read()
have = commands.generated_section(lab_md)
want = commands.reference(parser)
ok(have is not None, "docs/lab.md has the generated reference's markers", commands.MARKERS)
ok(have == want, "docs/lab.md's command reference is what the parser renders now "
   "(else: tools/lab help --markdown --write)",
   "".join(difflib.unified_diff((have or "").splitlines(True), want.splitlines(True),
                                "docs/lab.md", "tools/lab help --markdown", n=1)))
for path, p in commands.commands(parser):
    ok(f"\n### {' '.join(path)}\n" in want and p.prog in want,
       f"the reference has a section with the usage of 'tools/lab {' '.join(path)}'")
ok("--kvm-guest KERNEL INITRD" in want and "('" not in want,
   "an option of two values shows its two names, as argparse's usage does",
   [ln for ln in want.splitlines() if "('" in ln][:3])

# 3. Functions, bench's benchmarks and their options
for path, p in commands.commands(parser):
    if commands.subcommands(p):
        args, err = parse(list(path), parser)
        ok(args is None and "required" in " ".join(err),
           f"'tools/lab {' '.join(path)}' wants a subcommand", err)
    else:
        func = p.get_default("func")
        ok(callable(func) and func.__name__ == "cmd_" + path[0],
           f"'tools/lab {' '.join(path)}' has its function", func)
ok(list(commands.subcommands(commands.subcommands(parser)["bench"]))
   == ["sched", "guests", "control", "all", "wakers", "mixed", "tuned", "exporter", "scale", "host"],
   "bench's benchmarks", list(commands.subcommands(commands.subcommands(parser)["bench"])))
for line in ("bench control --seconds 5", "bench wakers --replot", "bench sched --action cap",
             "bench mixed --mix 2-1-1", "bench tuned --windows 3", "bench exporter --tuning none",
             "bench sched --smoke", "bench wakers --mix a --tcg multi"):
    args, err = parse(line.split(), parser)
    ok(args is None and "unrecognized arguments" in " ".join(err),
       f"'tools/lab {line}': an option the benchmark does not read is refused", err)
for line, want_args in (
        ("bench scale --smoke", {"what": "scale", "smoke": True, "numa_balancing": "both",
                                 "tcg": None, "in_guest": False, "replot": False}),
        ("bench scale --in-guest --mix smoke --tuning none --reps 1 --seconds 2 "
         "--numa-balancing off", {"in_guest": True, "mix": ["smoke"], "tuning": ["none"],
                                  "reps": 1, "seconds": 2, "numa_balancing": "off"}),
        ("bench sched --mix 2-1-1 --mix 4-2-2 --reps 3", {"what": "sched", "reps": 3,
                                                          "mix": ["2-1-1", "4-2-2"],
                                                          "seconds": None, "top_shares": None}),
        ("bench wakers --mix 2-1-1-linux", {"what": "wakers", "mix": "2-1-1-linux"}),
        ("bench mixed --action cap --action shares-4x --windows 20",
         {"action": ["cap", "shares-4x"], "windows": 20, "reps": None}),
        ("bench all --replot --out d", {"what": "all", "replot": True, "out": "d"}),
        ("test --tier unit", {"tier": "unit", "quick": False}),
        ("test", {"tier": "full"}),
        ("virsh vcpupin lab-small 0 0 --live", {"args": ["vcpupin", "lab-small", "0", "0",
                                                          "--live"]}),
        ("start --vcpu-cgroup=per-host", {"vcpu_cgroup": "per-host"})):
    args, err = parse(line.split(), parser)
    got = {k: getattr(args, k, "(missing)") for k in want_args} if args else err
    ok(got == want_args, f"'tools/lab {line}' gives {want_args}", got)

# 4. tools/lab and main()
probe = subprocess.run(
    [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
     "import lablib.commands; print(' '.join(sorted(m for m in sys.modules "
     "if m.startswith('lablib'))))", os.path.join(ROOT, "tools")],
    capture_output=True, text=True, timeout=60)
ok(probe.stdout.split() == ["lablib", "lablib.commands", "lablib.config"],
   "importing lablib.commands imports lablib.config only (main() loads it first)",
   probe.stdout + probe.stderr)
with open(LAB) as fh:
    script = fh.read()
ok(script.startswith("#!/usr/bin/python3\n# SPDX-License-Identifier: GPL-2.0-or-later\n")
   and "noqa" not in script and not re.search(r"^\s*(from|import) lablib", script, re.M)
   and re.findall(r"[\"']lablib[.\w]*[\"']", script) == ['"lablib.commands"'],
   "tools/lab imports lablib.commands only, with no noqa", script)
for argv in ([], ["help"], ["help", "bench", "scale"]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = commands.main(argv)
    ok(rc == 0 and "usage: tools/lab" in out.getvalue(),
       f"'tools/lab {' '.join(argv)}' prints help, exit status 0", out.getvalue()[:500])
for argv, rc_want, err_want in ((["help", "nope"], 1, "lab: error: tools/lab has no command"),
                                (["bench"], 2, "the following arguments are required: WHAT"),
                                ([], 0, "")):
    p = subprocess.run([sys.executable, LAB] + argv, capture_output=True, text=True, timeout=60)
    ok(p.returncode == rc_want and err_want in p.stderr
       and (rc_want != 1 or len(p.stderr.splitlines()) == 1),
       f"tools/lab {' '.join(argv)}: exit status {rc_want}" + (f", '{err_want}'" if err_want
                                                               else ""),
       f"exit status {p.returncode}\n{p.stderr}")

sys.exit(tap.end())
