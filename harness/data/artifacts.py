"""Frozen benchmarks on disk: ``manifest.json`` plus one ``.npy`` per artifact.

See docs/data.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from harness.audit import LeakageAudit
from harness.core.arrays import ArtifactEntry, artifact_path, load_verified
from harness.core.atomic import directory_atomic
from harness.core.errors import HarnessError, IntegrityError
from harness.core.hashing import array_sha256, json_sha256
from harness.core.home import zsl_home
from harness.data.sources import read_section

__all__ = [
    "FORMAT",
    "MANIFEST",
    "FrozenBenchmark",
    "OutdatedFormatError",
    "benchmark_dir",
    "benchmark_hash",
    "cache_action",
    "outdated_message",
    "write_frozen",
]

MANIFEST = "manifest.json"
FORMAT = "zsl-frozen/3"
#: Formats of older harnesses, refused with what changed and how to freeze again.
OUTDATED_FORMATS = {
    "zsl-frozen/1": "it holds no leakage audit (its runs were audited when scored, so their"
    " badge depended on the scorer's environment)",
    "zsl-frozen/2": "it does not record where its raw inputs came from (a release, a synthetic"
    " stand-in, generated or your own data) nor the hashes of the files it was frozen from",
}


def benchmark_dir(benchmark: str, version: int, home: Path | None = None) -> Path:
    return (home or zsl_home()) / "benchmarks" / benchmark / f"v{version}"


def benchmark_hash(entries: dict[str, ArtifactEntry], audit: dict[str, Any]) -> str:
    """The benchmark hash: every artifact's entry and the frozen leakage audit (its JSON)."""
    return json_sha256(
        {
            "artifacts": {name: entries[name].to_json() for name in sorted(entries)},
            "leakage_audit": audit,
        }
    )


class OutdatedFormatError(HarnessError):
    """A benchmark frozen by an older harness, in a format this one refuses (exit code 1)."""


def outdated_message(root: Path, found: str, spec: str = "SPEC") -> str:
    """Why a benchmark of an older format is refused, and the commands that freeze it again."""
    return (
        f"{root} was frozen by an older harness (format '{found}'; this harness reads"
        f" '{FORMAT}'): {OUTDATED_FORMATS[found]}. Nothing is converted silently: freeze it"
        f" again, `zsl data prepare {spec} --refresh` (the benchmark hash stays the same when"
        " the raw inputs are the same)"
    )


CacheAction = Literal["create", "use", "conflict", "outdated"]


def cache_action(root: Path, data_hash: str) -> CacheAction:
    """Decide what ``prepare`` must do with ``root``; decides only, never acts.

    ``create`` when nothing is there, ``use`` when a manifest for the same spec data is there,
    ``conflict`` when a manifest made from different spec data is there, ``outdated`` when a
    manifest of an older format (:data:`OUTDATED_FORMATS`) is there.
    """
    manifest = root / MANIFEST
    if not manifest.exists():
        return "create"
    try:
        recorded = json.loads(manifest.read_text())
        if recorded.get("format") in OUTDATED_FORMATS:
            return "outdated"
        recorded_hash = recorded.get("spec_data_hash")
    except (OSError, ValueError, AttributeError):
        return "use"  # let the verifying open() report the damage precisely
    return "use" if recorded_hash == data_hash else "conflict"


