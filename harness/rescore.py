"""One stored run scored again from its archived predictions, when the metrics changed.

A run is *stale* when a score's metric version is no longer the registered one, or its list of
(setting, metric key, function) is not what its spec declares today (:func:`stale_reasons`).
:func:`rescore_record` scores the archived prediction files (their content checked against the
record's hashes) with the current metrics. Only ``scores`` and one line of ``logs["rescore"]``
(no time stamp, so re-scoring twice gives the same record) change. See docs/results.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import harness
from harness.core.errors import HarnessError, IntegrityError, SpecError
from harness.data.prepare import PreparedBenchmark
from harness.metrics import metrics
from harness.pipeline import read_all
from harness.records import RunRecord, ScoreEntry, run_key
from harness.results.prediction_archive import archived_paths
from harness.results.records_io import describe_key
from harness.scoring import WARNINGS_LOG, score, with_chance_warnings
from harness.spec import Spec, load_spec, spec_files

__all__ = [
    "RescoreOutcome",
    "SpecKey",
    "beyond_scores",
    "expected_entries",
    "find_specs",
    "rescorable_hashes",
    "rescore_record",
    "score_changes",
    "stale_reasons",
]

Status = Literal["current", "rescored", "would rescore", "skipped", "failed"]
SpecKey = tuple[str, int]


@dataclass
class RescoreOutcome:
    """What happened to one stored run.

    ``reasons`` say why the run is stale (empty when current); ``changes`` list the score
    entries whose version or value changed (after scoring); ``message`` says why a run was
    skipped or failed; ``rescored`` is the new record (also under ``--dry-run``).
    """

    record: RunRecord
    status: Status
    reasons: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    message: str = ""
    rescored: RunRecord | None = None

    @property
    def run(self) -> str:
        return describe_key(run_key(self.record))

    @property
    def ok(self) -> bool:
        return self.status in ("current", "rescored", "would rescore")


def find_specs(specs_dir: Path) -> dict[SpecKey, Spec]:
    """Every spec under ``specs_dir`` (``*.yaml``, recursively, spec bases ``_*.yaml`` left out)
    by (benchmark id, version).

    Raises
    ------
    HarnessError
        ``specs_dir`` is not a folder, a spec is invalid (naming the file), or two files
        declare the same benchmark version.
    """
    if not specs_dir.is_dir():
        raise HarnessError(f"{specs_dir}: no such folder of benchmark specs (see --specs)")
    found: dict[SpecKey, Spec] = {}
    where: dict[SpecKey, Path] = {}
    for path in spec_files(specs_dir):
        spec = load_spec(path)
        key = (spec.benchmark, spec.version)
        if key in found:
            raise SpecError(
                f"{path}: declares {spec.benchmark} v{spec.version}, which {where[key]} declares "
                "too; a benchmark version has one spec"
            )
        found[key] = spec
        where[key] = path
    return found


def expected_entries(spec: Spec) -> list[tuple[str, str, str]]:
    """(setting, result key, metric function) of every score the spec declares, in order."""
    return [(s, m.result_key, m.name) for s in spec.settings for m in spec.metrics_for(s)]


def stale_reasons(record: RunRecord, spec: Spec | None) -> list[str]:
    """Why ``record`` needs re-scoring: outdated metric versions, a different metric list.

    Without a spec only the versions can be compared.
    """
    reasons: list[str] = []
    if spec is not None:
        stored = [(e.setting, e.metric, e.function) for e in record.scores]
        expected = expected_entries(spec)
        if stored != expected:
            missing = [f"{s}/{k}" for s, k, f in expected if (s, k, f) not in stored]
            extra = [f"{s}/{k}" for s, k, f in stored if (s, k, f) not in expected]
            parts = []
            if missing:
                parts.append("not scored: " + ", ".join(missing))
            if extra:
                parts.append("no longer in the spec: " + ", ".join(extra))
            reasons.append(
                "metric list differs from the spec (" + ("; ".join(parts) or "order") + ")"
            )
    for entry in record.scores:
        if entry.function not in metrics:
            reasons.append(
                f"{entry.setting}/{entry.metric}: metric {entry.function!r} is no longer registered"
            )
            continue
        current = metrics.get(entry.function).version
        if current != entry.version:
            reasons.append(
                f"{entry.setting}/{entry.metric}: {entry.function} version {entry.version} "
                f"-> {current}"
            )
    return reasons


def rescorable_hashes(record: RunRecord, spec: Spec, benchmark_hash: str) -> dict[str, str]:
    """The prediction hash of each setting ``spec`` scores, once ``record`` is known to have
    been scored against this very spec and benchmark.

    Raises
    ------
    IntegrityError
        The spec or the benchmark does not match the hashes the record holds.
    HarnessError
        The record lacks a prediction hash the spec needs.
    """
    run = describe_key(run_key(record))
    if spec.spec_hash() != record.benchmark.spec_hash:
        raise IntegrityError(
            f"{run}: was scored against spec hash {record.benchmark.spec_hash}, but "
            f"{spec.path} hashes to {spec.spec_hash()}; a changed spec needs a new version "
            "(re-run the submissions on it) or the spec the run was scored with"
        )
    if benchmark_hash != record.benchmark.hash:
        raise IntegrityError(
            f"{run}: was scored on data {record.benchmark.hash}, but the frozen "
            f"{spec.benchmark} v{spec.version} is {benchmark_hash}"
        )
    settings = spec.prediction_settings()
    missing = [s for s in settings if s not in record.predictions_hashes]
    if missing:
        raise HarnessError(
            f"{run}: the record holds no predictions hash for {', '.join(missing)}, which the "
            "spec's metrics need"
        )
    return {s: record.predictions_hashes[s] for s in settings}


def rescore_record(
    record: RunRecord,
    spec: Spec,
    bench: PreparedBenchmark,
    *,
    reasons: Iterable[str] = (),
    archive_root: Path | None = None,
) -> RunRecord:
    """Score ``record``'s archived predictions on ``bench`` again; the record with new scores.

    Raises
    ------
    IntegrityError
        The spec, benchmark or an archived file does not match the hashes the record holds.
    ArchiveMissingError
        A prediction file is not archived.
    HarnessError
        The record lacks a prediction hash the spec needs, or scoring failed.
    """
    run = describe_key(run_key(record))
    hashes = rescorable_hashes(record, spec, bench.hash)
    paths = archived_paths(hashes, benchmark_hash=record.benchmark.hash, root=archive_root)
    predictions = read_all(bench, paths)
    for setting, checked in predictions.items():
        if checked.sha256 != hashes[setting]:
            raise IntegrityError(
                f"{run}: archived {setting!r} predictions {paths[setting]} hold content "
                f"{checked.sha256}, not {hashes[setting]} as the record says"
            )
    scores = score(bench, predictions)
    why = "; ".join(reasons) or "forced"
    logs = {**record.logs, "rescore": f"re-scored by zsl-harness {harness.__version__}: {why}"}
    return with_chance_warnings(record.model_copy(update={"scores": scores, "logs": logs}))


def score_changes(old: list[ScoreEntry], new: list[ScoreEntry]) -> list[str]:
    """One line per entry added, removed, or changed in version or value."""
    before = {(e.setting, e.metric): e for e in old}
    after = {(e.setting, e.metric): e for e in new}
    lines: list[str] = []
    for key, entry in after.items():
        name = f"{key[0]}/{key[1]}"
        previous = before.get(key)
        if previous is None:
            lines.append(f"{name}: new ({entry.function} v{entry.version}) = {entry.value:.6g}")
            continue
        parts = []
        if previous.version != entry.version or previous.function != entry.function:
            parts.append(
                f"{previous.function} v{previous.version} -> {entry.function} v{entry.version}"
            )
        if previous.value != entry.value:
            parts.append(f"{previous.value:.6g} -> {entry.value:.6g}")
        if parts:
            lines.append(f"{name}: " + ", ".join(parts))
    lines.extend(f"{s}/{m}: removed" for s, m in before if (s, m) not in after)
    return lines


def beyond_scores(record: RunRecord) -> dict[str, object]:
    """What a re-score must leave as it is: the record but its scores and the logs that follow
    from them (the rescore line, the below-chance warnings)."""
    data = record.model_dump(mode="json")
    del data["scores"]
    data["logs"].pop("rescore", None)
    data["logs"].pop(WARNINGS_LOG, None)
    return data
