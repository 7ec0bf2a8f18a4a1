"""Run records as JSON files: one file per run, content-addressed, stable enough to review.

A record file is ``{"format": "zsl-run-record/1", "id": "sha256:…", "record": {…}}``. The id is
the hash of the record's canonical JSON (sorted keys, no whitespace, floats as Python writes
them; :func:`harness.hashing.json_sha256`), so a file is *content-addressed*: whoever reads it
recomputes the id and refuses a record whose content no longer matches it (an edit that did
not re-export). The id is tamper evidence, not a signature: anyone can recompute it, so the
trust boundary stays the review of the git diff.

The file's *path*, on the other hand, comes from the run's identity, not its content:
``<root>/<benchmark>/v<version>/<submission>@<version>.json``. Re-scoring a run or re-running a
submission version rewrites the same file, so the change reviews as a diff of one file instead
of a deletion plus an addition. Every path component is percent-encoded down to
``[A-Za-z0-9._+-]`` (no separators, no leading dot, so never ``..``; ASCII only, so no Unicode
normalization differences between file systems); a component too long for a file name keeps a
prefix and a hash of the whole.

Formatting is stable: two-space indent, sorted keys, UTF-8 text, trailing newline; the same
record gives byte-identical text whatever order its dictionaries were built in. Writes are
atomic per file (temporary file + ``os.replace``); reading a folder is all-or-nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.atomic import write_text_atomic
from harness.errors import HarnessError, IntegrityError
from harness.hashing import json_sha256
from harness.records import RunKey, RunRecord, run_key

RECORD_FORMAT = "zsl-run-record/1"
RECORD_SUFFIX = ".json"
_ENVELOPE_KEYS = frozenset({"format", "id", "record"})

#: Characters kept as they are in file names; everything else is percent-encoded (UTF-8 bytes).
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-")
#: Longest encoded name kept whole: a file name holds two (submission name and version) plus
#: ``.json`` and, while written, a temporary prefix and suffix, within the usual 255 bytes.
_MAX_COMPONENT = 100


RecordKey = RunKey


# -- one record ---------------------------------------------------------------------------------


#: The run's identity (:func:`harness.records.run_key`): one record file per key.
record_key = run_key


def describe_key(key: RecordKey) -> str:
    """``name@version on benchmark vN`` for messages."""
    benchmark, version, name, sub_version = key
    return f"{name}@{sub_version} on {benchmark} v{version}"


def _canonical_payload(record: RunRecord) -> dict[str, Any]:
    return record.model_dump(mode="json")


def _content_id(payload: Any) -> str:
    return json_sha256(payload)


def record_id(record: RunRecord) -> str:
    """``sha256:<hex>`` of the record's canonical JSON (sorted keys, no whitespace).

    The id of the record a file holds; :func:`load_record` recomputes it over the record as
    written in the file.
    """
    return _content_id(_canonical_payload(record))


def dump_record(record: RunRecord) -> str:
    """The record file's text: ``{"format", "id", "record"}``, indent 2, sorted keys, newline.

    Raises
    ------
    HarnessError
        The record holds a value JSON cannot carry portably (NaN or infinity).
    """
    payload = _canonical_payload(record)
    envelope = {"format": RECORD_FORMAT, "id": _content_id(payload), "record": payload}
    try:
        text = json.dumps(envelope, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError as err:
        raise HarnessError(
            f"run of {describe_key(record_key(record))} cannot be exported: {err}; records "
            "hold finite numbers only"
        ) from err
    return text + "\n"


def load_record(text: str, where: str) -> RunRecord:
    """Parse and verify one record file's text; ``where`` names the file in messages.

    Raises
    ------
    HarnessError
        Not JSON, NaN/infinity, a repeated key, an unknown ``format``, a missing or unknown
        envelope key, or a record that does not fit the schema (naming the key path).
    IntegrityError
        The content does not hash to the recorded ``id`` (the file was edited after export).
    """
    try:
        envelope = json.loads(
            text, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant
        )
    except json.JSONDecodeError as err:
        raise HarnessError(
            f"{where}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None
    except _JSONValueError as err:
        raise HarnessError(f"{where}: {err}") from None
    if not isinstance(envelope, dict):
        raise HarnessError(f"{where}: expected a JSON object with keys 'format', 'id' and 'record'")
    unknown = sorted(set(envelope) - _ENVELOPE_KEYS)
    if unknown:
        raise HarnessError(
            f"{where}: unknown key {unknown[0]!r}; a record file has only 'format', 'id' and "
            "'record'"
        )
    missing = sorted(_ENVELOPE_KEYS - set(envelope))
    if missing:
        raise HarnessError(f"{where}: missing key {missing[0]!r}")
    if envelope["format"] != RECORD_FORMAT:
        raise HarnessError(
            f"{where}: format: expected {RECORD_FORMAT!r}, got {envelope['format']!r}; "
            "this harness reads only that format"
        )
    stated, payload = envelope["id"], envelope["record"]
    if not isinstance(stated, str):
        raise HarnessError(f"{where}: id: expected a string 'sha256:<hex>', got {stated!r}")
    if not isinstance(payload, dict):
        raise HarnessError(f"{where}: record: expected a JSON object")
    # The id covers the record as written, so a record exported by an older harness (before a
    # new field with a default existed) still verifies.
    actual = _content_id(payload)
    if actual != stated:
        raise IntegrityError(
            f"{where}: id: the record's content hashes to {actual}, not to the recorded "
            f"{stated}; it was changed after export (re-export it from the store, or review "
            "the change)"
        )
    try:
        return RunRecord.model_validate(payload)
    except ValidationError as err:
        raise HarnessError(f"{where}: {_first_problem(err)}") from None


class _JSONValueError(ValueError):
    pass


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key would let the reviewed text (first occurrence) differ from what is loaded.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _JSONValueError(f"key {key!r} appears twice in one object")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise _JSONValueError(f"{name} is not a number records may hold (finite numbers only)")


def _first_problem(err: ValidationError) -> str:
    problems = err.errors()
    first = problems[0]
    loc = "record" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
    )
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{loc}: {first['msg']}{more}"


# -- paths --------------------------------------------------------------------------------------


def safe_component(text: str, what: str = "name") -> str:
    """``text`` as one file-name component: percent-encoded UTF-8 outside ``[A-Za-z0-9._+-]``.

    The encoding is injective (``%`` itself is encoded), never yields a path separator, and
    encodes a leading dot (so neither ``.``, ``..`` nor a hidden file). A result longer than
    100 characters keeps a prefix plus ``~`` and a hash of ``text`` (``~`` is never kept as
    is, so that form cannot collide with a short one).

    >>> safe_component("ale")
    'ale'
    >>> safe_component("../x")
    '%2E.%2Fx'
    >>> safe_component("<b>é")
    '%3Cb%3E%C3%A9'

    Raises
    ------
    HarnessError
        ``text`` is empty (``what`` names it in the message).
    """
    if not text:
        raise HarnessError(f"the {what} is empty; a record file needs a non-empty {what}")
    parts = []
    for position, char in enumerate(text):
        if char in _SAFE_CHARS and not (position == 0 and char == "."):
            parts.append(char)
        else:
            parts.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
    encoded = "".join(parts)
    if len(encoded) > _MAX_COMPONENT:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        encoded = f"{encoded[: _MAX_COMPONENT - 17]}~{digest}"
    return encoded


def record_path(root: Path, record: RunRecord) -> Path:
    """``root/<benchmark>/v<version>/<submission>@<submission version>.json``, every name safe.

    The path depends on the run's identity only, so a re-scored run rewrites the same file.
    """
    benchmark, version, name, sub_version = record_key(record)
    file_name = (
        f"{safe_component(name, 'submission name')}@"
        f"{safe_component(sub_version, 'submission version')}{RECORD_SUFFIX}"
    )
    return root / safe_component(benchmark, "benchmark id") / f"v{int(version)}" / file_name


# -- folders ------------------------------------------------------------------------------------


@dataclass
class ExportResult:
    """What :func:`write_records` did: every record's path, and which files changed."""

    paths: list[Path] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)


