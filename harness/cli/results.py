"""`zsl results`: run records in git (export, import), re-scoring, and managing stored runs
(list, delete, hide, unhide)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from harness.cli._common import (
    RESULTS_DIR,
    DatabaseUrl,
    Executor,
    Jobs,
    MaxRetries,
    RayAddress,
    ResultsFolder,
    chosen_executor,
    reports_errors,
    stderr,
    stdout,
)
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from harness import store
    from harness.executors import rescore as executor_rescore
    from harness.records import RunKey
    from harness.rescore import RescoreOutcome
    from harness.results import records_io, reproduction, standing, store_io
    from harness.store import StoredRun
else:
    # The implementation, imported when a command runs: its --help must not import it
    # (SQLAlchemy, pydantic models, NumPy).
    store = lazy_module("harness.store")
    executor_rescore = lazy_module("harness.executors.rescore")
    records_io = lazy_module("harness.results.records_io")
    reproduction = lazy_module("harness.results.reproduction")
    store_io = lazy_module("harness.results.store_io")
    standing = lazy_module("harness.results.standing")

#: What the options' help and defaults need of the implementation, spelled here so that defining
#: them imports none of it: ``store_io.RUN_NAME_FORM`` and ``reproduction.SCORE_TOLERANCE``
#: (tests/cli/test_cli_startup.py holds them equal).
RUN_NAME_FORM = "SUBMISSION@VERSION on BENCHMARK vN"
SCORE_TOLERANCE = 1e-5

__all__ = ["app"]

app = typer.Typer(
    no_args_is_help=True,
)

EXPORT_EPILOG = """
Examples:

  zsl results export                          # into leaderboard/results

  zsl results export --prune                  # also delete records of runs no longer stored

  zsl results export --results /tmp/results --database-url sqlite:////tmp/zsl.sqlite3

One file per run: <results>/<benchmark>/v<version>/<submission>@<version>.json. Unchanged files
are not rewritten, so `git diff` shows exactly the runs that changed. Hidden runs (`zsl results
hide`) are left out; --prune deletes their files.
"""


@app.command(epilog=EXPORT_EPILOG)
@reports_errors
def export(
    results: ResultsFolder = RESULTS_DIR,
    database_url: DatabaseUrl = None,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune", help="Delete *.json files under --results that match no stored run."
        ),
    ] = False,
) -> None:
    """Write every stored run to one JSON record file (stable text, content-addressed)."""
    engine = store.open_store(database_url)
    try:
        result = store_io.export_store(engine, results, prune=prune)
        hidden = store.count_runs(engine, hidden=True)
    finally:
        engine.dispose()
    stdout.print(
        f"{len(result.paths)} records in {results}: {len(result.written)} written, "
        f"{len(result.paths) - len(result.written)} unchanged"
        + (
            f" ({len(result.kept)} with the same result and other run metadata: file kept)"
            if result.kept
            else ""
        )
        + (f", {len(result.removed)} stale removed" if prune else "")
        + (f"; {hidden} hidden run{'s' if hidden != 1 else ''} left out" if hidden else ""),
        soft_wrap=True,
    )


IMPORT_EPILOG = """
Examples:

  zsl results import                          # from leaderboard/results

  zsl results import --results /tmp/results --database-url postgresql://zsl@db/board

Every file is verified first (format, schema, id = hash of the content, one file per run);
one bad file stores nothing. Runs already stored are replaced by the imported records.
"""


@app.command("import", epilog=IMPORT_EPILOG)
@reports_errors
def import_(
    results: ResultsFolder = RESULTS_DIR,
    database_url: DatabaseUrl = None,
) -> None:
    """Verify every record file in a folder, then store them all in one transaction."""
    engine = store.open_store(database_url)
    try:
        records = store_io.import_folder(engine, results)
    finally:
        engine.dispose()
    stdout.print(f"imported {len(records)} records from {results}", soft_wrap=True)


RESCORE_EPILOG = """
Examples:

  zsl results rescore --dry-run               # what would change, nothing saved

  zsl results rescore                         # stale runs only, then: zsl results export

  zsl results rescore --force --specs specs   # every run

  zsl results rescore --executor ray --ray-address HEAD:6379   # scored on a Ray cluster

