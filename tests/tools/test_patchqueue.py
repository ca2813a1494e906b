# SPDX-License-Identifier: GPL-2.0-or-later
"""The patch-stack tooling on a tiny stack of its own (no network, no root).

A throw-away base tarball is placed in a private cache with its sha256 in a
BASE file, so fetch_base never needs the archive.  Checks: a work tree is the
base plus the series as commits; export round-trips byte for byte; check
names a patch that does not apply or lacks a Signed-off-by; a wrong sha256
pin is reported with the BASE file's name.
"""

import hashlib
import io
import os
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402

WORK = tap.setup("unsteal-stack-test-")
ROOT = tap.ROOT
ok = tap.ok

from lablib import common  # noqa: E402
from lablib.stack import covers, patchqueue  # noqa: E402
from lablib.common import LabError  # noqa: E402


def make_base(version="1.0"):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, text in [(f"demo-{version}/hello.c", "int main(void) { return 0; }\n"),
                           (f"demo-{version}/README", "demo\n")]:
            blob = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(blob))
    raw = data.getvalue()
    src = os.path.join(os.environ["UNSTEAL_CACHE"], "sources")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, f"demo_{version}.orig.tar.xz"), "wb") as fh:
        fh.write(raw)
    return hashlib.sha256(raw).hexdigest()


def make_stack(sha, d=None, name="demo", version="1.0"):
    d = d or os.path.join(WORK, "demo-patches")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "BASE"), "w") as fh:
        fh.write(f"name={name}\npackage=demo\nversion={version}-1\ntopdir=demo-{version}\n"
                 f"orig=demo_{version}.orig.tar.xz\norig_sha256={sha}\n")
    open(os.path.join(d, "series"), "w").close()
    return d


def git(wt, *args):
    return subprocess.run(["git", "-C", wt, "-c", "user.name=T", "-c", "user.email=t@t.invalid"]
                          + list(args), check=True, capture_output=True, text=True).stdout


def commit(wt, path, text, subject, body, signoff=True):
    with open(os.path.join(wt, path), "a") as fh:
        fh.write(text)
    git(wt, "add", path)
    msg = f"{subject}\n\n{body}\n" + ("\nSigned-off-by: T <t@t.invalid>\n" if signoff else "")
    git(wt, "commit", "-q", "-m", msg)


COVER_HEAD = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
              "From: T <t@t.invalid>\nDate: Thu, 1 Jan 2026 00:00:00 +0000\n")


def fails(fn, words, what):
    """ok when fn() raises a LabError whose text holds words."""
    try:
        fn()
        ok(False, what, "no error")
    except LabError as e:
        ok(words in str(e), what, e)


def passes(fn, what):
    try:
        fn()
        ok(True, what)
    except LabError as e:
        ok(False, what, e)


def postings(sha):
    """A stack posted as two series: markers in the series file, a cover
    letter per posting of more than one patch, each regenerated over its
    own patches by export and checked by check."""
    d = make_stack(sha, os.path.join(WORK, "posted-patches"), "demo-posted")
    wt = patchqueue.ensure_worktree(d)
    commit(wt, "hello.c", "/* fix */\n", "demo: Fix the comment",
           "A fix that goes to the list on its own, ahead of the feature.")
    commit(wt, "README", "feature\n", "docs: Describe the feature",
           "The first patch of the feature, which is posted as a series.")
    commit(wt, "hello.c", "/* feature */\n", "demo: Add the feature",
           "The second patch of the feature, so that its series has two.")
    names = patchqueue.export(d)
    with open(os.path.join(d, "series"), "w") as fh:
        fh.write(f"#@ posting fix\n{names[0]}\n#@ posting feature\n{names[1]}\n{names[2]}\n")
    fails(lambda: patchqueue.check(d), "0000-cover-letter-feature.patch: missing",
          "check asks for the cover letter of a posting of two patches")
    cover = os.path.join(d, "0000-cover-letter-feature.patch")
    with open(cover, "w") as fh:
        fh.write(COVER_HEAD + "Subject: [PATCH 00/9] demo: The feature\n\n"
                 "Why the feature exists.\n\nT (1):\n  old\n")
    patchqueue.export(d)
    text = open(cover).read()
    ok("[PATCH 0/2] demo: The feature" in text and "Why the feature exists." in text and
       "  docs: Describe the feature\n" in text and "  demo: Add the feature\n" in text and
       "Fix the comment" not in text,
       "export regenerates a posting's cover letter over its own patches only", text)
    ok(open(os.path.join(d, "series")).read() ==
       f"#@ posting fix\n{names[0]}\n#@ posting feature\n{names[1]}\n{names[2]}\n",
       "export keeps the posting markers in the series file")
    passes(lambda: patchqueue.check(d), "a stack posted as two series passes check")

    # A new commit joins the posting of the commit before it.
    commit(wt, "README", "more\n", "docs: Extend the feature's text",
           "A third patch of the feature, added after the series was split.")
    names = patchqueue.export(d)
    ok(covers.read_postings(d)[1].patches == names[1:] and
       "[PATCH 0/3] demo: The feature" in open(cover).read(),
       "a new commit joins its predecessor's posting and cover letter")

    # Cover letters of postings that are not there, and markers out of order.
    orphan = os.path.join(d, "0000-cover-letter-gone.patch")
    with open(orphan, "w") as fh:
        fh.write(open(cover).read())
    fails(lambda: patchqueue.check(d), "0000-cover-letter-gone.patch: a cover letter of no posting",
          "check names a cover letter of no posting")
    os.unlink(orphan)
    series = os.path.join(d, "series")
    good = open(series).read()
    with open(series, "w") as fh:
        fh.write(names[0] + "\n" + good)
    fails(lambda: covers.read_postings(d), "before the first posting marker",
          "a patch before the first marker is refused")
    with open(series, "w") as fh:
        fh.write(good)
    old = [covers.Posting("a", ["1"]), covers.Posting("b", ["2"])]
    fails(lambda: covers.regroup(old, {"1": "one", "2": "two"}, ["x", "y"], ["two", "one"]),
          "comes after patches of a later posting",
          "export refuses a commit moved behind a later posting's")


