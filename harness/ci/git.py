"""Git plumbing for CI: what a change touched, and what a revision holds, read out of git.

Contract: git is only ever called with argument lists (no shell), a revision is resolved to a
commit (:func:`resolve_commit`) before it is used, and files of a revision are read from git
objects (``ls-tree`` then one ``cat-file --batch``), never from the work tree. Nothing under a
results folder may be a symbolic link or a submodule, in git (:func:`committed_files`) or on
disk on the way down to it (:func:`relative_to_root`). Reads only; writes nothing but temporary
files.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from harness.core import yamlio
from harness.core.errors import HarnessError
from harness.core.tempdirs import run_directory
from harness.records import RunRecord
from harness.results.records_io import read_records
from harness.submission.package import MANIFEST

__all__ = [
    "MANIFEST",
    "SUBMISSIONS",
    "PackageChanges",
    "all_packages",
    "changed_packages",
    "committed_files",
    "committed_records",
    "find_repo_root",
    "manifest_name_at",
    "merge_base",
    "refuse_links_on_the_way",
    "relative_to_root",
    "resolve_commit",
    "work_tree_changes",
]

#: Where submission packages live, relative to the repository root.
SUBMISSIONS = PurePosixPath("submissions")


def _git(args: Sequence[str], repo_root: Path, *, stdin: bytes | None = None) -> bytes:
    """Run ``git ARGS`` in ``repo_root`` (argument list, no shell) and return its stdout."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=repo_root,
            input=stdin,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise HarnessError("git not found on PATH; `zsl ci` needs git") from None
    except OSError as err:
        raise HarnessError(f"cannot run git in {repo_root}: {err}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HarnessError(
            f"git {args[0]} failed in {repo_root}: {message[-1] if message else 'no message'}"
        )
    return done.stdout


def find_repo_root(start: Path) -> Path:
    """The top folder of the git work tree that holds ``start``."""
    start = Path(start).absolute()
    if not start.is_dir():
        raise HarnessError(f"{start}: not a folder")
    try:
        out = _git(["rev-parse", "--show-toplevel"], start)
    except HarnessError:
        raise HarnessError(f"{start} is not inside a git repository") from None
    return Path(out.decode("utf-8", "surrogateescape").strip())


def resolve_commit(ref: str, repo_root: Path) -> str:
    """The commit id ``ref`` names in the repository at ``repo_root``."""
    if not ref or ref.startswith("-"):
        # A leading dash would reach git as an option.
        raise HarnessError(f"--base {ref!r}: not a git revision")
    try:
        out = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo_root)
    except HarnessError:
        raise HarnessError(
            f"--base {ref!r}: unknown revision in {repo_root} (in CI, check out with "
            "fetch-depth: 0 so the base branch is there)"
        ) from None
    return out.decode("ascii").strip()


def merge_base(commit: str, repo_root: Path) -> str:
    """The commit where ``HEAD`` forked from ``commit``: what ``commit...HEAD`` compares with."""
    return _git(["merge-base", commit, "HEAD"], repo_root).decode("ascii").strip()


def work_tree_changes(
    commit: str, paths: Sequence[str], repo_root: Path, *, untracked: Sequence[str] = ()
) -> list[str]:
    """Files under ``paths`` whose work-tree content differs from ``commit`` (committed since or
    not), plus the untracked, not ignored files under ``untracked``: sorted, repository-relative."""
    changed = _git(["diff", "--name-only", "-z", commit, "--", *paths], repo_root)
    if untracked:
        listing = ["ls-files", "--others", "--exclude-standard", "-z", "--", *untracked]
        changed += _git(listing, repo_root)
    return sorted({raw.decode("utf-8", "surrogateescape") for raw in changed.split(b"\0")} - {""})


def _exists_at(commit: str, path: str, repo_root: Path) -> bool:
    done = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}:{path}"],
        cwd=repo_root,
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


