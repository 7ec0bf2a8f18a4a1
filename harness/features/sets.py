"""Frozen artifact sets: what `zsl features extract` and `zsl embeddings build` write.

A set is a directory that a spec references by path and pins by hash::

    <set>/
        manifest.json     format, kind, artifacts (shape, dtype, content sha256), provenance, hash
        features.npy      ...one .npy per artifact, as in a frozen benchmark

The artifacts are hashed by content (:func:`harness.core.hashing.array_sha256`) and read back
through :func:`harness.core.arrays.load_verified` (memory-mapped when large, every read
verified), like a frozen benchmark's. ``provenance`` says how the arrays were made (backbone,
weights sha256, preprocessing, text model, versions); the set hash covers it, so an edited
provenance fails the hash check like an edited array. The manifest is written last, by rename: a
directory without one is unfinished work, never a set.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness.core.arrays import ArtifactEntry, artifact_path, load_verified
from harness.core.atomic import directory_atomic
from harness.core.errors import HarnessError, IntegrityError
from harness.core.hashing import array_sha256, json_sha256

__all__ = ["FORMAT", "MANIFEST", "ArtifactSet", "set_hash", "write_set"]

FORMAT = "zsl-artifact-set/1"
MANIFEST = "manifest.json"
SetKind = Literal["features", "class-embeddings"]


def set_hash(kind: str, entries: dict[str, ArtifactEntry], provenance: dict[str, Any]) -> str:
    """The set hash: its kind, every artifact's entry and the provenance."""
    return json_sha256(
        {
            "format": FORMAT,
            "kind": kind,
            "artifacts": {name: entries[name].to_json() for name in sorted(entries)},
            "provenance": provenance,
        }
    )


def seal_set(
    root: Path, names: list[str], kind: SetKind, provenance: dict[str, Any]
) -> ArtifactSet:
    """Hash the artifacts ``names`` already saved under ``root`` and write its manifest (last,
    atomically), making ``root`` a set; returns it, verified."""
    entries: dict[str, ArtifactEntry] = {}
    for name in sorted(names):
        array = np.load(artifact_path(root, name), mmap_mode="r", allow_pickle=False)
        entries[name] = ArtifactEntry(
            tuple(int(s) for s in array.shape), array.dtype.str, array_sha256(array)
        )
        del array
    manifest = {
        "format": FORMAT,
        "kind": kind,
        "artifacts": {name: entries[name].to_json() for name in sorted(entries)},
        "provenance": provenance,
        "hash": set_hash(kind, entries, provenance),
    }
    fd, tmp = tempfile.mkstemp(prefix=".manifest.", suffix=".tmp", dir=root)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, root / MANIFEST)
    return ArtifactSet(root, kind=kind)


def write_set(
    out: Path,
    arrays: dict[str, np.ndarray],
    kind: SetKind,
    provenance: dict[str, Any],
    *,
    write_more: Callable[[Path], list[str]] | None = None,
) -> ArtifactSet:
    """Write a set at ``out`` as one step: ``arrays`` (and what ``write_more(folder)`` saves
    there, returning the artifact names, for arrays too big to hold) go to a temporary sibling
    folder, which is sealed and renamed to ``out``; nothing is left behind on any error, and an
    ``out`` that exists is refused."""
    if out.exists():
        raise HarnessError(f"{out} already exists; choose another --out (a set is never replaced)")
    try:
        # mkdtemp and mkstemp make 0700 and 0600: sets are meant to be shared
        with directory_atomic(out, mode=0o755) as tmp:
            names = list(arrays)
            for name, array in arrays.items():
                path = artifact_path(tmp, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                np.save(path, array, allow_pickle=False)
            if write_more is not None:
                names += write_more(tmp)
            seal_set(tmp, names, kind, provenance)
            os.chmod(tmp / MANIFEST, 0o644)
            if out.exists():
                raise HarnessError(
                    f"{out} appeared while the set was written; choose another --out"
                )
    except OSError as err:
        raise HarnessError(f"cannot write {out}: {err}") from None
    return ArtifactSet(out, kind=kind)


class ArtifactSet:
    """Read access to a frozen artifact set; every array read is verified.

    ``kind``: the kind the caller needs (a feature set where class embeddings were given is
    refused with both names).
    """

    def __init__(self, root: str | os.PathLike[str], *, kind: SetKind | None = None) -> None:
        self.root = Path(root)
        manifest_path = self.root / MANIFEST
        what = "a feature set" if kind == "features" else "an artifact set"
        if kind == "class-embeddings":
            what = "a class-embedding set"
        if not self.root.is_dir():
            raise HarnessError(f"{self.root}: no such directory; expected {what}")
        try:
            manifest = json.loads(manifest_path.read_text())
        except FileNotFoundError:
            raise HarnessError(
                f"{self.root} is not {what}: it has no {MANIFEST} (an extraction that did not"
                " finish leaves none; run the same command again to resume it)"
            ) from None
        except (OSError, ValueError) as err:
            raise IntegrityError(f"{manifest_path} is unreadable or not JSON: {err}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise IntegrityError(f"{manifest_path}: not a '{FORMAT}' manifest")
        try:
            self.kind: str = str(manifest["kind"])
            self.entries = {
                name: ArtifactEntry(tuple(e["shape"]), str(e["dtype"]), str(e["sha256"]))
                for name, e in manifest["artifacts"].items()
            }
            self.provenance: dict[str, Any] = dict(manifest["provenance"])
            self.hash: str = str(manifest["hash"])
        except (KeyError, TypeError, ValueError) as err:
            raise IntegrityError(f"{manifest_path}: malformed manifest ({err!r})") from None
        actual = set_hash(self.kind, self.entries, self.provenance)
        if actual != self.hash:
            raise IntegrityError(
                f"{manifest_path}: manifest hash mismatch: recorded {self.hash}, computed"
                f" {actual}. The manifest (an artifact entry or the provenance) was edited; make"
                " the set again."
            )
        if kind is not None and self.kind != kind:
            raise HarnessError(f"{self.root} holds {self.kind}, not {kind}")
        self._cache: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def array(self, name: str) -> np.ndarray:
        """Load, verify and cache one artifact."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        if name not in self.entries:
            raise IntegrityError(
                f"{self.root}: artifact {name!r} is not in the manifest"
                f" (have: {', '.join(sorted(self.entries))})"
            )
        array = load_verified(
            artifact_path(self.root, name),
            self.entries[name],
            name,
            remedy=f"Delete {self.root} and make the set again.",
        )
        self._cache[name] = array
        return array

    def strings(self, name: str) -> list[str]:
        return [str(s) for s in self.array(name).tolist()]

    def verify(self) -> None:
        for name in sorted(self.entries):
            self._cache.pop(name, None)
            self.array(name)
