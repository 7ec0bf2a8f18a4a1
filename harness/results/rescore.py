"""Re-score stored runs from their archived predictions when the metrics changed.

See docs/results.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import harness
from harness.errors import HarnessError, IntegrityError, SpecError
from harness.executors import Job, check_executor, drive, make_backend, progress_bar
from harness.records import RunRecord, ScoreEntry, run_key
from harness.results.prediction_archive import (
    ArchiveMissingError,
    archived_paths,
    predictions_dir,
)
from harness.results.records_io import describe_key, dump_record, load_record

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from harness.data.artifacts import FrozenBenchmark
    from harness.data.prepare import PreparedBenchmark
    from harness.spec import Spec

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
    from harness.spec import load_spec, spec_files

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
    from harness.metrics import metrics

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
    from harness.pipeline import read_all
    from harness.scoring import score, with_chance_warnings

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


def rescore_records(
    records: Iterable[RunRecord],
    specs: dict[SpecKey, Spec],
    *,
    force: bool = False,
    archive_root: Path | None = None,
    executor: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
    max_retries: int = 2,
    progress: bool = False,
) -> list[RescoreOutcome]:
    """Re-score the stale runs among ``records`` (every one with ``force``); nothing is saved.

    The driver finds each stale run's spec, prepares its benchmark, checks the hashes and finds
    the archived prediction files; the scoring itself is one ``rescore`` task per run on
    ``executor`` (see :mod:`harness.executors`). Returned outcomes have status ``current``,
    ``would rescore`` (with ``rescored`` set), ``skipped`` or ``failed``, in the order of
    ``records``.
    """
    check_executor(executor, jobs)
    root = predictions_dir() if archive_root is None else archive_root
    frozen: dict[SpecKey, FrozenBenchmark | HarnessError] = {}
    outcomes: list[RescoreOutcome] = []
    work: list[tuple[int, Job]] = []
    for record in records:
        spec = specs.get((record.benchmark.id, record.benchmark.version))
        reasons = stale_reasons(record, spec)
        outcome = RescoreOutcome(record=record, status="current", reasons=reasons)
        outcomes.append(outcome)
        if not reasons and not force:
            continue
        if spec is None:
            outcome.status = "skipped"
            outcome.message = (
                f"no spec for {record.benchmark.id} v{record.benchmark.version} in the specs folder"
            )
            continue
        try:
            job = _rescore_job(record, spec, reasons, frozen, root)
        except ArchiveMissingError as err:
            outcome.status, outcome.message = "skipped", str(err)
            continue
        except HarnessError as err:
            outcome.status, outcome.message = "failed", str(err)
            continue
        work.append((len(outcomes) - 1, job))
    if work:
        with progress_bar(len(work), enabled=progress, what="re-scores") as bar:
            backend = make_backend(executor, jobs=jobs, ray_address=ray_address)
            try:
                for index, result in drive(backend, work, max_retries=max_retries, bar=bar):
                    outcome = outcomes[index]
                    _settle(outcome, result.result if result.ok else None, result.error)
                    bar.finished(
                        "done" if outcome.ok else "failed",
                        f"  {'✓' if outcome.ok else '✗'} {outcome.run}"
                        + ("" if outcome.ok else f": {outcome.message}"),
                    )
            finally:
                backend.close()
    return outcomes


def _rescore_job(
    record: RunRecord,
    spec: Spec,
    reasons: list[str],
    frozen: dict[SpecKey, FrozenBenchmark | HarnessError],
    root: Path,
) -> Job:
    """The ``rescore`` task of ``record``, once the driver checked what it can."""
    from harness.data.prepare import prepare
    from harness.executors.task import RescoreTask

    key = (spec.benchmark, spec.version)
    if key not in frozen:
        try:
            frozen[key] = prepare(spec)
        except HarnessError as err:
            frozen[key] = err
    bench = frozen[key]
    if isinstance(bench, HarnessError):
        raise bench
    hashes = rescorable_hashes(record, spec, bench.hash)
    paths = archived_paths(hashes, benchmark_hash=record.benchmark.hash, root=root)
    task = RescoreTask(
        record=dump_record(record),
        spec=str(spec.path),
        benchmark_hash=bench.hash,
        reasons=reasons,
        predictions={setting: str(path) for setting, path in paths.items()},
        archive_root=str(root),
    )
    label = describe_key(run_key(record))
    attachments = tuple(sorted(paths.items()))
    return Job("rescore", task.to_json(), label, benchmark=bench.root, attachments=attachments)


def _settle(outcome: RescoreOutcome, result: dict[str, object] | None, error: str) -> None:
    """Fill ``outcome`` from its task's result: the re-scored record, checked to differ from
    the stored one in its scores and rescore log only, or the failure."""
    if result is None:
        outcome.status, outcome.message = "failed", error
        return
    try:
        new = load_record(str(result.get("record", "")), f"re-scored record of {outcome.run}")
        if _beyond_scores(new) != _beyond_scores(outcome.record):
            raise IntegrityError(
                f"{outcome.run}: the re-scored record differs from the stored one in more than"
                " its scores and rescore log; refusing it"
            )
    except HarnessError as err:
        outcome.status, outcome.message = "failed", str(err)
        return
    outcome.status = "would rescore"
    outcome.rescored = new
    outcome.changes = score_changes(outcome.record.scores, new.scores)


def _beyond_scores(record: RunRecord) -> dict[str, object]:
    """What a re-score must leave as it is: the record but its scores and the logs that follow
    from them (the rescore line, the below-chance warnings)."""
    from harness.scoring import WARNINGS_LOG

    data = record.model_dump(mode="json")
    del data["scores"]
    data["logs"].pop("rescore", None)
    data["logs"].pop(WARNINGS_LOG, None)
    return data


def rescore_store(
    engine: Engine,
    specs_dir: Path,
    *,
    force: bool = False,
    dry_run: bool = False,
    archive_root: Path | None = None,
    executor: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
    max_retries: int = 2,
    progress: bool = False,
) -> list[RescoreOutcome]:
    """Re-score the store's stale runs (all with ``force``) and save them in one transaction.

    With ``dry_run`` the runs are scored but nothing is saved (status ``would rescore``).
    A run that cannot be re-scored is reported (``skipped``/``failed``) and left as stored.
    ``executor``, ``jobs``, ``ray_address``, ``max_retries``: where the scoring runs
    (:func:`rescore_records`).
    """
    from harness.results.store_io import save_records
    from harness.store import load_runs

    specs = find_specs(specs_dir)
    outcomes = rescore_records(
        load_runs(engine, include_hidden=True),  # a hidden run shown again must be current
        specs,
        force=force,
        archive_root=archive_root,
        executor=executor,
        jobs=jobs,
        ray_address=ray_address,
        max_retries=max_retries,
        progress=progress,
    )
    if not dry_run:
        done = [o for o in outcomes if o.rescored is not None]
        # Only over the runs as loaded: a run stored again meanwhile is never overwritten.
        save_records(
            engine, [o.rescored for o in done if o.rescored is not None], only_unchanged=True
        )
        for outcome in done:
            outcome.status = "rescored"
    return outcomes


__all__ = [
    "RescoreOutcome",
    "rescore_record",
    "rescore_records",
    "rescore_store",
]
