# SPDX-License-Identifier: GPL-2.0-or-later
"""unsteal(8) (docs/manpages/unsteal.rst) and the unsteal binary agree.

The commands that 'unsteal --help' lists are the ones the man page's
SYNOPSIS lists.  For each command, the options that 'unsteal CMD --help'
prints are the options the man page documents for it under OPTIONS (same
short option, same argument name), and every option the SYNOPSIS gives a
command is one it accepts.  The options documented for 'unsteal' without a
command are accepted there.  The metric names the page spells out exist in
docs/unsteal.md.

OPTIONS is read by its subsections: one whose heading says "every command"
holds options of all commands, one whose heading names commands as
``literals`` holds theirs, any other the options of 'unsteal' alone.  An
option is a definition list term: an unindented line starting with ``-``.

Run: python3 test_manpage.py [UNSTEAL_BIN [RST]], or with UNSTEAL_BIN and
UNSTEAL_MANPAGE_RST in the environment (as meson does).
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

ok = tap.ok

BIN = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("UNSTEAL_BIN", ""))
RST = (sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
    "UNSTEAL_MANPAGE_RST", os.path.join(tap.ROOT, "docs", "manpages", "unsteal.rst")))
DOC = os.path.join(tap.ROOT, "docs", "unsteal.md")
TOP = None  # key of 'unsteal' without a command


def sections(text):
    """{title: {subtitle: [lines]}} of an RST document: '=' underlines open a
    section, '-' underlines a subsection; lines before the first subsection
    are under ''."""
    lines = text.splitlines()
    out = {}
    sec = sub = None
    i = 0
    while i < len(lines):
        line = lines[i]
        under = lines[i + 1] if i + 1 < len(lines) else ""
        title = line.strip()
        if (title and line == line.lstrip() and under and len(set(under)) == 1
                and under[0] in "=-" and len(under) >= len(title)
                and len(set(title)) > 1):
            if under[0] == "=":
                sec, sub = title, ""
                out[sec] = {sub: []}
            elif sec is not None:
                sub = title
                out[sec][sub] = []
            i += 2
            continue
        if sec is not None:
            out[sec][sub].append(line)
        i += 1
    return out


def paragraphs(lines):
    paras, cur = [], []
    for line in lines + [""]:
        if line.strip():
            cur.append(line.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    return paras


def synopsis(secs):
    """{command or TOP: set of long options} from the SYNOPSIS paragraphs."""
    out = {}
    for p in paragraphs([line for lines in secs.get("SYNOPSIS", {}).values() for line in lines]):
        m = re.match(r"``unsteal(?: ([a-z][a-z0-9-]*))?``", p)
        if m:
            out.setdefault(m.group(1) or TOP, set()).update(
                re.findall(r"``(--[a-z0-9][a-z0-9-]*)``", p))
    return out


def option_terms(lines):
    """{long: (short or None, argument name or None)} of the definition list
    terms in lines."""
    out = {}
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not line.startswith("``-") or not nxt.startswith((" ", "\t")):
            continue
        longs = re.findall(r"``(--[a-z0-9][a-z0-9-]*)``", line)
        shorts = re.findall(r"``(-[A-Za-z0-9])``", line)
        args = re.findall(r"\*([^*]+)\*", line)
        for lo in longs:
            out[lo] = (shorts[0] if shorts else None, args[-1] if args else None)
    return out


def documented(secs, commands):
    """{command or TOP: {long: (short, arg)}} from OPTIONS, and the headings
    read (with whom they were given to) for the diagnostics."""
    out = {c: {} for c in list(commands) + [TOP]}
    read = []
    for heading, lines in secs.get("OPTIONS", {}).items():
        terms = option_terms(lines)
        if not terms:
            continue
        named = re.findall(r"``([a-z][a-z0-9-]*)``", heading)
        if "every command" in heading:
            whom = list(commands)
        elif named:
            whom = named
        else:
            whom = [TOP]
        read.append(f"{heading!r} -> {whom}")
        for c in whom:
            out.setdefault(c, {}).update(terms)
    return out, read


def run(*args):
    p = subprocess.run([BIN] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def usage_commands(text):
    """The commands and the top-level options of 'unsteal --help'."""
    cmds, opts = [], set()
    for line in text.splitlines():
        m = re.match(r"^(?:Usage:)?\s+unsteal\s+(\S+)", line)
        if not m:
            continue
        if m.group(1).startswith("-"):
            opts.add(m.group(1))
        else:
            cmds.append(m.group(1))
    return cmds, opts


def help_options(text):
    """{long: (short or None, argument name or None)} of a GOption --help."""
    out = {}
    for m in re.finditer(r"^\s+(?:(-[A-Za-z0-9]), )?(--[a-z0-9][a-z0-9-]*)(?:=(\S+))?\s",
                         text, re.M):
        out[m.group(2)] = (m.group(1), m.group(3))
    return out


def names(d):
    return ", ".join(sorted(d)) or "none"


if not BIN or not os.access(BIN, os.X_OK):
    ok(False, "UNSTEAL_BIN names the unsteal binary", repr(BIN))
    sys.exit(tap.end())

rst = open(RST, encoding="utf-8").read()
secs = sections(rst)
syn = synopsis(secs)
rc, out, err = run("--help")
cmds, top_opts = usage_commands(out)
ok(rc == 0 and cmds, "'unsteal --help' lists the commands", f"rc {rc}\n{out}{err}")
man_cmds = [c for c in syn if c is not TOP]
ok(sorted(man_cmds) == sorted(cmds),
   "the man page's SYNOPSIS lists the commands of 'unsteal --help'",
   f"SYNOPSIS: {names(man_cmds)}\n'unsteal --help': {names(cmds)}")

doc, read = documented(secs, man_cmds)
ok(all(doc.get(c) for c in cmds), "OPTIONS documents options for every command",
   "\n".join(read) or "no OPTIONS subsections with options")

for cmd in cmds:
    rc, out, err = run(cmd, "--help")
    if rc != 0 and "this build has no" in err:
        ok(True, f"{cmd}: options # SKIP {err.strip()}")
        continue
    have = help_options(out)
    ok(rc == 0 and "--help" in have, f"'unsteal {cmd} --help' prints its options",
       f"rc {rc}\n{out}{err}")
    man = doc.get(cmd, {})
    missing = sorted(set(have) - set(man))
    ok(not missing, f"{cmd}: every option of '--help' is documented under OPTIONS",
       f"not in the man page: {', '.join(missing)}\nread: " + "; ".join(read))
    extra = sorted(set(man) - set(have))
    ok(not extra, f"{cmd}: every option the man page documents is accepted",
       f"not in 'unsteal {cmd} --help': {', '.join(extra)}")
    differ = [f"{lo}: man page {man[lo]}, --help {have[lo]}"
              for lo in sorted(set(man) & set(have)) if man[lo] != have[lo]]
    ok(not differ, f"{cmd}: short options and argument names agree", "\n".join(differ))
    in_syn = syn.get(cmd, set())
    ok(in_syn and in_syn <= set(have),
       f"{cmd}: the SYNOPSIS gives it only options it accepts",
       f"not accepted: {names(in_syn - set(have))}")
    left_out = sorted(set(have) - in_syn - {"--help"})
    ok(not left_out, f"{cmd}: the SYNOPSIS shows all its options",
       f"not in its SYNOPSIS line: {', '.join(left_out)}")

top = doc.get(TOP, {})
need = (top_opts | syn.get(TOP, set())) - set(top)
ok(top and not need, "the options of 'unsteal' without a command are documented",
   f"not documented: {names(need)}")
bad = []
for lo, (short, _arg) in sorted(top.items()):
    for opt in filter(None, (lo, short)):
        rc, out, err = run(opt)
        if rc != 0 or not out.strip():
            bad.append(f"unsteal {opt}: rc {rc} {err.strip()}")
ok(not bad, "'unsteal OPTION' works for each of them", "\n".join(bad))

metrics = set(re.findall(r"\bunsteal_[a-z_]*[a-z]\b", rst))
doc_text = open(DOC, encoding="utf-8").read()
unknown = sorted(m for m in metrics if f"`{m}`" not in doc_text)
ok(metrics and not unknown, "the metric names in the man page are in docs/unsteal.md",
   f"unknown: {', '.join(unknown)}")

sys.exit(tap.end())