def main():
    sha = make_base()
    d = make_stack(sha)
    wt = patchqueue.ensure_worktree(d)
    ok(os.path.exists(os.path.join(wt, "hello.c")), "work tree holds the base")
    ok(git(wt, "tag").split() == ["base"], "the base is tagged 'base'")

    commit(wt, "hello.c", "/* one */\n", "demo: Add the first comment",
           "The first comment explains nothing but exists for the test.")
    commit(wt, "README", "two\n", "docs: Extend the README",
           "A second patch so that the series has an order to keep.")
    names = patchqueue.export(d)
    ok(len(names) == 2 and open(os.path.join(d, "series")).read().split() == names,
       "export writes two patches and the series", names)
    first = {x: open(os.path.join(d, x)).read() for x in names}
    ok(all(x.startswith("From 0000000000000000000000000000000000000000") for x in first.values()),
       "exported patches carry no commit id")
    ok(all("\n-- \n" not in x for x in first.values()), "exported patches carry no version trailer")
    patchqueue.export(d)
    again = {x: open(os.path.join(d, x)).read() for x in names}
    ok(first == again, "exporting again changes nothing")

    # A work tree made from the series commits as the series' author.
    wt = patchqueue.ensure_worktree(d, force=True)
    ident = subprocess.run(["git", "-C", wt, "var", "GIT_AUTHOR_IDENT"], check=True,
                           capture_output=True, text=True).stdout
    ok(ident.startswith("T <t@t.invalid> "),
       "a new commit in the work tree is authored by the series' author", ident)

    try:
        patchqueue.check(d)
        ok(True, "a good series passes check")
    except LabError as e:
        ok(False, "a good series passes check", e)

    # A cover letter: its text is kept, its shortlog follows the series,
    # and check notices when it no longer announces the series.
    cover = os.path.join(d, covers.COVER)
    with open(cover, "w") as fh:
        fh.write("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
                 "From: T <t@t.invalid>\nDate: Thu, 1 Jan 2026 00:00:00 +0000\n"
                 "Subject: [PATCH 00/1] demo: Comments for everyone\n\n"
                 "Why the series exists, written by hand.\n\nT (1):\n  old\n")
    patchqueue.export(d)
    text = open(cover).read()
    ok("[PATCH 0/2] demo: Comments for everyone" in text and
       "Why the series exists, written by hand." in text and
       "  demo: Add the first comment\n" in text and "  docs: Extend the README\n" in text and
       "Date: Thu, 1 Jan 2026 00:00:00 +0000" in text and "hello.c" in text,
       "export keeps the cover letter's text and regenerates its shortlog", text)
    ok("\nFrom: T <t@t.invalid>\n" in text,
       "export keeps the cover letter's sender, not the work tree's identity", text[:200])
    ok(open(os.path.join(d, "series")).read().split() == names and os.path.exists(cover),
       "the cover letter is kept out of the series")
    try:
        patchqueue.check(d)
        ok(True, "a series with a current cover letter passes check")
    except LabError as e:
        ok(False, "a series with a current cover letter passes check", e)
    with open(cover, "w") as fh:
        fh.write(text.replace("[PATCH 0/2]", "[PATCH 0/3]"))
    try:
        patchqueue.check(d)
        ok(False, "check notices a stale cover letter")
    except LabError as e:
        ok("announces 3 patches" in str(e), "check notices a stale cover letter", e)
    # The first patch may be a backport that keeps its upstream author: a
    # work tree's commits are then the cover letter's sender's.
    with open(cover, "w") as fh:
        fh.write(text.replace("From: T <t@t.invalid>", "From: Series Owner <so@t.invalid>"))
    wt = patchqueue.ensure_worktree(d, force=True)
    ident = subprocess.run(["git", "-C", wt, "var", "GIT_AUTHOR_IDENT"], check=True,
                           capture_output=True, text=True).stdout
    ok(ident.startswith("Series Owner <so@t.invalid> "),
       "with a cover letter, work tree commits are authored by its sender", ident)
    os.unlink(cover)

    # A work tree created from the exported stack has the same commits.
    wt2 = patchqueue.ensure_worktree(d, force=True)
    ok(git(wt2, "log", "--format=%s", "base..").split("\n")[:2] ==
       ["docs: Extend the README", "demo: Add the first comment"],
       "the series re-applies as the same commits")

    # A second base of the same project, nested in the first stack's
    # directory (the libvirt bases sit side by side in libvirt-patches/, the
    # harder nested layout must work too): a work tree of its own, and
    # neither export nor check of one stack touches the other's patches.
    d2 = make_stack(make_base("2.0"), os.path.join(d, "old-base"), "demo-2.0", "2.0")
    wt3 = patchqueue.ensure_worktree(d2)
    ok(wt3 != patchqueue.worktree_path(d) and os.path.exists(os.path.join(wt3, "hello.c")),
       "the second base gets its own work tree", wt3)
    commit(wt3, "hello.c", "/* ported */\n", "demo: Add the first comment",
           "The same change, ported to the older base of the project.")
    names2 = patchqueue.export(d2)
    ok(sorted(os.listdir(d2)) == sorted(["BASE", "series"] + names2),
       "export of the second base writes into its own directory", os.listdir(d2))
    patchqueue.export(d)
    ok(set(os.listdir(d)) == {"BASE", "series", "old-base"} | set(names) and
       os.listdir(d2) and sorted(os.listdir(d2)) == sorted(["BASE", "series"] + names2),
       "export of the first stack leaves the nested one alone", os.listdir(d))
    try:
        patchqueue.check(d)
        patchqueue.check(d2)
        ok(True, "both bases pass check")
    except LabError as e:
        ok(False, "both bases pass check", e)
    postings(sha)

    # A broken patch is named: one whose context does not match, one
    # without Signed-off-by.
    bad = os.path.join(d, names[1])
    good_text = open(bad).read()
    for broken, words, what in [
        (good_text.replace("\n demo\n+two", "\n not the base\n+two"), "does not apply",
         "check names the patch that does not apply"),
        (good_text.replace("Signed-off-by: T <t@t.invalid>\n", ""), "Signed-off-by",
         "check names the patch without Signed-off-by"),
    ]:
        with open(bad, "w") as fh:
            fh.write(broken)
        try:
            patchqueue.check(d)
            ok(False, what, "check passed")
        except LabError as e:
            ok(names[1] in str(e) and words in str(e), what, e)
        with open(bad, "w") as fh:
            fh.write(good_text)

    # A wrong pin is reported with the BASE file.  The cached tarball no
    # longer matches, and the (made-up) package is not in any apt index.
    base = os.path.join(d, "BASE")
    text = open(base).read()
    with open(base, "w") as fh:
        fh.write(text.replace(sha, "0" * 64))
    try:
        patchqueue.check(d)
        ok(False, "a wrong sha256 pin fails")
    except LabError as e:
        ok(base in str(e), "a wrong sha256 pin is reported with the BASE file", e)
    except Exception as e:  # noqa: BLE001
        ok(False, "a wrong sha256 pin is reported with the BASE file", repr(e))

    # The project's own stacks: one object each, loaded from BASE, looked up
    # by the keys tools/lab takes; a project's default stack keeps the
    # unsuffixed _build paths.
    from lablib.stack import stacks
    got = {s.key: (os.path.relpath(s.dir, ROOT), s.name, s.package, s.suffix)
           for s in stacks.known()}
    ok(got == {"libvirt": ("libvirt-patches/debian-13", "libvirt", "libvirt", ""),
               "libvirt-9.0": ("libvirt-patches/debian-12", "libvirt-9.0", "libvirt",
                               "-libvirt-9.0"),
               "kernel": ("kernel-patches", "linux", "linux", "")},
       "the declared stacks, their BASE names and packages, their path suffixes", got)
    ok(stacks.default("libvirt").key == "libvirt" and stacks.default("linux").key == "kernel"
       and [s.key for s in stacks.of_package("libvirt")] == ["libvirt", "libvirt-9.0"],
       "each project's default stack, libvirt's stacks in order")
    other = stacks.at(d)
    ok(other.key == d and other.worktree == patchqueue.worktree_path(d) and
       stacks.at(os.path.join(ROOT, "libvirt-patches", "debian-12")) is stacks.get("libvirt-9.0"),
       "a stack is found by its directory; an undeclared one is named by it", other)
    return tap.end()


sys.exit(main())