def export_records(records: Iterable[RunRecord], root: Path, *, prune: bool = False) -> list[Path]:
    """Write one file per record under ``root`` and return their paths (in record order).

    A file whose text would not change is left alone. With ``prune=True``, ``*.json`` files
    under ``root`` that belong to no given record are removed (and folders left empty).

    Raises
    ------
    HarnessError
        Two records are the same run, or two paths differ only in letter case (they would be
        one file on macOS and Windows), or a record cannot be written; or ``prune`` is asked
        with no records while ``root`` holds some (an empty store would delete them all).
    """
    return write_records(records, root, prune=prune).paths


def write_records(records: Iterable[RunRecord], root: Path, *, prune: bool = False) -> ExportResult:
    """:func:`export_records`, also reporting which files were written and removed."""
    planned: dict[Path, str] = {}
    owners: dict[RecordKey, Path] = {}
    folded: dict[str, RecordKey] = {}
    result = ExportResult()
    for record in records:
        key = record_key(record)
        if key in owners:
            raise HarnessError(f"two records of the run {describe_key(key)}; export one per run")
        path = record_path(root, record)
        clash = folded.get(str(path.relative_to(root)).casefold())
        if clash is not None:
            raise HarnessError(
                f"the runs {describe_key(clash)} and {describe_key(key)} would be written to "
                "file names that differ only in letter case; rename one submission"
            )
        folded[str(path.relative_to(root)).casefold()] = key
        owners[key] = path
        planned[path] = dump_record(record)
        result.paths.append(path)
    for path, text in planned.items():
        if _read_text_or_none(path) != text:
            write_text_atomic(path, text)
            result.written.append(path)
    if prune and root.is_dir():
        keep = set(planned)
        if not keep and any(True for _ in _json_files(root)):
            # An empty store is far more often the wrong store than a wish to delete them all.
            raise HarnessError(
                f"no records to export, so --prune would delete every record under {root}; "
                "check the store (--database-url / ZSL_DATABASE_URL) or delete the files by hand"
            )
        for path in _json_files(root):
            if path not in keep:
                try:
                    path.unlink()
                except OSError as err:
                    raise HarnessError(f"cannot remove stale record {path}: {err}") from err
                result.removed.append(path)
        _remove_empty_dirs(root)
    return result