A run is stale when a metric version it records differs from the registry, or its metric list
differs from its spec. Predictions come from the archive (ZSL_PREDICTIONS_DIR, default
ZSL_HOME/predictions). Each stale run is scored as one task on the executor (a process pool by
default; Ray nodes get the benchmark and the prediction files shipped and verified); every
re-scored record is saved in one transaction at the end. Runs without archived predictions are
reported and skipped; the exit code is 1 when any run was skipped or failed.
"""


@app.command(epilog=RESCORE_EPILOG)
@reports_errors
def rescore(
    specs: Annotated[
        Path, typer.Option("--specs", help="Folder of benchmark specs (*.yaml).", file_okay=False)
    ] = Path("specs"),
    force: Annotated[
        bool, typer.Option("--force", help="Re-score every run, stale or not.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Score and report, but save nothing.")
    ] = False,
    database_url: DatabaseUrl = None,
    executor: Executor = None,
    jobs: Jobs = None,
    ray_address: RayAddress = None,
    max_retries: MaxRetries = 2,
) -> None:
    """Re-score stored runs from their archived predictions when metric versions changed."""
    engine = store.open_store(database_url)
    try:
        outcomes = executor_rescore.rescore_store(
            engine,
            specs,
            force=force,
            dry_run=dry_run,
            executor=chosen_executor(executor, ray_address),
            jobs=jobs,
            ray_address=ray_address,
            max_retries=max_retries,
            progress=True,
        )
    finally:
        engine.dispose()
    for outcome in outcomes:
        _report(outcome)
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    stdout.print(f"{len(outcomes)} runs: {summary or 'none stored'}", soft_wrap=True)
    if any(not o.ok for o in outcomes):
        raise typer.Exit(code=1)


def _report(outcome: RescoreOutcome) -> None:
    if outcome.status == "current":
        return
    if outcome.ok:
        badges = standing.badges_text(outcome.record.benchmark)
        stdout.print(f"{outcome.status}: {outcome.run} {badges}", soft_wrap=True)
        for line in outcome.changes or ["no score changed"]:
            stdout.print(f"  {line}", soft_wrap=True)
        return
    stderr.print(
        Text.assemble((f"{outcome.status}: ", "bold red"), f"{outcome.run}: {outcome.message}"),
        soft_wrap=True,
    )


# -- managing stored runs -------------------------------------------------------------------------

RunNames = Annotated[
    list[str],
    typer.Argument(
        help=f"stored runs, each as '{RUN_NAME_FORM}' (quoted; `zsl results list` prints them)",
        show_default=False,
    ),
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Say what would change; change nothing.")]


def _score_text(value: float) -> str:
    return f"{100 * value:.1f}" if 0.0 <= value <= 1.0 else f"{value:.4g}"


def _primary_text(stored: StoredRun) -> str:
    record = stored.record
    values = store.primary_values(record)
    return ", ".join(
        f"{setting} {record.benchmark.primary[setting]} {_score_text(value)}"
        for setting, value in values.items()
    )


LIST_EPILOG = f"""
Examples:

  zsl results list                            # every stored run, hidden ones marked

  zsl results list --benchmark demo --submission eszsl

One line per run: its name ('{RUN_NAME_FORM}', what delete, hide and unhide take), runner,
date (UTC) and primary scores (percent for values in [0, 1]).
"""


@app.command("list", epilog=LIST_EPILOG)
@reports_errors
def list_(
    benchmark: Annotated[
        str | None, typer.Option("--benchmark", help="Only runs on this benchmark id.")
    ] = None,
    submission: Annotated[
        str | None, typer.Option("--submission", help="Only runs of this submission name.")
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """List stored runs: benchmark, submission@version, runner, date and primary scores."""
    engine = store.open_store(database_url)
    try:
        runs = store.list_runs(engine, benchmark=benchmark, submission=submission)
    finally:
        engine.dispose()
    for stored in runs:
        record = stored.record
        stdout.print(
            f"{store_io.run_name(stored.key)}  {record.runner}  "
            f"{record.created_at:%Y-%m-%d %H:%M}  {_primary_text(stored) or '-'}"
            f"  {standing.badges_text(record.benchmark)}" + ("  [hidden]" if stored.hidden else ""),
            soft_wrap=True,
        )
    hidden = sum(s.hidden for s in runs)
    where = " matching" if benchmark is not None or submission is not None else ""
    stdout.print(
        f"{len(runs)}{where} run{'s' if len(runs) != 1 else ''} stored"
        + (f" ({hidden} hidden)" if hidden else ""),
        soft_wrap=True,
    )


def _resolve(engine: Engine, names: list[str]) -> tuple[list[RunKey], dict[RunKey, bool]]:
    """The stored runs ``names`` name (:func:`resolve_runs`, the one reader of run names), and
    the hidden flag of every stored run."""
    hidden = {s.key: s.hidden for s in store.list_runs(engine)}
    return store_io.resolve_runs(names, list(hidden)), hidden


MANAGE_EPILOG = """
Examples:

  zsl results {verb} "eszsl@1.0 on demo v1" --dry-run

  zsl results {verb} "eszsl@1.0 on demo v1" "sae@1.0 on demo v1"

