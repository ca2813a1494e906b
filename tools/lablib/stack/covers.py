# SPDX-License-Identifier: GPL-2.0-or-later
"""Postings and cover letters: how a patch stack goes to a mailing list.

A stack is applied as one sequence, but may be posted as several series that
a maintainer can take one at a time (a fix ahead of a feature, a preparatory
change ahead of its user).  The series file says where each posting starts
with a marker line, a comment to quilt and git am:

    #@ posting swapoff-skip
    0002-mm-swapfile-skip-address-spaces-without-swap-entries.patch

A posting's cover letter is 0000-cover-letter-NAME.patch beside the
patches; a stack without markers is one posting whose cover letter, if it
has one, is 0000-cover-letter.patch.  Cover letters are kept out of the
series.  Their sender, date, subject and text are written by hand; export
regenerates the rest (shortlog and diffstat) from the posting's commits.
"""

import os
import re
from dataclasses import dataclass

from ..common import LabError, run

COVER = "0000-cover-letter.patch"
COVER_PREFIX = "0000-cover-letter"
MARKER = "#@ posting "
COVER_SUBJECT_RE = re.compile(r"^Subject: \[PATCH 0+/(\d+)\] (.*)$", re.M)
HDR_RE = re.compile(r"^Subject:\s*(?:\[PATCH[^]]*\]\s*)?(.*)$", re.M)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


@dataclass
class Posting:
    """One series as posted: a name (None for a stack posted whole), its
    patches in order, and the file name of its cover letter."""
    name: str
    patches: list

    @property
    def cover(self):
        return COVER if self.name is None else f"{COVER_PREFIX}-{self.name}.patch"


def is_cover(filename):
    return os.path.basename(filename).startswith(COVER_PREFIX)


def read_postings(stack_dir):
    """The stack's postings, from the series file's markers."""
    path = os.path.join(stack_dir, "series")
    if not os.path.exists(path):
        return []
    postings = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.startswith(MARKER):
                name = line[len(MARKER):].strip()
                if postings and postings[0].name is None:
                    raise LabError(f"{path}:{n}: patches come before the first posting marker")
                if not NAME_RE.match(name) or any(p.name == name for p in postings):
                    raise LabError(f"{path}:{n}: bad or repeated posting name {name!r} "
                                   "(lower case letters, digits, '.' and '-')")
                postings.append(Posting(name, []))
                continue
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if not postings:
                postings.append(Posting(None, []))
            postings[-1].patches.append(line)
    empty = [p.name for p in postings if not p.patches]
    if empty:
        raise LabError(f"{path}: posting(s) without patches: {', '.join(empty)}")
    return postings


def series_text(postings):
    """The series file for these postings."""
    out = []
    for p in postings:
        if p.name is not None:
            out.append(MARKER + p.name)
        out.extend(p.patches)
    return "".join(line + "\n" for line in out)


def subject(text):
    """A patch's subject without its [PATCH] tag, header continuation lines joined."""
    m = HDR_RE.search(text)
    if not m:
        return ""
    subj = m.group(1)
    for line in text[m.end() + 1:].split("\n"):
        if not line[:1].isspace() or not line.strip():
            break
        subj += " " + line.strip()
    return subj.strip()


def file_subject(path):
    with open(path, errors="replace") as fh:
        return subject(fh.read())


def regroup(old_postings, old_subjects, new_names, new_subjects):
    """Postings for freshly exported patches: a patch whose subject an old
    patch had stays in that patch's posting; a new one joins the posting of
    the patch before it (the first posting when it comes first)."""
    if not old_postings or old_postings[0].name is None:
        return [Posting(None, list(new_names))]
    where = {}
    for p in old_postings:
        for name in p.patches:
            where.setdefault(old_subjects.get(name), p.name)
    order = [p.name for p in old_postings]
    groups = {name: [] for name in order}
    current = order[0]
    for name, subj in zip(new_names, new_subjects):
        current = where.get(subj, current)
        if any(groups[n] for n in order[order.index(current) + 1:]):
            raise LabError(f"export: {name} ({subj!r}) belongs to posting {current!r}, but "
                           "comes after patches of a later posting; reorder the commits")
        groups[current].append(name)
    return [Posting(name, groups[name]) for name in order if groups[name]]


