"""The leaderboard's CI steps, runnable locally: what a change touched, score it, show the diff.

A pull request that adds or changes a package under ``submissions/`` is validated, run (model code
under the ``sandbox`` runner) and scored on every benchmark that ``leaderboard/ci.yaml`` lists.
The runs go to a throwaway SQLite store seeded with the records committed in
``leaderboard/results``, never to the user's store; the updated records are exported back into
``leaderboard/results`` and the report compares them with the records committed at the base
revision. :func:`leaderboard_diff` renders that comparison as Markdown for a pull-request
comment: every string that came from a submission or a record is escaped, so a hostile name shows
as text and mentions or links nobody.

What the site shows is never taken from the pull request on trust. A record file that differs
from the fork point (added, edited, or not committed) is re-made by its package, changed or not,
and compared with the fresh run on every field but :data:`VOLATILE_FIELDS`; a difference, or a
changed record no package reproduces, fails the job, and the fresh record is what gets exported.
Submission fields (declarations, authors, paper…) come from the package's manifest through that
run. The harness that judges is the base branch's: CI checks it out apart and points ``--repo``
at the pull request's checkout (:func:`check_harness_is_base` refuses the pull request's own).
Nothing under the results folder may be a symbolic link, on disk or in git.

Git is only ever called with argument lists (no shell), and a base revision is resolved to a
commit before it is used.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import tempfile
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness import yamlio
from harness.atomic import write_text_atomic
from harness.errors import HarnessError
from harness.records import RunRecord, ScoreEntry
from harness.results.records_io import (
    RecordFile,
    RecordKey,
    describe_key,
    dump_record,
    export_records,
    read_record_files,
    read_records,
    record_key,
    record_path,
)

#: The CI configuration, relative to the repository root.
CI_CONFIG = PurePosixPath("leaderboard/ci.yaml")
#: Where submission packages live, relative to the repository root.
SUBMISSIONS = PurePosixPath("submissions")
MANIFEST = "submission.yaml"
#: What ``zsl ci pr`` writes into its output folder.
DIFF_FILENAME = "leaderboard-diff.md"
SITE_DIRNAME = "site"
STORE_FILENAME = "store.sqlite3"

_SETTING_LABELS = {"zsl": "ZSL", "gzsl": "GZSL", "transductive": "Transductive"}
_SETTING_ORDER = {"zsl": 0, "gzsl": 1, "transductive": 2}
_MAX_CELL = 200  # characters of submitted text kept in one table cell
_MAX_DETAIL = 400  # characters of one failure's message kept in the report
_MAX_PROBLEM = 1000  # characters of one problem of the job (with its field paths) kept


# -- configuration --------------------------------------------------------------------------------


class CIConfig(BaseModel):
    """``leaderboard/ci.yaml``: which benchmarks CI scores a submission package on."""

    model_config = ConfigDict(extra="forbid")

    specs: list[str] = Field(
        min_length=1, description="benchmark spec files, relative to the repository root"
    )


def load_ci_config(path: Path) -> CIConfig:
    """Read and validate the CI configuration at ``path``; errors name the file and the key."""
    try:
        data = yamlio.load(yamlio.read_text(path), str(path))  # bounded: no alias bombs
    except FileNotFoundError:
        raise HarnessError(f"{path}: CI configuration not found") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise HarnessError(f"{path}{line}: not valid YAML") from None
    except (OSError, UnicodeDecodeError) as err:
        raise HarnessError(f"{path}: cannot read ({err})") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: must be a mapping with the key 'specs'")
    try:
        return CIConfig.model_validate(data)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            where = ".".join(str(part) for part in e["loc"]) or "(top level)"
            message = "unknown key" if e["type"] == "extra_forbidden" else str(e["msg"])
            problems.append(f"{where}: {message}")
        raise HarnessError(f"{path}: " + "; ".join(problems)) from None


def config_spec_paths(config: CIConfig, repo_root: Path, config_path: Path) -> list[Path]:
    """The spec files of ``config`` as paths under ``repo_root``; each must exist."""
    paths = []
    for index, spec in enumerate(config.specs):
        path = repo_root / spec
        if PurePosixPath(spec).is_absolute() or ".." in PurePosixPath(spec).parts:
            raise HarnessError(f"{config_path}: specs.{index}: {spec!r} must be a relative path")
        if not path.is_file():
            raise HarnessError(
                f"{config_path}: specs.{index}: {spec!r} not found under {repo_root}"
            )
        paths.append(path)
    return paths


# -- git ------------------------------------------------------------------------------------------


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
    with tempfile.TemporaryDirectory(prefix="zsl-ci-base-") as tmp:
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
    relative = _relative_to_root(results_dir, root)
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


def _relative_to_root(path: Path, root: Path) -> PurePosixPath:
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


# -- Markdown -------------------------------------------------------------------------------------

# Characters with a meaning inside a Markdown line (emphasis, code, HTML and entities, links and
# images, headings, table pipes, strikethrough, footnotes, GitHub math); ``.``, ``-`` and ``:``
# only matter at the start of a line, which escaped text never is.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~&^@$])")
_MENTION = re.compile(r"([@#])(?=\w)")
_SCHEME = re.compile(r":(?=//)")
_WWW = re.compile(r"(?i)\bwww\.")
_ZWSP = "\u200b"


def escape_markdown(text: str, *, limit: int = _MAX_CELL) -> str:
    """``text`` as literal Markdown on one line, safe in a GitHub comment and a table cell.

    Control, format and line-separator characters become spaces (no line breaks, no bidi
    overrides); text beyond ``limit`` characters is cut with ``…``; ``@`` and ``#`` before a word
    get a zero-width space (no mentions, no issue links) and so do ``://`` and ``www.`` (no
    autolinks); then every character with a meaning inside a line is backslash-escaped, which
    CommonMark renders literally: no emphasis, code, HTML, links, images, math or table pipes.

    >>> escape_markdown("<b>@team</b> | x")
    '\\\\<b\\\\>\\\\@\\u200bteam\\\\</b\\\\> \\\\| x'
    """
    text = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = _MENTION.sub(lambda m: m.group(1) + _ZWSP, text)
    text = _SCHEME.sub(":" + _ZWSP, text)
    text = _WWW.sub(lambda m: m.group(0)[:3] + _ZWSP + ".", text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


#: Record fields that legitimately differ between two runs of one package on the same data: when
#: it ran, how long each step took, the machine, and what the model printed. Every other field is
#: a result or is shown on the site (scores, class means, intervals, details, leakage,
#: declarations, authors, runner, benchmark structure...), so a committed record must match a
#: fresh run on all of them.
VOLATILE_FIELDS = frozenset({"created_at", "timings", "environment", "logs"})
_MAX_FIELDS = 6  # differing field paths named in one message
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_@+-]*")


def record_differences(committed: RunRecord, fresh: RunRecord) -> list[str]:
    """The field paths (``scores[0].class_values.means[3]``) where two records differ.

    Compares the canonical JSON of both (what a record file holds), leaving out only
    :data:`VOLATILE_FIELDS`. Leaves compare as JSON text, so ``1`` differs from ``1.0`` and
    ``true``; a list of another length is named as a whole. In document order (keys sorted);
    empty when the records are the same result.
    """
    left = committed.model_dump(mode="json")
    right = fresh.model_dump(mode="json")
    for name in VOLATILE_FIELDS:
        left.pop(name, None)
        right.pop(name, None)
    found: list[str] = []
    # Iterative: a record's details may nest as deep as JSON allowed, beyond Python's recursion.
    stack: list[tuple[str, object, object]] = [("", left, right)]
    while stack:
        path, one, two = stack.pop()
        if isinstance(one, dict) and isinstance(two, dict):
            for key in sorted(one.keys() | two.keys(), reverse=True):
                sub = f"{path}.{key}" if path else key
                if not _PLAIN_KEY.fullmatch(key):
                    sub = f"{path}[{json.dumps(key, ensure_ascii=False)}]"
                if key not in one or key not in two:
                    found.append(sub)
                else:
                    stack.append((sub, one[key], two[key]))
        elif isinstance(one, list) and isinstance(two, list) and len(one) == len(two):
            pairs = list(enumerate(zip(one, two, strict=True)))
            stack.extend((f"{path}[{i}]", x, y) for i, (x, y) in reversed(pairs))
        elif json.dumps(one, sort_keys=True) != json.dumps(two, sort_keys=True):
            found.append(path or "(record)")
    return found


def _same_result(one: RunRecord | None, two: RunRecord | None) -> bool:
    """Both absent, or both present and equal on every field but :data:`VOLATILE_FIELDS`."""
    if one is None or two is None:
        return one is two
    return not record_differences(one, two)


def _field_list(fields: Sequence[str], limit: int = _MAX_FIELDS) -> str:
    shown = ", ".join(fields[:limit])
    return shown + (f" and {len(fields) - limit} more" if len(fields) > limit else "")


def _index(records: Iterable[RunRecord]) -> dict[RecordKey, RunRecord]:
    # Two records of one key: the newest wins, as re-running a submission replaces its run.
    index: dict[RecordKey, RunRecord] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        index[record_key(record)] = record
    return index


def _ranks(
    entries: dict[RecordKey, ScoreEntry], transductive: Collection[RecordKey] = ()
) -> dict[RecordKey, int]:
    """Competition ranks ("1, 2, 2, 4"), among entries of the same metric version only, and
    apart for transductive runs (they saw the unlabelled test images), as the site ranks them."""
    ranks: dict[RecordKey, int] = {}
    by_version: dict[tuple[str, bool], list[tuple[RecordKey, ScoreEntry]]] = {}
    for key, entry in entries.items():
        if math.isfinite(entry.value):
            kind = (entry.version, key in transductive)
            by_version.setdefault(kind, []).append((key, entry))
    for group in by_version.values():
        sign = -1.0 if group[0][1].higher_is_better else 1.0
        group.sort(key=lambda item: sign * item[1].value)
        rank, previous = 0, None
        for position, (key, entry) in enumerate(group, start=1):
            if entry.value != previous:
                rank, previous = position, entry.value
            ranks[key] = rank
    return ranks


def _format(value: float, percent: bool) -> str:
    return f"{100 * value:.1f}" if percent else f"{value:.2f}"


def _value_text(entry: ScoreEntry | None, percent: bool) -> str:
    if entry is None or not math.isfinite(entry.value):
        return "—"
    text = _format(entry.value, percent)
    if entry.interval is not None:
        lo, hi = entry.interval.lo, entry.interval.hi
        text += f" [{_format(lo, percent)}, {_format(hi, percent)}]"
    return text


def _change_reasons(old: RunRecord, new: RunRecord, old_e: ScoreEntry, new_e: ScoreEntry) -> str:
    reasons = []
    if (old.benchmark.hash, old.benchmark.spec_hash) != (
        new.benchmark.hash,
        new.benchmark.spec_hash,
    ):
        reasons.append("data")
    if old.submission.package_hash != new.submission.package_hash:
        reasons.append("package")
    elif old.predictions_hashes != new.predictions_hashes:
        reasons.append("predictions")
    if old_e.version != new_e.version:
        reasons.append(
            f"metric v{escape_markdown(old_e.version)} → v{escape_markdown(new_e.version)}"
        )
    if not reasons and old_e == new_e:
        # Same primary score, yet another result: name what changed (declarations, class
        # means, leakage...), since the site shows it.
        fields = record_differences(old, new)
        if fields:
            reasons.append(escape_markdown(_field_list(fields, 3)))
    if not reasons:
        reasons.append("scores")
    return "updated (" + ", ".join(reasons) + ")"


@dataclass
class _Row:
    key: RecordKey
    rank: str
    change: str
    before: str
    after: str
    delta: str
    order: tuple[float, float, str, str]


def _setting_table(
    setting: str,
    metric: str,
    old: dict[RecordKey, RunRecord],
    new: dict[RecordKey, RunRecord],
    reproduced: Collection[RecordKey] | None,
) -> str:
    old_entries = {k: e for k, r in old.items() if (e := r.score(setting, metric)) is not None}
    new_entries = {k: e for k, r in new.items() if (e := r.score(setting, metric)) is not None}
    if not old_entries and not new_entries:
        return ""
    from harness.site.model import is_transductive

    old_trans = {k for k, r in old.items() if is_transductive(r)}
    new_trans = {k for k, r in new.items() if is_transductive(r)}
    old_ranks, new_ranks = _ranks(old_entries, old_trans), _ranks(new_entries, new_trans)
    everything = [*old_entries.values(), *new_entries.values()]
    percent = all(
        0.0 <= v <= 1.0
        for e in everything
        for v in (e.value, *((e.interval.lo, e.interval.hi) if e.interval else ()))
    )
    rows = []
    for key in sorted(old_entries.keys() | new_entries.keys()):
        before, after = old_entries.get(key), new_entries.get(key)
        rank_before, rank_after = old_ranks.get(key), new_ranks.get(key)
        if before is None:
            change = "new"
        elif after is None:
            change = "removed"
        elif not _same_result(old[key], new[key]):
            change = _change_reasons(old[key], new[key], before, after)
        elif rank_before != rank_after:
            change = "moved"
        else:
            continue
        if (
            reproduced is not None
            and after is not None
            and change != "moved"
            and key not in reproduced
        ):
            change += " ⚠ not reproduced by this CI run"
        delta = ""
        if (
            before is not None
            and after is not None
            and before.version == after.version
            and math.isfinite(before.value)
            and math.isfinite(after.value)
        ):
            scale = 100.0 if percent else 1.0
            delta = f"{scale * (after.value - before.value):+.{1 if percent else 2}f}"
        rank = {
            (True, True): f"{rank_before} → {rank_after}",
            (False, True): f"— → {rank_after}",
            (True, False): f"{rank_before} → —",
            (False, False): "—",
        }[(rank_before is not None, rank_after is not None)]
        if rank_before is not None and rank_before == rank_after:
            rank = str(rank_after)
        rows.append(
            _Row(
                key=key,
                rank=rank,
                change=change,
                before=_value_text(before, percent),
                after=_value_text(after, percent),
                delta=delta,
                order=(
                    rank_after if rank_after is not None else math.inf,
                    rank_before if rank_before is not None else math.inf,
                    key[2],
                    key[3],
                ),
            )
        )
    if not rows:
        return ""
    rows.sort(key=lambda row: row.order)
    label = _SETTING_LABELS.get(setting, setting)
    unit = " (%)" if percent else ""
    lines = [
        f"**{escape_markdown(label)} · {escape_markdown(metric)}{unit}**",
        "",
        "| Rank | Submission | Change | Before | After | Δ |",
        "| ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        name = escape_markdown(f"{row.key[2]} {row.key[3]}")
        if row.key in new_trans or (row.key not in new and row.key in old_trans):
            name += " (transductive: ranked apart)"
        lines.append(
            f"| {row.rank} | {name} | {row.change} | {row.before} | {row.after} | {row.delta} |"
        )
    versions = sorted({e.version for e in new_entries.values()})
    if len(versions) > 1:
        listed = ", ".join(f"v{escape_markdown(v)}" for v in versions)
        lines += [
            "",
            f"Metric versions mixed in this table ({listed}): runs are ranked only against runs "
            "of the same version; re-score the older runs.",
        ]
    return "\n".join(lines)


def leaderboard_diff(
    before: Sequence[RunRecord],
    after: Sequence[RunRecord],
    *,
    reproduced: Collection[RecordKey] | None = None,
) -> str:
    """The leaderboard change from ``before`` to ``after`` records, as Markdown.

    Runs are matched by :func:`run_key`. Per benchmark version and per setting, a table of the
    primary metric lists the runs that are new, removed or updated (with what changed: data,
    package, predictions, metric version, scores, or else the record fields that differ: any
    field but :data:`VOLATILE_FIELDS` counts), and runs whose rank moved, with values and
    95% intervals before and after, the difference and the rank change. Ranks are competition
    ranks among runs of the same metric version. Unchanged runs are left out.

    Parameters
    ----------
    before, after : sequence of RunRecord
        The records at the base revision and after the change.
    reproduced : collection of RecordKey, optional
        Keys of the runs this CI job scored itself; a new or updated run not among them (a record
        edited by hand) is flagged. None: flag nothing.

    Returns
    -------
    str
        Markdown ending with a newline; every submitted string is escaped
        (:func:`escape_markdown`).
    """
    old, new = _index(before), _index(after)
    status: dict[RecordKey, str] = {}
    for key in old.keys() | new.keys():
        if key not in old:
            status[key] = "new"
        elif key not in new:
            status[key] = "removed"
        elif not _same_result(old[key], new[key]):
            status[key] = "updated"
    sections = []
    for bench in sorted({key[:2] for key in status}):
        old_b = {k: r for k, r in old.items() if k[:2] == bench}
        new_b = {k: r for k, r in new.items() if k[:2] == bench}
        newest = max([*old_b.values(), *new_b.values()], key=lambda r: r.created_at)
        info = max(new_b.values(), key=lambda r: r.created_at) if new_b else newest
        tables = [
            table
            for setting, metric in sorted(
                info.benchmark.primary.items(),
                key=lambda item: (_SETTING_ORDER.get(item[0], 99), item[0]),
            )
            if (table := _setting_table(setting, metric, old_b, new_b, reproduced))
        ]
        title = escape_markdown(info.benchmark.title)
        heading = f"#### {escape_markdown(bench[0])} v{bench[1]} — {title}"
        sections.append("\n\n".join([heading, *tables]))
    counts = {
        kind: sum(1 for s in status.values() if s == kind) for kind in ("new", "updated", "removed")
    }
    if not status:
        summary = "No change to the leaderboard."
    else:
        n_bench = len({key[:2] for key in status})
        summary = (
            f"{counts['new']} new, {counts['updated']} updated, {counts['removed']} removed "
            f"run{'s' if len(status) != 1 else ''} on {n_bench} "
            f"benchmark{'s' if n_bench != 1 else ''}."
        )
    return "\n\n".join(["### Leaderboard diff", summary, *sections]) + "\n"


# -- the pull-request job -------------------------------------------------------------------------


@dataclass(frozen=True)
class PackageOutcome:
    """What CI made of one package: ``ok``, ``invalid``, ``failed`` (its run) or ``deleted``."""

    package: str
    status: Literal["ok", "invalid", "failed", "deleted"]
    detail: str

    @property
    def failed(self) -> bool:
        return self.status in ("invalid", "failed")


def one_line(message: str, repo_root: Path | None = None, limit: int = _MAX_DETAIL) -> str:
    """An error message on one line, repository paths made relative, cut at ``limit``."""
    if repo_root is not None:
        message = message.replace(f"{repo_root}{os.sep}", "")
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def render_report(
    outcomes: Sequence[PackageOutcome], diff: str, *, notes: Sequence[str] = ()
) -> str:
    """The pull-request report: one line per package (what failed and why), notes, the diff."""
    failed = [o for o in outcomes if o.failed]
    lines = ["## zsl leaderboard CI", ""]
    if not outcomes:
        lines.append("No submission package changed.")
    else:
        scored = [o for o in outcomes if o.status != "deleted"]
        if failed:
            lines.append(f"**{len(failed)} of {len(scored)} packages failed.**")
        elif scored:
            lines.append(f"All {len(scored)} changed packages passed.")
        lines += ["", "| Package | Result |", "| --- | --- |"]
        icons = {
            "ok": "✅ ok",
            "invalid": "❌ invalid",
            "failed": "❌ failed",
            "deleted": "deleted",
        }
        for outcome in outcomes:
            detail = escape_markdown(outcome.detail, limit=_MAX_DETAIL)
            lines.append(
                f"| {escape_markdown(outcome.package)} | {icons[outcome.status]}: {detail} |"
            )
    for note in notes:
        lines += ["", note]
    return "\n".join(lines) + "\n\n" + diff


def _primary_summary(record: RunRecord) -> str:
    parts = []
    for setting, metric in record.benchmark.primary.items():
        entry = record.score(setting, metric)
        if entry is not None:
            percent = 0.0 <= entry.value <= 1.0
            parts.append(f"{setting} {metric} {_format(entry.value, percent)}")
    where = f"{record.benchmark.id} v{record.benchmark.version}"
    return f"{where} ({', '.join(parts)})" if parts else where


def _error_text(err: Exception, repo_root: Path | None) -> str:
    """One line for any exception: a HarnessError's message, else its type and message."""
    try:
        message = str(err)
    except Exception:  # a broken __str__ must not take the job down either
        message = ""
    if not isinstance(err, HarnessError):
        # Not a refusal the harness meant: say which exception, so a harness bug is reported.
        message = f"{type(err).__name__}: {message}" if message else type(err).__name__
    return one_line(message, repo_root)


