"""Run records as JSON files: one file per run, content-addressed, stable enough to review.

A record file is ``{"format": "zsl-run-record/2", "id": "sha256:…", "record": {…}}``. The id is
the hash of the record's canonical JSON (sorted keys, no whitespace, floats as Python writes
them; :func:`harness.core.hashing.json_sha256`), so a file is *content-addressed*: whoever reads it
recomputes the id and refuses a record whose content no longer matches it (an edit that did
not re-export). The id is tamper evidence, not a signature: anyone can recompute it, so the
trust boundary stays the review of the git diff.

See docs/results.md.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from harness.core.errors import HarnessError, IntegrityError
from harness.core.hashing import json_sha256
from harness.core.identity import check_distinct_identities
from harness.records import RunKey, RunRecord, result_payload, run_key

RECORD_FORMAT = "zsl-run-record/2"
RECORD_SUFFIX = ".json"
_ENVELOPE_KEYS = frozenset({"format", "id", "record"})

#: Characters kept as they are in file names; everything else is percent-encoded (UTF-8 bytes).
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-")
#: Longest encoded name kept whole: a file name holds two (submission name and version) plus
#: ``.json`` and, while written, a temporary prefix and suffix, within the usual 255 bytes.
_MAX_COMPONENT = 100


# -- one record ---------------------------------------------------------------------------------


def describe_key(key: RunKey) -> str:
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
            f"run of {describe_key(run_key(record))} cannot be exported: {err}; records "
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
    except RecursionError:
        # json refuses nesting deeper than the interpreter's stack; say so, never crash.
        raise HarnessError(f"{where}: nested too deeply to be a run record") from None
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

    See docs/results.md, `safe_component`.
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
    benchmark, version, name, sub_version = run_key(record)
    file_name = (
        f"{safe_component(name, 'submission name')}@"
        f"{safe_component(sub_version, 'submission version')}{RECORD_SUFFIX}"
    )
    return root / safe_component(benchmark, "benchmark id") / f"v{int(version)}" / file_name


# -- folders ------------------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK: opening a FIFO planted under the folder must not hang the reader (it is refused).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _link_error(path: Path) -> HarnessError:
    return HarnessError(
        f"{path}: is a symbolic link; a folder of run records holds only real folders and "
        "files (a link could make the harness read, write or delete outside it)"
    )


def _kind_error(path: Path, what: str) -> HarnessError:
    return HarnessError(f"{path}: is {what}; a folder of run records holds only folders and files")


def _check_entry(path: Path, mode: int) -> None:
    """Refuse anything under a records folder that is neither a real folder nor a regular file."""
    if stat.S_ISLNK(mode):
        raise _link_error(path)
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise _kind_error(path, "not a regular file")


def _open_root(root: Path, *, create: bool) -> int | None:
    """A descriptor of the folder ``root`` (never a link), or None when it is missing.

    With ``create``, a missing ``root`` is created (its parents too: they are above the
    records folder, where the caller chose the path).
    """
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        if not create:
            return None
        try:
            root.mkdir(parents=True, exist_ok=True)
            mode = os.lstat(root).st_mode
        except OSError as err:
            raise HarnessError(f"cannot create {root}: {err.strerror or err}") from None
    except OSError as err:
        raise HarnessError(f"{root}: cannot read ({err.strerror or err})") from None
    if stat.S_ISLNK(mode):
        raise _link_error(root)
    if not stat.S_ISDIR(mode):
        raise HarnessError(f"{root}: not a folder of run records")
    try:
        return os.open(root, _DIR_FLAGS)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link after the lstat
            raise _link_error(root) from None
        raise HarnessError(f"{root}: cannot open ({err.strerror or err})") from None


def _open_subdir(parent: int, name: str, path: Path, *, create: bool) -> int | None:
    """A descriptor of the folder ``name`` in ``parent`` (never through a link), or None."""
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            pass
        except OSError as err:
            raise HarnessError(f"cannot create {path}: {err.strerror or err}") from None
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if create:
            raise HarnessError(f"cannot create {path}: it vanished while being written") from None
        return None
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            except OSError:
                mode = 0
            if stat.S_ISLNK(mode):
                raise _link_error(path) from None
            raise HarnessError(
                f"{path}: is not a folder; a record's benchmark and version are folders"
            ) from None
        raise HarnessError(f"{path}: cannot open ({err.strerror or err})") from None


@contextmanager
def _descriptor(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _read_in(folder: int, name: str, path: Path) -> bytes | None:
    """The bytes of the regular file ``name`` in ``folder``; None when there is none."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _link_error(path) from None
        raise HarnessError(f"{path}: cannot read ({err.strerror or err})") from None
    with _descriptor(fd):
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _kind_error(path, "not a regular file")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        except OSError as err:
            raise HarnessError(f"{path}: cannot read ({err.strerror or err})") from None
    return b"".join(chunks)


