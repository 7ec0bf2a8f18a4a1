"""Where a frozen benchmark's raw inputs came from, and whether they still say what it holds.

An adapter reports, with the arrays it read, a :class:`RawSource`: the origin of its inputs (a
dataset's release, a synthetic stand-in, a generated benchmark, the user's own data), how it
told, whether it checked them against a pinned checksum, and the files it read. ``prepare``
freezes that into the manifest (:func:`source_manifest`: each file's path, stat and sha256)
and the record carries it (:func:`raw_inputs`). A frozen copy is reused only
while its sources have not changed under it (:func:`check_sources`): the same files, or other
files with the same bytes, or files since deleted (the frozen copy stands alone). A changed
source is an error that says how to freeze again. See docs/data.md, "Where the raw inputs came
from".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import IntegrityError
from harness.core.hashing import file_sha256, json_sha256
from harness.records import RawInputs, RawOrigin

__all__ = [
    "RawSource",
    "SourcesChangedError",
    "check_sources",
    "raw_inputs",
    "source_manifest",
]


@dataclass(frozen=True)
class RawSource:
    """What an adapter says of the inputs it read.

    ``how``: how the origin was told, in words without machine-specific paths (it goes into
    records). ``verified_by``: how the adapter checked the inputs against a pinned checksum,
    None if it did not. ``files``: name (relative to the folder it was read from) -> path.
    """

    origin: RawOrigin
    how: str
    verified_by: str | None = None
    files: Mapping[str, Path] = field(default_factory=dict)


class SourcesChangedError(IntegrityError):
    """A frozen benchmark whose source files changed since it was frozen (exit code 2)."""


#: What a file's stat must still say for it to count as unchanged without hashing it again. The
#: size and modification time can be put back by hand (``touch -r``, ``cp -p``); the change time
#: and the inode cannot, so a file swapped under the same name and times is hashed again.
_STAT_KEYS = ("size", "mtime_ns", "ctime_ns", "inode")


def _stat(path: Path) -> dict[str, int]:
    stat = path.stat()
    values = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    return dict(zip(_STAT_KEYS, values, strict=True))


def source_manifest(source: RawSource) -> dict[str, Any]:
    """The manifest's ``raw_inputs`` section: the adapter's report and each file's path, size,
    modification and change times, inode and sha256, sealed by a hash of the rest (an edit is
    refused)."""
    files = {}
    for name in sorted(source.files):
        path = Path(source.files[name]).resolve()
        files[name] = {"path": str(path), **_stat(path), "sha256": file_sha256(path)}
    section: dict[str, Any] = {
        "origin": source.origin,
        "how": source.how,
        "verified_by": source.verified_by,
        "files": files,
    }
    section["seal"] = json_sha256(section)
    return section


def read_section(section: Any, where: Path) -> dict[str, Any]:
    """The manifest's ``raw_inputs`` section, checked against its seal."""
    if not isinstance(section, dict) or "seal" not in section:
        raise IntegrityError(f"{where}: malformed manifest (no sealed 'raw_inputs' section)")
    body = {k: v for k, v in section.items() if k != "seal"}
    if json_sha256(body) != section["seal"]:
        raise IntegrityError(
            f"{where}: the manifest's raw_inputs section was edited (its seal does not match);"
            " delete the directory and run `zsl data prepare` again."
        )
    return section


def raw_inputs(section: Mapping[str, Any], frozen_hash: str, pinned: str | None) -> RawInputs:
    """The record's :class:`RawInputs`: the adapter's report, verified also when the frozen
    hash equals the spec's pinned ``data.checksum`` (``pinned``)."""
    verified_by = section["verified_by"]
    if verified_by is None and pinned is not None and pinned == frozen_hash:
        verified_by = "the frozen benchmark's hash matches data.checksum pinned in the spec"
    how = section["how"] + (
        f"; verified: {verified_by}" if verified_by else "; not checked against a pinned checksum"
    )
    return RawInputs(
        origin=section["origin"],
        verified=verified_by is not None,
        how=how,
        files={name: entry["sha256"] for name, entry in section["files"].items()},
    )


def _changed(name: str, entry: Mapping[str, Any], path: Path) -> str | None:
    """How the file at ``path`` differs from the recorded ``entry``; None when it does not."""
    recorded = Path(entry["path"])
    same_place = path.resolve() == recorded
    stat = _stat(path)
    if same_place and all(entry.get(key) == stat[key] for key in _STAT_KEYS):
        return None  # unchanged since it was hashed: not read again
    digest = file_sha256(path)
    if digest == entry["sha256"]:
        return None
    if same_place:
        return (
            f"{name}: {path} changed since it was frozen"
            f" (sha256 {entry['sha256'][7:19]}… → {digest[7:19]}…)"
        )
    return (
        f"{name}: frozen from {recorded} (sha256 {entry['sha256'][7:19]}…), but the spec now"
        f" reads {path} (sha256 {digest[7:19]}…)"
    )


def check_sources(
    section: Mapping[str, Any],
    current: Mapping[str, Path] | None,
    *,
    root: Path,
    spec_path: Path,
) -> None:
    """Refuse a frozen copy whose sources changed: every file the adapter would read now
    (``current``; None when it cannot tell without a download) and every recorded file still
    on disk must hold the bytes it was frozen from. Files gone since are not an error."""
    recorded: Mapping[str, Mapping[str, Any]] = section["files"]
    problems = []
    paths = dict(current) if current is not None else {}
    for name, entry in recorded.items():
        path = paths.pop(name, None)
        if path is None or not os.path.exists(path):
            path = Path(entry["path"])
        if path.exists():
            problem = _changed(name, entry, path)
            if problem is not None:
                problems.append(problem)
    problems += [
        f"{name}: {path} was not among the files it was frozen from"
        for name, path in paths.items()
        if os.path.exists(path)
    ]
    if problems:
        listed = "\n  ".join(problems)
        raise SourcesChangedError(
            f"{root} no longer matches the files it was frozen from:\n  {listed}\n"
            f"Freeze it again from the current files with `zsl data prepare {spec_path}"
            " --refresh` (its hash changes: prediction files made for the old hash must be made"
            " again), or point the spec back at the files it was frozen from."
        )