def _shown(path: Path, roots: Sequence[Path]) -> str:
    for root in roots:
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return str(path)


def score_package(
    package: str,
    specs: Sequence[Path],
    *,
    repo_root: Path,
    database_url: str,
    runner: str,
    quiet: bool = True,
    spec_root: Path | None = None,
) -> tuple[PackageOutcome, list[RunRecord]]:
    """Validate ``package`` (repository-relative) and run + score it on every spec.

    Returns the outcome and the records stored in ``database_url``. A package that fails on one
    benchmark is still tried on the others; its failures are joined into one line.

    Any exception while validating, running, scoring, storing or checking that its record can be
    exported is this package's failure (``invalid`` or ``failed``, with a one-line reason), never
    the job's: a hostile package must not take the other packages' results down with it. Only
    ``KeyboardInterrupt`` and ``SystemExit`` (not ``Exception``) pass through.
    """
    from harness.pipeline import run_submission
    from harness.submission.archive import open_package

    folder = repo_root / package
    roots = [repo_root] if spec_root is None else [repo_root, spec_root]
    try:
        with tempfile.TemporaryDirectory(prefix="zsl-ci-validate-") as tmp:
            open_package(folder, tmp)
    except Exception as err:  # any failure of one package is that package's (see above)
        return PackageOutcome(package, "invalid", _error_text(err, repo_root)), []
    records, failures = [], []
    for spec in specs:
        try:
            record = run_submission(
                folder, spec, runner=runner, database_url=database_url, store=True, quiet=quiet
            )
            # A record that cannot be written (non-finite value, unusable name) fails here, as
            # its package's failure, instead of failing the export of every record.
            dump_record(record)
            record_path(Path(), record)
        except Exception as err:  # any failure of one package is that package's (see above)
            failures.append(f"{_shown(spec, roots)}: {_error_text(err, repo_root)}")
            continue
        records.append(record)
    if failures:
        return PackageOutcome(package, "failed", one_line("; ".join(failures))), records
    detail = "scored on " + "; ".join(_primary_summary(r) for r in records)
    return PackageOutcome(package, "ok", detail), records