def write_frozen(
    root: Path,
    arrays: dict[str, np.ndarray],
    *,
    benchmark: str,
    version: int,
    spec_data_hash: str,
    audit: LeakageAudit,
    raw_inputs: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> FrozenBenchmark:
    """Write ``arrays``, the leakage ``audit`` and where the raw inputs came from
    (:func:`harness.data.sources.source_manifest`) as a frozen benchmark at ``root``,
    atomically; ``root`` must not exist."""
    if root.exists():
        raise IntegrityError(f"{root} already exists; refusing to overwrite a frozen benchmark")
    with directory_atomic(root) as tmp:
        entries: dict[str, ArtifactEntry] = {}
        for name in sorted(arrays):
            array = np.asarray(arrays[name])
            if array.dtype.hasobject:
                raise TypeError(f"artifact {name!r} has an object dtype; it cannot be frozen")
            path = artifact_path(tmp, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, array, allow_pickle=False)
            entries[name] = ArtifactEntry(
                tuple(int(s) for s in array.shape), array.dtype.str, array_sha256(array)
            )
        audit_json = audit.model_dump(mode="json")
        manifest = {
            "format": FORMAT,
            "benchmark": benchmark,
            "version": version,
            "spec_data_hash": spec_data_hash,
            "meta": meta or {},
            "artifacts": {name: entries[name].to_json() for name in sorted(entries)},
            "leakage_audit": audit_json,
            "raw_inputs": raw_inputs,
            "hash": benchmark_hash(entries, audit_json),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        FrozenBenchmark(tmp).verify()
    return FrozenBenchmark(root)


class FrozenBenchmark:
    """Read access to a frozen benchmark directory; every array read is verified."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        manifest_path = self.root / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text())
        except FileNotFoundError:
            raise HarnessError(
                f"no frozen benchmark at {self.root} (missing {MANIFEST}); run `zsl data prepare`"
            ) from None
        except (OSError, ValueError) as err:
            raise IntegrityError(f"{manifest_path} is unreadable or not JSON: {err}") from None
        found = manifest.get("format") if isinstance(manifest, dict) else None
        if isinstance(found, str) and found in OUTDATED_FORMATS:
            raise OutdatedFormatError(outdated_message(self.root, found))
        if not isinstance(manifest, dict) or found != FORMAT:
            raise IntegrityError(f"{manifest_path}: not a '{FORMAT}' manifest")
        try:
            self.entries = {
                name: ArtifactEntry(tuple(e["shape"]), str(e["dtype"]), str(e["sha256"]))
                for name, e in manifest["artifacts"].items()
            }
            self.hash: str = manifest["hash"]
            self.benchmark: str = manifest["benchmark"]
            self.version: int = int(manifest["version"])
            self.spec_data_hash: str = manifest["spec_data_hash"]
            self.meta: dict[str, Any] = manifest.get("meta", {})
            audit_json = manifest["leakage_audit"]
            raw_section = manifest["raw_inputs"]
        except (KeyError, TypeError, ValueError) as err:
            raise IntegrityError(f"{manifest_path}: malformed manifest ({err!r})") from None
        actual = benchmark_hash(self.entries, audit_json)
        if actual != self.hash:
            raise IntegrityError(
                f"{manifest_path}: manifest hash mismatch: recorded {self.hash}, computed {actual}."
                " The manifest (an artifact entry or the leakage audit) was edited; delete the"
                " directory and run `zsl data prepare` again."
            )
        try:
            #: The leakage audit frozen with the benchmark (covered by :attr:`hash`).
            self.audit: LeakageAudit = LeakageAudit.model_validate(audit_json)
        except ValidationError as err:
            raise IntegrityError(
                f"{manifest_path}: leakage_audit is not a leakage audit this harness reads"
                f" ({err.error_count()} problem(s), first at"
                f" {'.'.join(str(p) for p in err.errors()[0]['loc'])})"
            ) from None
        #: Where the raw inputs came from and the files they were read from (sealed).
        self.raw_inputs: dict[str, Any] = read_section(raw_section, manifest_path)
        self._cache: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def names(self, prefix: str = "") -> list[str]:
        return sorted(n for n in self.entries if n.startswith(prefix))

    def path(self, name: str) -> Path:
        return artifact_path(self.root, name)

    def array(self, name: str) -> np.ndarray:
        """Load, verify and cache one artifact (memory-mapped read-only when large)."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        try:
            entry = self.entries[name]
        except KeyError:
            raise IntegrityError(
                f"{self.root}: artifact {name!r} is not in the manifest"
                f" (have: {', '.join(sorted(self.entries))})"
            ) from None
        array = load_verified(
            self.path(name),
            entry,
            name,
            remedy=f"Delete {self.root} and run `zsl data prepare` again; it is never rebuilt"
            " silently.",
        )
        self._cache[name] = array
        return array

    def verify(self) -> list[str]:
        """Re-hash every artifact; return the names checked or raise on the first mismatch."""
        checked = []
        for name in sorted(self.entries):
            self._cache.pop(name, None)
            self.array(name)
            checked.append(name)
        return checked