@dataclass(frozen=True)
class PackageChanges:
    """Package folders (repository-relative POSIX paths) a change added, modified or deleted."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    @property
    def changed(self) -> tuple[str, ...]:
        """Added and modified packages, sorted: what CI validates and scores."""
        return tuple(sorted((*self.added, *self.modified)))


def changed_packages(
    base: str, repo_root: Path, *, submissions: str | PurePosixPath = SUBMISSIONS
) -> PackageChanges:
    """The submission packages that differ between ``base`` and ``HEAD``.

    Compares ``base...HEAD`` (the changes on ``HEAD`` since it forked from ``base``, as a pull
    request shows them); uncommitted changes are not seen. A package is a folder directly under
    ``submissions``. One that exists at ``HEAD`` is *added* when ``base`` had no ``submission.yaml``
    in it and *modified* otherwise (a folder without ``submission.yaml`` is reported too, so its
    validation fails loudly instead of being skipped); one that is gone at ``HEAD`` but had a
    ``submission.yaml`` at ``base`` is *deleted*. Renames count as a deletion plus an addition.

    Raises
    ------
    HarnessError
        ``repo_root`` is not in a git repository, ``base`` is unknown, or git fails.
    """
    root = find_repo_root(repo_root)
    commit = resolve_commit(base, root)
    prefix = PurePosixPath(submissions)
    out = _git(
        ["diff", "--name-only", "--no-renames", "-z", f"{commit}...HEAD", "--", f"{prefix}/"],
        root,
    )
    folders = set()
    for raw in out.split(b"\0"):
        if not raw:
            continue
        path = PurePosixPath(raw.decode("utf-8", "surrogateescape"))
        parts = path.relative_to(prefix).parts
        if len(parts) >= 2:  # files directly under submissions/ belong to no package
            folders.add(str(prefix / parts[0]))
    added, modified, deleted = [], [], []
    for folder in sorted(folders):
        if _exists_at("HEAD", folder, root):
            if _exists_at(commit, f"{folder}/{MANIFEST}", root):
                modified.append(folder)
            else:
                added.append(folder)
        elif _exists_at(commit, f"{folder}/{MANIFEST}", root):
            deleted.append(folder)
    return PackageChanges(tuple(added), tuple(modified), tuple(deleted))


def all_packages(
    repo_root: Path, *, submissions: str | PurePosixPath = SUBMISSIONS
) -> PackageChanges:
    """Every package folder with a ``submission.yaml`` at ``HEAD``, reported as modified."""
    root = find_repo_root(repo_root)
    prefix = PurePosixPath(submissions)
    out = _git(["ls-tree", "-z", "--name-only", "HEAD", "--", f"{prefix}/"], root)
    folders = [raw.decode("utf-8", "surrogateescape") for raw in out.split(b"\0") if raw]
    return PackageChanges(
        modified=tuple(f for f in sorted(folders) if _exists_at("HEAD", f"{f}/{MANIFEST}", root))
    )


def manifest_name_at(commit: str, folder: str, repo_root: Path) -> str | None:
    """The ``name`` in ``folder/submission.yaml`` at ``commit``, or None if unreadable."""
    try:
        text = _git(["cat-file", "blob", f"{commit}:{folder}/{MANIFEST}"], repo_root)
        data = yamlio.load(text.decode("utf-8"), f"{commit}:{folder}/{MANIFEST}")
    except (HarnessError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def committed_records(base: str, results_dir: Path, repo_root: Path) -> list[RunRecord]:
    """The run records committed under ``results_dir`` at revision ``base``.

    The files are read out of git (:func:`committed_files`) into a temporary folder with the
    same layout and loaded by :func:`harness.results.records_io.read_records`, so they pass the
    same checks as records read from disk. No records at ``base``: ``[]``.

    Raises
    ------
    HarnessError
        As :func:`committed_files` (a link or a submodule under ``results_dir``), or a record
        is not valid.
    """
    files = committed_files(base, results_dir, repo_root)
    if not files:
        return []
    with run_directory("zsl-ci-base-") as tmp:  # a pull request's files: any tree
        for path, data in files.items():
            target = Path(tmp, *path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return read_records(Path(tmp))


#: git tree entry modes of plain files; a link is 120000 and a submodule 160000.
_FILE_MODES = frozenset({"100644", "100755"})


def committed_files(base: str, results_dir: Path, repo_root: Path) -> dict[PurePosixPath, bytes]:
    """Every file under ``results_dir`` at revision ``base``: path relative to it -> bytes.

    Read with ``ls-tree`` then one ``cat-file --batch``, never from the work tree.

    Raises
    ------
    HarnessError
        An entry is a symbolic link (mode 120000) or a submodule: a folder of records holds
        only plain files, and a committed link would make an export write outside the
        repository once checked out; a path has an empty, ``.`` or ``..`` component.
    """
    root = find_repo_root(repo_root)
    commit = resolve_commit(base, root)
    relative = relative_to_root(results_dir, root)
    listing = _git(["ls-tree", "-r", "-z", "--full-tree", commit, "--", f"{relative}/"], root)
    blobs: list[tuple[str, PurePosixPath]] = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        meta, _, name = raw.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split()
        path = PurePosixPath(name.decode("utf-8", "surrogateescape")).relative_to(relative)
        where = f"{base}:{relative}/{path}"
        if any(part in ("", ".", "..") for part in path.parts):
            raise HarnessError(f"{where}: unsafe path in the git tree")
        if kind != "blob" or mode not in _FILE_MODES:
            what = {"120000": "a symbolic link", "160000": "a submodule"}.get(mode, f"mode {mode}")
            raise HarnessError(
                f"{where}: is {what} in git; a folder of run records holds only plain files "
                "(a committed link would make an export write outside the repository)"
            )
        blobs.append((oid, path))
    if not blobs:
        return {}
    contents = _read_blobs([oid for oid, _ in blobs], root)
    return {path: data for (_, path), data in zip(blobs, contents, strict=True)}


class _OutsideRepository(HarnessError):
    pass


def relative_to_root(path: Path, root: Path) -> PurePosixPath:
    """``path`` relative to the work tree ``root``, refusing a symbolic link below ``root``.

    Only the part above ``root`` is resolved (a checkout may sit under a linked folder); below
    it, every existing component is checked with ``lstat``, so a committed link
    (``leaderboard -> /home/...``) cannot send a read or a write elsewhere.
    """
    real_root = root.resolve()
    absolute = Path(os.path.abspath(path))  # lexical: ".." is taken away before any lookup
    for ancestor in reversed((absolute, *absolute.parents)):
        if ancestor.resolve() == real_root:
            relative = absolute.relative_to(ancestor)
            break
    else:
        raise _OutsideRepository(f"{path} is outside the git repository at {root}")
    current = real_root
    for part in relative.parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break  # nothing below exists yet: nothing to follow
        except OSError as err:
            raise HarnessError(f"{current}: cannot read ({err.strerror or err})") from None
        if stat.S_ISLNK(mode):
            raise HarnessError(
                f"{current}: is a symbolic link; the results folder and the folders above it "
                "in the repository must be real folders (a link would send reads and writes "
                "outside it)"
            )
    return PurePosixPath(relative.as_posix())


def refuse_links_on_the_way(path: Path, root: Path) -> None:
    """Refuse a symbolic link between ``root`` and ``path`` when ``path`` is inside ``root``."""
    try:
        relative_to_root(path, root)
    except _OutsideRepository:
        return


def _read_blobs(oids: list[str], repo_root: Path) -> list[bytes]:
    """Contents of the blobs ``oids`` in one ``git cat-file --batch``."""
    out = _git(["cat-file", "--batch"], repo_root, stdin="".join(f"{o}\n" for o in oids).encode())
    contents = []
    position = 0
    for oid in oids:
        end = out.index(b"\n", position)
        header = out[position:end].decode("ascii").split()
        if len(header) != 3 or header[0] != oid:
            raise HarnessError(f"git cat-file: unexpected answer {' '.join(header)!r} for {oid}")
        size = int(header[2])
        contents.append(out[end + 1 : end + 1 + size])
        position = end + 1 + size + 1  # the content is followed by a newline
    return contents