def read_records(root: Path) -> list[RunRecord]:
    """Every ``*.json`` record under ``root``, verified, in the store's order.

    All or nothing: the first bad file raises, naming it.

    Raises
    ------
    HarnessError
        ``root`` is not a folder; a file is a symbolic link, unreadable or not a valid record
        (:func:`load_record`); two files hold the same run.
    IntegrityError
        A file's content does not match its id.
    """
    if not root.is_dir():
        raise HarnessError(f"{root}: no such folder of run records (run `zsl results export`)")
    records: list[RunRecord] = []
    seen: dict[RecordKey, Path] = {}
    for path in _json_files(root):
        if path.is_symlink():
            raise HarnessError(f"{path}: is a symbolic link; record files must be plain files")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise HarnessError(f"{path}: cannot read ({err})") from None
        record = load_record(text, str(path))
        key = record_key(record)
        if key in seen:
            raise HarnessError(
                f"{path}: holds the run {describe_key(key)}, which {seen[key]} holds too; "
                "keep one file per run"
            )
        seen[key] = path
        records.append(record)
    records.sort(key=record_key)
    return records


def _json_files(root: Path) -> Iterator[Path]:
    """``*.json`` files under ``root`` in sorted order, not following linked folders."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        found.extend(Path(folder) / name for name in files if name.endswith(RECORD_SUFFIX))
    yield from sorted(found)


def _remove_empty_dirs(root: Path) -> None:
    for folder, _dirs, _files in sorted(os.walk(root), key=lambda item: -len(item[0])):
        path = Path(folder)
        if path != root and not any(path.iterdir()):
            path.rmdir()


def _read_text_or_none(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


__all__ = [
    "RECORD_FORMAT",
    "ExportResult",
    "describe_key",
    "dump_record",
    "export_records",
    "load_record",
    "read_records",
    "record_id",
    "record_key",
    "record_path",
    "safe_component",
    "write_records",
]