@dataclass
class PullRequestResult:
    """What ``zsl ci pr`` did: one outcome per package, and the files it wrote.

    ``problems`` are the job's own failures: a committed record that differs from a fresh run
    (forged or stale), a changed record no package reproduces, a failed site build.
    """

    outcomes: list[PackageOutcome]
    report: Path
    site: Path | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not any(o.failed for o in self.outcomes)


def _fresh_store(out_dir: Path) -> str:
    """The URL of an empty SQLite store under ``out_dir`` (an earlier one is removed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = (out_dir / STORE_FILENAME).absolute()
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"sqlite:///{path}"


def running_harness_dir() -> Path:
    """The folder of the ``harness`` package this process runs (resolved)."""
    import harness

    return Path(harness.__file__).resolve().parent


def check_harness_is_base(commit: str, repo_root: Path, base: str | None = None) -> None:
    """Refuse to score ``repo_root`` with a harness that lives in it and differs from ``commit``.

    A pull request that edits ``harness/`` controls the sandbox and the verdict if its own
    harness scores it, so CI runs the base branch's harness from a separate checkout (and this
    check passes: the harness is outside the repository scored). Run from inside the
    repository, the harness (and the ``pyproject.toml`` beside it) must be the one of
    ``commit``: no tracked change, no untracked file.

    Raises
    ------
    HarnessError
        The running harness is in ``repo_root`` and differs from ``commit``; the message names
        what differs and says to run the base branch's harness (or ``--trust-pr-harness``).
    """
    root = find_repo_root(repo_root)
    here = running_harness_dir()
    try:
        inside = PurePosixPath(here.relative_to(root.resolve()).as_posix())
    except ValueError:
        return  # the harness is installed outside the repository it scores
    paths = [str(inside), str(inside.parent / "pyproject.toml")]
    changed = _git(["diff", "--name-only", "-z", commit, "--", *paths], root)
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z", "--", str(inside)], root)
    differing = sorted(
        {raw.decode("utf-8", "surrogateescape") for raw in (changed + untracked).split(b"\0")}
        - {""}
    )
    if differing:
        shown = _field_list(differing, 3)
        raise HarnessError(
            f"the harness running this job ({here}) lives in the repository being scored and "
            f"differs there from the base {base or commit} ({shown}): a pull request must not "
            "be scored by its own harness; run the base branch's harness (a separate checkout "
            "of the base, installed in its own environment) with --repo pointing at this "
            "checkout, as .github/workflows/leaderboard.yml does, or pass --trust-pr-harness "
            "to score your own local change"
        )


def _config_root(config_path: Path, fallback: Path) -> Path:
    """The repository holding the CI configuration: its spec paths are relative to it."""
    try:
        return find_repo_root(Path(config_path).absolute().parent)
    except HarnessError:
        return fallback


def merge_base(commit: str, repo_root: Path) -> str:
    """The commit where ``HEAD`` forked from ``commit``: what ``commit...HEAD`` compares with."""
    return _git(["merge-base", commit, "HEAD"], repo_root).decode("ascii").strip()


@dataclass
class _ChangedRecord:
    file: RecordFile
    shown: str  # its path, relative to the repository


def run_pull_request(
    base: str,
    *,
    repo_root: Path,
    results_dir: Path,
    out_dir: Path,
    runner: str = "sandbox",
    config_path: Path | None = None,
    every_package: bool = False,
    quiet: bool = True,
    trust_pr_harness: bool = False,
) -> PullRequestResult:
    """Validate, run and score the packages changed since ``base``; write the report and the site.

    Steps: refuse to run from a harness the change edited (:func:`check_harness_is_base`,
    unless ``trust_pr_harness``); read the CI configuration (its spec paths are relative to
    the repository holding it, which may be another checkout than ``repo_root``); list changed
    packages (:func:`changed_packages`, or every package with ``every_package``); find the
    record files under ``results_dir`` that differ from the fork point (added, edited, or not
    committed): none of them is trusted, and the package of each (the folder under
    ``submissions/`` whose manifest has its submission name) is run too, changed or not; seed
    a fresh SQLite store under ``out_dir`` with the trusted records; score every package to run
    on every configured spec into that store; compare each changed record with its fresh run
    (:func:`record_differences`: every field but :data:`VOLATILE_FIELDS`); export the trusted
    records plus the fresh runs into ``results_dir`` (a committed record equal to its fresh run
    is kept as it is, so re-running CI on committed results changes no file); build the site
    of those records into ``out_dir/site``; write ``out_dir/leaderboard-diff.md``
    (:func:`render_report` around :func:`leaderboard_diff` between the records committed at
    ``base`` and the exported ones).

    A committed record that differs from its fresh run, and a changed record that no package
    reproduces, are problems (the job fails): records are written by CI. Failures of a package
    (invalid, or a run that failed, whatever the exception) are reported, not raised; see
    :attr:`PullRequestResult.ok`.

    Raises
    ------
    HarnessError
        Not a git repository, unknown ``base``, the harness differs from ``base`` inside the
        repository, a broken configuration or record, a symbolic link under the results
        folder, or the ``sandbox`` runner unavailable while there is something to run.
    """
    from harness.site import build_site
    from harness.store import open_store, save_run

    root = find_repo_root(repo_root)
    commit = resolve_commit(base, root)
    if not trust_pr_harness:
        check_harness_is_base(commit, root, base)
    config_path = config_path if config_path is not None else root / CI_CONFIG
    config = load_ci_config(config_path)
    spec_root = _config_root(config_path, root)
    specs = config_spec_paths(config, spec_root, config_path)
    results_rel = _relative_to_root(results_dir, root)  # refuses a link on the way down
    results_dir = root / results_rel
    _refuse_links_on_the_way(out_dir, root)
    changes = changed_packages(commit, root)
    if every_package:
        changes = PackageChanges(modified=all_packages(root).modified, deleted=changes.deleted)
    before = committed_records(commit, results_dir, root)

    # Which record files can be trusted: only those byte-identical to the fork point's (what
    # CI vetted when it merged them). Anything else was written by whoever made the change.
    fork = merge_base(commit, root)
    vetted = committed_files(fork, results_dir, root)
    head = read_record_files(results_dir) if os.path.lexists(results_dir) else []
    trusted: dict[RecordKey, RunRecord] = {}
    changed: dict[RecordKey, _ChangedRecord] = {}
    for file in head:
        relative = PurePosixPath(file.path.relative_to(results_dir).as_posix())
        if vetted.get(relative) == file.text.encode("utf-8"):
            trusted[record_key(file.record)] = file.record
        else:
            changed[record_key(file.record)] = _ChangedRecord(
                file, (results_rel / relative).as_posix()
            )

    # Each changed record is re-made by its package (by submission name), changed or not.
    owners: dict[str, list[str]] = {}
    for folder in all_packages(root).modified:
        name = manifest_name_at("HEAD", folder, root)
        if name is not None:
            owners.setdefault(name, []).append(folder)
    to_run = set(changes.changed)
    rerun = set()
    for key in changed:
        folders = owners.get(key[2], [])
        if len(folders) == 1 and folders[0] not in to_run:
            rerun.add(folders[0])
    to_run |= rerun
    if to_run and runner == "sandbox":
        from harness.runners import sandbox

        if not sandbox.available():
            raise HarnessError(
                "the sandbox runner can't start here (bubblewrap missing, or user namespaces "
                "disallowed); install bubblewrap or pass --runner"
            )

    # The throwaway store holds the trusted runs, so storing a new run checks it against them
    # (same benchmark data, portable values) exactly as the real store would; an edited record
    # never gets there.
    url = _fresh_store(out_dir)
    engine = open_store(url)
    try:
        for record in trusted.values():
            save_run(engine, record)
    finally:
        engine.dispose()
    outcomes: list[PackageOutcome] = []
    fresh: dict[RecordKey, RunRecord] = {}
    failed: set[str] = set()
    for package in sorted(to_run):
        name = manifest_name_at("HEAD", package, root)
        others = [f for f in owners.get(name, []) if f != package] if name is not None else []
        if others:
            # Two folders of one name would make one run's record replace the other's.
            detail = (
                f"the submission name {name!r} is also the name of {', '.join(others)}; "
                "one package folder per submission name"
            )
            outcome, records = PackageOutcome(package, "invalid", detail), list[RunRecord]()
        else:
            outcome, records = score_package(
                package,
                specs,
                repo_root=root,
                database_url=url,
                runner=runner,
                quiet=quiet,
                spec_root=spec_root,
            )
        if package in rerun:
            outcome = PackageOutcome(
                outcome.package,
                outcome.status,
                f"re-run, as its record changed: {outcome.detail}",
            )
        outcomes.append(outcome)
        if outcome.failed:
            failed.add(package)
        for record in records:
            fresh[record_key(record)] = record

    problems: list[str] = []
    merged = dict(trusted)
    fork_records: dict[RecordKey, RunRecord] | None = None
    for key, change in sorted(changed.items()):
        new = fresh.get(key)
        if new is None:
            folders = owners.get(key[2], [])
            if not folders:
                why = f"no package under {SUBMISSIONS}/ is named {key[2]!r}"
            elif len(folders) > 1:
                why = f"several packages are named {key[2]!r}"
            elif folders[0] in failed:
                why = f"its package {folders[0]} failed"
            else:
                why = (
                    f"its package {folders[0]} does not make this run (another version, or a "
                    f"benchmark {_shown(config_path, [root, spec_root])} does not list)"
                )
            problems.append(
                f"{change.shown}: changed in this pull request, but no package reproduces it "
                f"({describe_key(key)}): {why}; records are written by CI, so it was not "
                "exported: commit the records `zsl ci pr` exports, never hand-written or "
                "edited ones"
            )
            if fork_records is None:  # keep what was vetted, if anything
                fork_records = _index(committed_records(fork, results_dir, root))
            if key in fork_records:
                merged[key] = fork_records[key]
            continue
        fields = record_differences(change.file.record, new)
        if fields:
            problems.append(
                f"{change.shown}: ⚠ the committed record differed from a fresh run in: "
                f"{_field_list(fields)}; the fresh record was exported in its place (records are "
                "written by CI: commit the exported records, never edited ones)"
            )
            merged[key] = new
        else:
            merged[key] = change.file.record  # reproduced: keep the file as it is
    committed = {**trusted, **{key: change.file.record for key, change in changed.items()}}
    for key, record in fresh.items():
        if key not in changed and not _same_result(trusted.get(key), record):
            merged[key] = record
    for folder in changes.deleted:
        name = manifest_name_at(commit, folder, root)
        left = sum(1 for key in merged if key[2] == name)
        detail = "package removed"
        if left:
            detail += (
                f"; {left} run record{'s' if left != 1 else ''} of {name} remain in "
                f"{results_rel}: delete them to take it off the board"
            )
        outcomes.append(PackageOutcome(folder, "deleted", detail))

    export_records(merged.values(), results_dir, prune=True)
    after = read_records(results_dir)
    notes = []
    stale = [r for key, r in fresh.items() if not _same_result(committed.get(key), r)]
    if stale:
        notes.append(
            f"This commit's {escape_markdown(str(results_rel))} lacks {len(stale)} of the run "
            "records above (new or changed): commit the exported records (the "
            "`leaderboard-results` artifact, or run `zsl ci pr` locally) so that the merge "
            "publishes them."
        )
    site: Path | None = None
    try:
        site = build_site(after, out_dir / SITE_DIRNAME)
    except Exception as err:  # the report must still be written
        problems.append(f"site build failed: {_error_text(err, root)}")
    for problem in problems:
        notes.append(f"❌ {escape_markdown(problem, limit=_MAX_PROBLEM)}")
    diff = leaderboard_diff(before, after, reproduced=set(fresh))
    report = out_dir / DIFF_FILENAME
    write_text_atomic(report, render_report(outcomes, diff, notes=notes))
    return PullRequestResult(outcomes=outcomes, report=report, site=site, problems=problems)


def _refuse_links_on_the_way(path: Path, root: Path) -> None:
    """Refuse a symbolic link between ``root`` and ``path`` when ``path`` is inside ``root``."""
    try:
        _relative_to_root(path, root)
    except _OutsideRepository:
        return


def publish_site(results_dir: Path, out_dir: Path) -> Path:
    """Build the site from the records committed in ``results_dir`` (no store, no runs).

    A missing ``results_dir`` (git keeps no empty folder) gives a site without benchmarks.
    Returns the path of the site's ``index.html``.
    """
    from harness.site import build_site

    records = read_records(results_dir) if results_dir.is_dir() else []
    return build_site(records, out_dir)