def _write_in(folder: int, name: str, data: bytes, path: Path) -> None:
    """Replace the file ``name`` in ``folder`` with ``data``, atomically, creating no link.

    The temporary file is created ``O_EXCL|O_NOFOLLOW`` next to the target and renamed over it:
    a rename replaces a link planted at ``name`` itself, it never writes through it.
    """
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, _CREATE_FLAGS, 0o644, dir_fd=folder)
    except OSError as err:
        raise HarnessError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), 0o644)  # whatever the umask: records are shared
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException as err:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        if isinstance(err, OSError):
            raise HarnessError(f"cannot write {path}: {err.strerror or err}") from None
        raise


@dataclass
class ExportResult:
    """What :func:`write_records` did: every record's path, which files changed, and which were
    kept because they already held the record's result (only its run metadata differed)."""

    paths: list[Path] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def write_records(records: Iterable[RunRecord], root: Path, *, prune: bool = False) -> ExportResult:
    """Write one file per record under ``root``; the result lists their paths (in record order) and
    which files were written and removed.

    A file whose text would not change is left alone, and so is a valid record file of the same
    result (:func:`harness.records.result_payload`) whose run metadata differ: listed in
    ``kept``. With ``prune=True``, ``*.json`` files
    under ``root`` that belong to no given record are removed (and folders left empty).

    See docs/results.md, `write_records`.
    """
    planned: dict[Path, str] = {}
    results: dict[Path, RunRecord] = {}
    owners: dict[RunKey, Path] = {}
    folded: dict[str, RunKey] = {}
    result = ExportResult()
    for record in records:
        key = run_key(record)
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
        results[path] = record
        result.paths.append(path)
    # Refuse a link anywhere under root before writing anything: a refused export changes
    # nothing. The writes below open every folder with O_NOFOLLOW, so a link swapped in later is
    # refused as well.
    existing = _scan(root)
    if prune and not planned and any(p.name.endswith(RECORD_SUFFIX) for p in existing):
        # An empty store is far more often the wrong store than a wish to delete them all.
        raise HarnessError(
            f"no records to export, so --prune would delete every record under {root}; "
            "check the store (--database-url / ZSL_DATABASE_URL) or delete the files by hand"
        )
    if planned or (prune and existing):
        root_fd = _open_root(root, create=bool(planned))
        if root_fd is not None:
            with _descriptor(root_fd):
                for path, text in planned.items():
                    done = _write_if_changed(
                        root_fd, root, path, text.encode("utf-8"), results[path]
                    )
                    if done == "written":
                        result.written.append(path)
                    elif done == "kept":
                        result.kept.append(path)
                if prune:
                    keep = {path.relative_to(root).parts for path in planned}
                    _prune(root_fd, root, (), keep, result.removed)
    result.removed.sort()
    return result


@contextmanager
def _folder_fd(root_fd: int, root: Path, folders: list[str], *, create: bool) -> Iterator[int]:
    """The descriptor of ``root/folders…``, each step opened with ``O_NOFOLLOW`` (created when
    ``create``); every descriptor opened on the way is closed on exit."""
    fds: list[int] = []
    try:
        parent, where = root_fd, root
        for folder in folders:
            where = where / folder
            fd = _open_subdir(parent, folder, where, create=create)
            if fd is None:
                raise HarnessError(f"{where}: vanished while being read")
            fds.append(fd)
            parent = fd
        yield parent
    finally:
        for fd in fds:
            os.close(fd)


def _write_if_changed(
    root_fd: int, root: Path, path: Path, data: bytes, record: RunRecord
) -> Literal["unchanged", "kept", "written"]:
    """Write ``data`` (``record``'s file text) at ``path`` unless the file holds it already
    ("unchanged") or holds a record of the same result with other run metadata ("kept")."""
    *folders, name = path.relative_to(root).parts
    with _folder_fd(root_fd, root, folders, create=True) as parent:
        existing = _read_in(parent, name, path)
        if existing == data:
            return "unchanged"
        if existing is not None and _holds_result(existing, record, path):
            return "kept"
        _write_in(parent, name, data, path)
        return "written"


def _holds_result(data: bytes, record: RunRecord, path: Path) -> bool:
    """Whether ``data`` is a valid record file of ``record``'s result (only run metadata differ).

    Results compare as canonical JSON, so a score differing in its last bit is another result.
    A file that is not a valid record (edited, truncated, an older format) is not: the export
    replaces it."""
    try:
        held = load_record(data.decode("utf-8"), str(path))
    except (UnicodeDecodeError, HarnessError):
        return False
    return json_sha256(result_payload(held)) == json_sha256(result_payload(record))