def _cover_parts(path, text):
    """The hand-written parts of a cover letter: From and Date lines, subject, text."""
    sender = re.search(r"^From: .*$", text, re.M)
    date = re.search(r"^Date: .*$", text, re.M)
    subj = COVER_SUBJECT_RE.search(text)
    if not sender or not date or not subj:
        raise LabError(f"{path}: no 'From:', 'Date:' or 'Subject: [PATCH 00/N] ...' line")
    body = text[text.index("\n\n", subj.end()) + 2:]
    shortlog = re.search(r"^\S.* \(\d+\):$", body, re.M)
    if not shortlog:
        raise LabError(f"{path}: no shortlog ('Author (N):' line) after the text")
    return sender.group(0), date.group(0), subj.group(2), body[:shortlog.start()]


def write_covers(stack_dir, wt, postings):
    """Regenerate each posting's cover letter's shortlog and diffstat over
    the posting's commits, keeping its text, sender and date (git would put
    the work tree's identity and now)."""
    commits = run(["git", "rev-list", "--reverse", "base..HEAD"], cwd=wt,
                  capture=True).stdout.split()
    start = 0
    for p in postings:
        first, last = commits[start], commits[start + len(p.patches) - 1]
        start += len(p.patches)
        path = os.path.join(stack_dir, p.cover)
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            sender, date, subj, blurb = _cover_parts(path, fh.read())
        out = run(["git", "format-patch", "--cover-letter", "--zero-commit", "--no-signature",
                   "--numbered", "--stdout", "--full-index", "--no-renames",
                   f"{first}^..{last}"], cwd=wt, capture=True).stdout
        cover = out[:out.index("\nFrom 0000000000000000000000000000000000000000", 1) + 1]
        cover = re.sub(r"^From: .*$", lambda _: sender, cover, count=1, flags=re.M)
        cover = re.sub(r"^Date: .*$", lambda _: date, cover, count=1, flags=re.M)
        cover = cover.replace("*** SUBJECT HERE ***", subj, 1)
        cover = cover.replace("*** BLURB HERE ***\n\n", blurb, 1)
        with open(path, "w") as fh:
            fh.write(cover)


def sender(path):
    """(name, email) of a patch file's or cover letter's From: header, or None."""
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as fh:
        hdrs = fh.read().partition("\n\n")[0]
    m = re.search(r"^From: (.+?) <([^>]+)>$", hdrs, re.M)
    return (m.group(1), m.group(2)) if m else None


def cover_sender(stack_dir):
    """The sender of the stack's first cover letter, or None."""
    names = [p.cover for p in read_postings(stack_dir)] or [COVER]
    return next(filter(None, (sender(os.path.join(stack_dir, n)) for n in names)), None)


def check_covers(stack_dir):
    """Each cover letter counts and names its posting's patches; a stack
    posted as several series has a cover letter for every posting of more
    than one patch, and no cover letter of a posting that does not exist."""
    postings = read_postings(stack_dir)
    problems = []
    known = {p.cover for p in postings} | ({COVER} if not postings else set())
    for name in sorted(os.listdir(stack_dir)):
        if is_cover(name) and name.endswith(".patch") and name not in known:
            problems.append(f"{stack_dir}/{name}: a cover letter of no posting in the series")
    for p in postings:
        path = os.path.join(stack_dir, p.cover)
        if not os.path.exists(path):
            if p.name is not None and len(p.patches) > 1:
                problems.append(f"{path}: missing; posting {p.name!r} has "
                                f"{len(p.patches)} patches")
            continue
        with open(path) as fh:
            text = fh.read()
        m = COVER_SUBJECT_RE.search(text)
        if not m:
            problems.append(f"{path}: no 'Subject: [PATCH 00/N] ...' line")
            continue
        if int(m.group(1)) != len(p.patches):
            problems.append(f"{path}: announces {m.group(1)} patches, the posting has "
                            f"{len(p.patches)}; run tools/lab export")
        # The shortlog wraps long subjects; compare with whitespace folded.
        listed = " ".join(text.split())
        for name in p.patches:
            subj = " ".join(file_subject(os.path.join(stack_dir, name)).split())
            if subj not in listed:
                problems.append(f"{path}: does not list '{subj}' ({name}); run tools/lab export")
    return problems