Runs are named as `zsl results list` prints them. Every run named must be stored: one unknown
name (the error lists the closest stored names) changes nothing; all runs change in one
transaction. {after}
"""


@app.command(
    epilog=MANAGE_EPILOG.format(
        verb="delete",
        after="A deleted run is gone from the store (its scores too; its archived prediction"
        " files stay); `zsl results export --prune` then deletes its record file.",
    )
)
@reports_errors
def delete(runs: RunNames, dry_run: DryRun = False, database_url: DatabaseUrl = None) -> None:
    """Delete stored runs with their scores, in one transaction."""
    engine = store.open_store(database_url)
    try:
        keys, _ = _resolve(engine, runs)
        if not dry_run:
            store.delete_runs(engine, keys)
    finally:
        engine.dispose()
    verb = "would delete" if dry_run else "deleted"
    for key in keys:
        stdout.print(f"{verb}: {store_io.run_name(key)}", soft_wrap=True)
    if not dry_run:
        stdout.print(
            "run `zsl results export --prune` to delete their record files too", soft_wrap=True
        )


def _set_hidden(runs: list[str], hidden: bool, dry_run: bool, database_url: str | None) -> None:
    engine = store.open_store(database_url)
    try:
        keys, flags = _resolve(engine, runs)
        changed = (
            [k for k in keys if flags.get(k) != hidden]
            if dry_run
            else store.set_hidden(engine, keys, hidden)
        )
    finally:
        engine.dispose()
    done = "hidden" if hidden else "shown"
    verb = ("would be " if dry_run else "") + done
    for key in keys:
        already = "" if key in changed else f" (already {done}: unchanged)"
        stdout.print(f"{verb}: {store_io.run_name(key)}{already}", soft_wrap=True)
    if changed and not dry_run:
        stdout.print(
            "run `zsl results export --prune` to update the record files"
            + (" (a hidden run's file is deleted)" if hidden else ""),
            soft_wrap=True,
        )


@app.command(
    epilog=MANAGE_EPILOG.format(
        verb="hide",
        after="A hidden run stays in the store (scores, archived predictions) but is left out"
        " of `zsl results export` and the site built from the store; `zsl results unhide`"
        " brings it back. A run stored again (`zsl run`) stays hidden.",
    )
)
@reports_errors
def hide(runs: RunNames, dry_run: DryRun = False, database_url: DatabaseUrl = None) -> None:
    """Hide stored runs: kept in the store, left out of exports and the site."""
    _set_hidden(runs, True, dry_run, database_url)


@app.command(
    epilog=MANAGE_EPILOG.format(verb="unhide", after="The runs show again in exports and the site.")
)
@reports_errors
def unhide(runs: RunNames, dry_run: DryRun = False, database_url: DatabaseUrl = None) -> None:
    """Show hidden runs again in exports and the site."""
    _set_hidden(runs, False, dry_run, database_url)


DIFF_EPILOG = """
Examples:

  make demo && zsl results diff               # does this machine reproduce the committed records?

  zsl results diff --results leaderboard/results --tolerance 0    # to the bit

Compares every stored run with its record file under --results, on the result only (not when,
where or how fast it ran). Prediction hashes may differ, and every number under a record's
scores by at most TOLERANCE x max(1, |committed|): another CPU or BLAS rounds the models' matrix
products differently. Each difference beyond that is printed (run, setting, metric, field,
committed and new value); exit 1 if there is one.
"""


@app.command("diff", epilog=DIFF_EPILOG)
@reports_errors
def diff(
    results: ResultsFolder = RESULTS_DIR,
    database_url: DatabaseUrl = None,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            min=0.0,
            help="Largest |new - committed| of a score, times max(1, |committed|).",
        ),
    ] = SCORE_TOLERANCE,
) -> None:
    """Compare the stored runs with the committed record files: the same results, within a
    tolerance for another platform's rounding?"""
    committed = records_io.read_records(results)
    engine = store.open_store(database_url)
    try:
        fresh = store.load_runs(engine)
    finally:
        engine.dispose()
    report = reproduction.compare_reproduction(committed, fresh, tolerance=tolerance)
    for key, found in report.beyond.items():
        for difference in found:
            if not difference.within_tolerance:
                stdout.print(
                    difference.describe(records_io.describe_key(key), tolerance), soft_wrap=True
                )
    compared = len(report.identical) + len(report.within) + len(report.beyond)
    if not compared:
        stderr.print(
            f"error: no stored run has a record file under {results} (and none of its "
            f"{len(committed)} records a stored run): nothing to compare; check --results and "
            "the store (--database-url / ZSL_DATABASE_URL)",
            soft_wrap=True,
        )
        raise typer.Exit(code=1)
    stdout.print(
        f"{compared} run{'s' if compared != 1 else ''} compared with {results}: "
        f"{len(report.identical)} identical, "
        f"{len(report.within)} within tolerance {tolerance:g}, {len(report.beyond)} beyond"
        + (f"; {len(report.not_rerun)} records with no stored run" if report.not_rerun else "")
        + (
            f"; {len(report.not_committed)} stored runs not exported"
            if report.not_committed
            else ""
        ),
        soft_wrap=True,
    )
    if not report.ok:
        raise typer.Exit(code=1)