def _prune(
    folder: int,
    root: Path,
    relative: tuple[str, ...],
    keep: set[tuple[str, ...]],
    removed: list[Path],
) -> bool:
    """Remove ``*.json`` files not in ``keep`` under ``folder``, then emptied folders.

    Walks by descriptors (``scandir`` of an open folder, children opened with ``O_NOFOLLOW``)
    and removes with ``dir_fd``, so nothing is ever deleted through a link: a link met here is
    refused. Returns whether ``folder`` is empty afterwards.
    """
    where = root.joinpath(*relative)
    left = 0
    with os.scandir(folder) as entries:
        children = sorted(entries, key=lambda entry: entry.name)
    for entry in children:
        path = where / entry.name
        if entry.is_symlink():
            raise _link_error(path)
        if entry.is_dir(follow_symlinks=False):
            fd = _open_subdir(folder, entry.name, path, create=False)
            if fd is None:
                continue
            with _descriptor(fd):
                empty = _prune(fd, root, (*relative, entry.name), keep, removed)
            if empty:
                try:
                    os.rmdir(entry.name, dir_fd=folder)
                    continue
                except OSError as err:
                    raise HarnessError(f"cannot remove emptied folder {path}: {err}") from err
        elif (
            entry.name.endswith(RECORD_SUFFIX)
            and entry.is_file(follow_symlinks=False)
            and (*relative, entry.name) not in keep
        ):
            try:
                os.unlink(entry.name, dir_fd=folder)
            except OSError as err:
                raise HarnessError(f"cannot remove stale record {path}: {err}") from err
            removed.append(path)
            continue
        left += 1
    return left == 0


def _scan(root: Path) -> list[Path]:
    """Every file under ``root`` (none if it is missing), refusing links and special files.

    The folder itself must not be a link either. Walks by descriptors, never following a link.
    """
    root_fd = _open_root(root, create=False)
    if root_fd is None:
        return []
    found: list[Path] = []
    with _descriptor(root_fd):
        _scan_folder(root_fd, root, found)
    return sorted(found)


def _scan_folder(folder: int, where: Path, found: list[Path]) -> None:
    with os.scandir(folder) as entries:
        children = sorted(entries, key=lambda entry: entry.name)
    for entry in children:
        path = where / entry.name
        _check_entry(path, entry.stat(follow_symlinks=False).st_mode)
        if entry.is_dir(follow_symlinks=False):
            fd = _open_subdir(folder, entry.name, path, create=False)
            if fd is not None:
                with _descriptor(fd):
                    _scan_folder(fd, path, found)
        else:
            found.append(path)


@dataclass(frozen=True)
class RecordFile:
    """One record file as read: where it is, its exact text, and the verified record."""

    path: Path
    text: str
    record: RunRecord


def read_record_files(root: Path) -> list[RecordFile]:
    """Every ``*.json`` record under ``root`` with its text, verified, in path order.

    All or nothing, as :func:`read_records`; the text lets a caller compare a file with another
    revision's byte for byte.
    """
    try:
        mode = os.lstat(root).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        raise _link_error(root)
    if not stat.S_ISDIR(mode):
        raise HarnessError(f"{root}: no such folder of run records (run `zsl results export`)")
    files: list[RecordFile] = []
    seen: dict[RunKey, Path] = {}
    root_fd = _open_root(root, create=False)
    if root_fd is None:
        raise HarnessError(f"{root}: no such folder of run records (run `zsl results export`)")
    with _descriptor(root_fd):
        for path in _scan(root):
            if not path.name.endswith(RECORD_SUFFIX):
                continue
            *folders, name = path.relative_to(root).parts
            data = _read_relative(root_fd, root, folders, name, path)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as err:
                raise HarnessError(f"{path}: cannot read ({err})") from None
            record = load_record(text, str(path))
            key = run_key(record)
            if key in seen:
                raise HarnessError(
                    f"{path}: holds the run {describe_key(key)}, which {seen[key]} holds too; "
                    "keep one file per run"
                )
            seen[key] = path
            files.append(RecordFile(path, text, record))
    # "eszsl" and "\u0435szsl" must not load as two entries (whoever reads the files: the
    # importer, the site, CI).
    check_distinct_identities([file.record for file in files])
    return files


def _read_relative(root_fd: int, root: Path, folders: list[str], name: str, path: Path) -> bytes:
    with _folder_fd(root_fd, root, folders, create=False) as parent:
        data = _read_in(parent, name, path)
    if data is None:
        raise HarnessError(f"{path}: vanished while being read")
    return data


def read_records(root: Path) -> list[RunRecord]:
    """Every ``*.json`` record under ``root``, verified, in the store's order.

    All or nothing: the first bad file raises, naming it.

    Raises
    ------
    HarnessError
        ``root`` is not a folder, or is a symbolic link; anything under it is a symbolic link
        (file or folder, whatever its name) or neither a folder nor a regular file; a file is
        unreadable or not a valid record (:func:`load_record`); two files hold the same run.
    IntegrityError
        A file's content does not match its id.
    """
    records = [file.record for file in read_record_files(root)]
    records.sort(key=run_key)
    return records


__all__ = [
    "RECORD_FORMAT",
    "ExportResult",
    "RecordFile",
    "describe_key",
    "dump_record",
    "load_record",
    "read_record_files",
    "read_records",
    "record_id",
    "record_path",
    "safe_component",
    "write_records",
]
