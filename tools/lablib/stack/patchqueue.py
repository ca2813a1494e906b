# SPDX-License-Identifier: GPL-2.0-or-later
"""Patch stacks: a pinned base plus a quilt-like series of git format-patch files.

A stack directory (libvirt-patches/debian-13/, kernel-patches/, or any
directory with a BASE and a series file; tools/lablib/stack/stacks.py lists them) is turned into a git work tree under _build/src/NAME:
the base tarball is committed once as the tag 'base', then every patch of the
series is applied with 'git am'.  Maintainers edit commits there and export
them back with 'tools/lab export', which rewrites the numbered patch files and
the series file with stable output (no version trailer, no commit ids).
"""

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile

from ..common import LabError, build_dir, cache_dir, mkdirs, run, step
from . import covers, sources, stacks

GIT_ID = {
    "GIT_AUTHOR_NAME": "unsteal lab", "GIT_AUTHOR_EMAIL": "lab@unsteal.invalid",
    "GIT_COMMITTER_NAME": "unsteal lab", "GIT_COMMITTER_EMAIL": "lab@unsteal.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


def git(args, cwd, **kw):
    """git as the lab runs it.  Never an automatic gc: the bases are 90,000
    loose objects (linux), so the 'git am' of a series in a fresh clone
    started a background repack of the whole tree (a 269 MB pack, about a
    minute and a half of both CPUs, beside the kernel build that followed)
    in every work tree and check tree, which are thrown away or rebuilt."""
    return run(["git", "-c", "core.autocrlf=false", "-c", "advice.detachedHead=false",
                "-c", "gc.auto=0", "-c", "maintenance.auto=false"] + args, cwd=cwd, **kw)


def read_series(stack_dir):
    """The stack's patch files in order, whichever postings they are in."""
    out = [name for p in covers.read_postings(stack_dir) for name in p.patches]
    for name in out:
        if not os.path.exists(os.path.join(stack_dir, name)):
            raise LabError(f"{os.path.join(stack_dir, 'series')}: patch {name} does not exist")
    return out


def series_hash(stack_dir):
    h = hashlib.sha256()
    for name in ["BASE", "series"] + read_series(stack_dir):
        p = os.path.join(stack_dir, name)
        if os.path.exists(p):
            h.update(name.encode() + b"\0")
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def worktree_path(stack_dir):
    return stacks.at(stack_dir).worktree


def _base_repo(stack_dir):
    """A pristine git repository of the base tarball, cached across work trees."""
    base, paths = sources.fetch_base(stack_dir)
    untracked = _untracked(base)
    tag = hashlib.sha256(" ".join(untracked).encode()).hexdigest()[:8] if untracked else "all"
    repo = os.path.join(cache_dir(), "bases", f"{base['name']}-{base['version']}-{tag}.git")
    if _has_tag(repo, "base"):
        return base, repo
    mkdirs(os.path.dirname(repo))
    # Several lab commands (or clones) may want the same base at once.
    with open(repo + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _has_tag(repo, "base"):
            _commit_base(base, paths, untracked, repo)
    return base, repo


def _commit_base(base, paths, untracked, repo):
    step(f"worktree: committing the {base['name']} {base['version']} base (one-off, cached)")
    tmp = tempfile.mkdtemp(dir=os.path.dirname(repo), prefix=os.path.basename(repo) + ".tmp-")
    run(["tar", "-xf", paths["orig"], "-C", tmp, "--strip-components=1"], quiet=True)
    for rel in untracked:
        shutil.rmtree(os.path.join(tmp, rel))
    git(["init", "-q", "-b", "main"], cwd=tmp)
    git(["add", "-A", "-f"], cwd=tmp, quiet=True)
    git(["commit", "-q", "--no-verify", "-m",
         f"base: {base['name']} {base['version']} ({os.path.basename(paths['orig'])})"],
        cwd=tmp, env=GIT_ID)
    git(["tag", "base"], cwd=tmp)
    shutil.rmtree(repo, ignore_errors=True)
    git(["clone", "-q", "--bare", tmp, repo], cwd=cache_dir())
    shutil.rmtree(tmp)


def _untracked(base):
    """Paths of the tarball kept out of git, as upstream keeps its submodules.

    libvirt's release tarball carries subprojects/keycodemapdb, a git
    submodule upstream; committed as plain files, libvirt's syntax-check
    (which lists files with 'git ls-files') would lint a foreign project.
    """
    return [p.strip().strip("/") for p in base.get("untracked", "").split() if p.strip()]


def add_untracked(stack_dir, tree):
    base, paths = sources.fetch_base(stack_dir)
    untracked = _untracked(base)
    if not untracked:
        return
    run(["tar", "-xf", paths["orig"], "-C", tree, "--strip-components=1"]
        + [f"{base['topdir']}/{rel}" for rel in untracked], quiet=True)
    # A linked work tree (git worktree add) shares the exclude file of its
    # repository: ask git where it is.
    exclude = git(["rev-parse", "--git-path", "info/exclude"], cwd=tree,
                  capture=True).stdout.strip()
    exclude = os.path.join(tree, exclude)
    have = open(exclude).read() if os.path.exists(exclude) else ""
    lines = "".join(f"/{rel}/\n" for rel in untracked if f"/{rel}/\n" not in have)
    if lines:
        mkdirs(os.path.dirname(exclude))
        with open(exclude, "a") as fh:
            fh.write(lines)


def _has_tag(repo, tag):
    if not os.path.isdir(repo):
        return False
    p = git(["rev-parse", "-q", "--verify", f"refs/tags/{tag}"], cwd=repo, check=False,
            capture=True)
    return p.returncode == 0


def _state_path(wt):
    return os.path.join(wt, ".git", "unsteal-state.json")


def _load_state(wt):
    try:
        with open(_state_path(wt)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _head(wt):
    return git(["rev-parse", "HEAD"], cwd=wt, capture=True).stdout.strip()


def apply_series(stack_dir, wt, patches=None, on_applied=None):
    """git am the series (or the given prefix of it) onto the work tree; name the bad patch."""
    patches = read_series(stack_dir) if patches is None else patches
    for i, name in enumerate(patches, 1):
        p = git(["am", "-q", "--keep-cr", "--committer-date-is-author-date",
                 os.path.join(stack_dir, name)], cwd=wt, check=False, capture=True,
                env={k: v for k, v in GIT_ID.items() if k.startswith("GIT_COMMITTER_")})
        if p.returncode != 0:
            git(["am", "--abort"], cwd=wt, check=False, capture=True)
            raise LabError(f"patch {i}/{len(patches)} {stack_dir}/{name} does not apply:\n"
                           + (p.stdout + p.stderr).strip())
        if on_applied:
            on_applied(i, name)


def _series_author(stack_dir):
    """(name, email) of the series' author: a commit made in the work tree is
    the series' own, not the lab's (the base commit uses GIT_ID).  A cover
    letter's From: when there is one, since the first patch may be a
    backport that keeps its upstream author; else the first patch's."""
    first = [os.path.join(stack_dir, name) for name in read_series(stack_dir)[:1]]
    return (covers.cover_sender(stack_dir) or (first and covers.sender(first[0]))
            or (GIT_ID["GIT_AUTHOR_NAME"], GIT_ID["GIT_AUTHOR_EMAIL"]))


def ensure_worktree(stack_dir, force=False, quiet_reuse=False):
    """Create _build/src/NAME with the series applied, or reuse it when up to date."""
    st = stacks.at(stack_dir)
    wt = st.worktree
    want = series_hash(stack_dir)
    state = _load_state(wt) if os.path.isdir(wt) else None
    if os.path.isdir(wt) and not state and not force:
        raise LabError(f"{wt} exists but was not made completely (a patch did not apply?); "
                       f"finish it by hand (git am -3 ..., then tools/lab export "
                       f"{st.key}) or recreate it with --force")
    if state and not force:
        if state.get("series") == want:
            if not quiet_reuse:
                step(f"worktree: {wt} is up to date with {st.rel}/series")
            return wt
        if _head(wt) != state.get("head"):
            raise LabError(
                f"{wt} has commits that are not exported, and {stack_dir} changed since the work "
                f"tree was made.\n  export them first: tools/lab export "
                f"{st.key}\n  or throw them away: tools/lab worktree "
                f"{st.key} --force")
        step(f"worktree: {st.rel} changed; recreating {wt}")
    base, repo = _base_repo(stack_dir)
    shutil.rmtree(wt, ignore_errors=True)
    mkdirs(os.path.dirname(wt))
    step(f"worktree: cloning the base into {wt}")
    git(["clone", "-q", "--local", repo, wt], cwd=build_dir(), quiet=True)
    name, email = _series_author(stack_dir)
    git(["config", "user.name", name], cwd=wt)
    git(["config", "user.email", email], cwd=wt)
    git(["fetch", "-q", "origin", "refs/tags/base:refs/tags/base"], cwd=wt, check=False,
        capture=True)
    add_untracked(stack_dir, wt)
    patches = read_series(stack_dir)
    step(f"worktree: applying {len(patches)} patch(es) from {st.rel}/series")
    apply_series(stack_dir, wt, patches)
    with open(_state_path(wt), "w") as fh:
        json.dump({"series": want, "head": _head(wt)}, fh)
    return wt


def export(stack_dir):
    """Write the work tree's commits since 'base' back as the stack's patches and series."""
    st = stacks.at(stack_dir)
    wt = st.worktree
    if not os.path.isdir(wt):
        raise LabError(f"no work tree at {wt}; create one with tools/lab worktree {st.key}")
    dirty = git(["status", "--porcelain", "--untracked-files=no"], cwd=wt,
                capture=True).stdout.strip()
    if dirty:
        raise LabError(f"{wt} has uncommitted changes; commit them (git commit / "
                       f"git commit --fixup) before exporting:\n{dirty}")
    old_postings = covers.read_postings(stack_dir)
    old_subjects = {name: covers.file_subject(os.path.join(stack_dir, name))
                    for name in read_series(stack_dir)}
    tmp = tempfile.mkdtemp(dir=build_dir(), prefix="export-")
    try:
        git(["format-patch", "-q", "--zero-commit", "--no-signature", "-N",
             "--full-index", "--no-renames", "-o", tmp, "base..HEAD"], cwd=wt)
        new = sorted(os.listdir(tmp))
        postings = covers.regroup(old_postings, old_subjects, new,
                                  [covers.file_subject(os.path.join(tmp, n)) for n in new])
        for old in read_series(stack_dir) + [os.path.basename(p) for p in glob.glob(
                os.path.join(stack_dir, "[0-9][0-9][0-9][0-9]-*.patch"))]:
            path = os.path.join(stack_dir, old)
            if not covers.is_cover(old) and os.path.exists(path):
                os.unlink(path)
        for name in new:
            shutil.move(os.path.join(tmp, name), os.path.join(stack_dir, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(stack_dir, "series"), "w") as fh:
        fh.write(covers.series_text(postings))
    covers.write_covers(stack_dir, wt, postings)
    with open(_state_path(wt), "w") as fh:
        json.dump({"series": series_hash(stack_dir), "head": _head(wt)}, fh)
    step(f"export: wrote {len(new)} patch(es) and series to {stack_dir}")
    return new


def lint_patch(path):
    """Problems with one patch's message: subject, body saying why, Signed-off-by."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    problems = []
    head, sep, _ = text.partition("\n---\n")
    if not sep:
        head, sep, _ = text.partition("\ndiff --git")
    hdrs, _, body = head.partition("\n\n")
    m = covers.HDR_RE.search(hdrs)
    subject = m.group(1).strip() if m else ""
    if not subject:
        problems.append("no Subject")
    elif not re.match(r"^[A-Za-z0-9_./,{} -]+: \S", subject):
        problems.append(f"subject {subject!r} lacks a 'subsystem: ' prefix")
    lines = [ln for ln in body.splitlines() if ln.strip()]
    sob = [ln for ln in lines if ln.startswith("Signed-off-by: ")]
    prose = [ln for ln in lines if not re.match(r"^[A-Z][A-Za-z-]+: ", ln)]
    if not sob:
        problems.append("no Signed-off-by")
    if len(" ".join(prose).split()) < 8:
        problems.append("no body saying why (fewer than 8 words)")
    if "\ndiff --git" not in text:
        problems.append("no diff")
    return problems


def _apply_to_index(stack_dir, repo, tree, patches):
    """Apply the series in order to the index of a clone that checks
    nothing out ('git apply --cached', which 'git am' runs against the
    index too): whether the patches apply, without writing the base's
    files (80,000 for linux; the work tree that the builds use is checked
    out once, by ensure_worktree())."""
    git(["clone", "-q", "--local", "--no-checkout", repo, tree], cwd=build_dir(), quiet=True)
    git(["read-tree", "HEAD"], cwd=tree)
    for i, name in enumerate(patches, 1):
        p = git(["apply", "--cached", os.path.join(stack_dir, name)], cwd=tree, check=False,
                capture=True)
        if p.returncode != 0:
            raise LabError(f"patch {i}/{len(patches)} {stack_dir}/{name} does not apply:\n"
                           + (p.stdout + p.stderr).strip())


def _apply_building_each(stack_dir, repo, tree, patches, build_each):
    """git am the series in a checked-out clone, building the base and each
    prefix with build_each(tree, what)."""
    git(["clone", "-q", "--local", repo, tree], cwd=build_dir(), quiet=True)
    git(["config", "user.name", "unsteal lab"], cwd=tree)
    git(["config", "user.email", "lab@unsteal.invalid"], cwd=tree)
    add_untracked(stack_dir, tree)

    def built(i, name):
        step(f"check: building with patches 1..{i} ({name})")
        build_each(tree, f"patch {i}/{len(patches)} {stack_dir}/{name}")

    if patches:
        step("check: building the unpatched base first")
        build_each(tree, "the unpatched base")
    apply_series(stack_dir, tree, patches, on_applied=built)


def check(stack_dir, build_each=None):
    """Every patch lints clean and applies in order; optionally each prefix builds."""
    patches = read_series(stack_dir)
    listed = set(patches)
    stray = [os.path.basename(p) for p in glob.glob(os.path.join(stack_dir, "*.patch"))
             if os.path.basename(p) not in listed and not covers.is_cover(p)]
    errors = covers.check_covers(stack_dir)
    if stray:
        errors.append(f"{stack_dir}: patches not in series: {' '.join(stray)}")
    for name in patches:
        for prob in lint_patch(os.path.join(stack_dir, name)):
            errors.append(f"{stack_dir}/{name}: {prob}")
    if errors:
        raise LabError("patch check failed:\n  " + "\n  ".join(errors))
    base, repo = _base_repo(stack_dir)
    tree = os.path.join(build_dir(), "check", base["name"])
    shutil.rmtree(tree, ignore_errors=True)
    mkdirs(os.path.dirname(tree))
    if build_each:
        _apply_building_each(stack_dir, repo, tree, patches, build_each)
    else:
        _apply_to_index(stack_dir, repo, tree, patches)
    step(f"check: {stack_dir}: {len(patches)} patch(es) lint clean and apply in order")
    shutil.rmtree(tree, ignore_errors=True)
