"""``zsl results rescore``: re-score the store's stale runs on an executor.

:func:`rescore_store` finds each stale run's spec (refusing one whose hash differs), prepares
its benchmark and finds its archived prediction files, all in the driver; each run is then one
``rescore`` task on an executor (local pool, inline, or Ray), which scores it again
(:func:`harness.rescore.rescore_record`). The driver checks that only scores and the rescore
log changed and saves every re-scored record in one transaction. A run that cannot be
re-scored is reported with its reason (skipped: no archived predictions or no spec; failed:
a hash does not match, or scoring raised) and left as it is. See docs/results.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness import store  # lazy: SQLAlchemy is imported when a store is first used
from harness.core.errors import HarnessError, IntegrityError
from harness.data.artifacts import FrozenBenchmark
from harness.data.prepare import prepare
from harness.executors import Job, check_executor, drive, make_backend, progress_bar
from harness.executors.task import RescoreTask
from harness.records import RunRecord, run_key
from harness.rescore import (
    RescoreOutcome,
    SpecKey,
    beyond_scores,
    find_specs,
    rescorable_hashes,
    score_changes,
    stale_reasons,
)
from harness.results.prediction_archive import (
    ArchiveMissingError,
    archived_paths,
    predictions_dir,
)
from harness.results.records_io import describe_key, dump_record, load_record
from harness.results.store_io import save_records
from harness.spec import Spec

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["rescore_records", "rescore_store"]


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
        if beyond_scores(new) != beyond_scores(outcome.record):
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
    specs = find_specs(specs_dir)
    outcomes = rescore_records(
        store.load_runs(engine, include_hidden=True),  # a hidden run shown again must be current
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
