"""The prediction archive: every scored prediction file kept, content-addressed, for re-scoring.

A stored run can be re-scored when a metric changes only if the predictions it was scored from
still exist; model code is not re-run for that. :func:`archive_predictions` (called by the
pipeline before it stores a run) copies each prediction file into the archive, and
:func:`archived_paths` finds them again for a record, verified.

See docs/results.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.atomic import write_bytes_atomic
from harness.core.errors import HarnessError, IntegrityError
from harness.core.hashing import file_sha256
from harness.core.home import zsl_home
from harness.submission.predictions import Predictions

PREDICTIONS_DIR_ENV = "ZSL_PREDICTIONS_DIR"
REFERENCE_FORMAT = "zsl-prediction-ref/1"
_HASH = re.compile(r"sha256:([0-9a-f]{64})")
_SUFFIXES = (".safetensors", ".npz")
_BLOCK = 1 << 20


class ArchiveMissingError(HarnessError):
    """No archived prediction file for a hash (the run was imported, or the archive was moved)."""


def predictions_dir() -> Path:
    """``ZSL_PREDICTIONS_DIR`` if set, else ``<ZSL_HOME>/predictions`` (not created)."""
    raw = os.environ.get(PREDICTIONS_DIR_ENV, "").strip()
    return Path(raw).expanduser() if raw else zsl_home().expanduser() / "predictions"


def archive_predictions(
    paths: Mapping[str, Path],
    predictions: Mapping[str, Predictions],
    root: Path | None = None,
) -> dict[str, str]:
    """Archive the file of every setting in ``paths``; return setting → sha256 of its bytes.

    ``predictions`` are the checked predictions read from those files (their ``sha256`` is the
    content hash the run record will hold, their benchmark hash what they were scored for).

    Raises
    ------
    HarnessError
        A file has a suffix the reader does not know, or the archive cannot be written.
    """
    root = predictions_dir() if root is None else root
    return {
        setting: archive_file(
            path,
            content_hash=predictions[setting].sha256,
            benchmark_hash=predictions[setting].benchmark_hash,
            setting=setting,
            root=root,
        )
        for setting, path in paths.items()
    }


def archive_file(
    path: Path, *, content_hash: str, benchmark_hash: str, setting: str, root: Path
) -> str:
    """Copy ``path`` into the archive under ``root`` and reference it by ``content_hash``.

    Returns the ``sha256:<hex>`` of the file's bytes.
    """
    content_hex = _hex(content_hash, "content hash")
    if path.suffix not in _SUFFIXES:
        raise HarnessError(f"{path}: prediction files end in {' or '.join(_SUFFIXES)}")
    blobs = root / "sha256"
    file_hash = _copy_verified(path, blobs)
    reference = {
        "format": REFERENCE_FORMAT,
        "file": file_hash,
        "suffix": path.suffix,
        "content_hash": content_hash,
        "benchmark_hash": benchmark_hash,
        "setting": setting,
    }
    ref_path = root / "content" / "sha256" / content_hex / f"{_hex(file_hash, 'file hash')}.json"
    write_bytes_atomic(ref_path, (json.dumps(reference, sort_keys=True) + "\n").encode())
    return file_hash


def archived_paths(
    hashes: Mapping[str, str], *, benchmark_hash: str, root: Path | None = None
) -> dict[str, Path]:
    """The verified archived file of every setting → content hash in ``hashes``.

    Raises
    ------
    ArchiveMissingError
        No archived file holds the predictions of a setting for ``benchmark_hash``.
    IntegrityError
        An archived file's bytes do not match the hash it is stored under.
    HarnessError
        A hash is not ``sha256:<64 hex>``.
    """
    root = predictions_dir() if root is None else root
    return {
        setting: archived_path(content, benchmark_hash=benchmark_hash, setting=setting, root=root)
        for setting, content in hashes.items()
    }


def archived_path(content_hash: str, *, benchmark_hash: str, setting: str, root: Path) -> Path:
    """The archived file holding ``content_hash`` for (``benchmark_hash``, ``setting``), verified.

    See :func:`archived_paths` for the errors.
    """
    # Hashes come from records, which may be imported: check their form before they name paths.
    content_hex = _hex(content_hash, f"predictions hash of {setting!r}")
    folder = root / "content" / "sha256" / content_hex
    candidates = sorted(folder.glob("*.json")) if folder.is_dir() else []
    for ref_path in candidates:
        reference = _read_reference(ref_path)
        if reference is None:
            continue
        if (
            reference.get("benchmark_hash") != benchmark_hash
            or reference.get("setting") != setting
            or reference.get("suffix") not in _SUFFIXES
            or not isinstance(reference.get("file"), str)
            or _HASH.fullmatch(reference["file"]) is None
        ):
            continue
        blob = root / "sha256" / f"{_hex(reference['file'], 'file hash')}{reference['suffix']}"
        if not blob.is_file():
            continue
        actual = file_sha256(blob)
        if actual != reference["file"]:
            raise IntegrityError(
                f"{blob}: archived prediction file has sha256 {actual}, not {reference['file']} "
                "as its name says; the archive is damaged (delete the file and re-run the "
                "submission to archive it again)"
            )
        return blob
    raise ArchiveMissingError(
        f"no archived {setting!r} predictions with hash {content_hash} for benchmark "
        f"{benchmark_hash} under {root} (imported runs have none; re-run the submission, or "
        f"point {PREDICTIONS_DIR_ENV} at the archive)"
    )


# -- helpers ------------------------------------------------------------------------------------


def _hex(value: str, what: str) -> str:
    match = _HASH.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise HarnessError(f"{what} {value!r} is not of the form sha256:<64 lowercase hex digits>")
    return match.group(1)


def _read_reference(path: Path) -> dict[str, Any] | None:
    """A reference's fields, or None for a file that is not one (a stray or damaged file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != REFERENCE_FORMAT:
        return None
    return data


def _copy_verified(source: Path, blobs: Path) -> str:
    """Copy ``source`` into ``blobs/<sha256 of its bytes><suffix>``; return that hash."""
    try:
        blobs.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".incoming.", suffix=".tmp", dir=blobs)
    except OSError as err:
        raise HarnessError(
            f"cannot write the prediction archive {blobs.parent}: {err}; set "
            f"{PREDICTIONS_DIR_ENV} or ZSL_HOME to a writable folder"
        ) from err
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with source.open("rb") as reader, os.fdopen(fd, "wb") as writer:
            for block in iter(lambda: reader.read(_BLOCK), b""):
                digest.update(block)
                writer.write(block)
            writer.flush()
            os.fsync(writer.fileno())
        file_hash = "sha256:" + digest.hexdigest()
        target = blobs / f"{digest.hexdigest()}{source.suffix}"
        if target.is_file() and file_sha256(target) == file_hash:
            tmp.unlink()  # already archived, intact
        else:
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise HarnessError(f"cannot archive {source} into {blobs}: {err}") from err
    return file_hash


__all__ = [
    "PREDICTIONS_DIR_ENV",
    "ArchiveMissingError",
    "archive_file",
    "archive_predictions",
    "archived_path",
    "archived_paths",
    "predictions_dir",
]
