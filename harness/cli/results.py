"""`zsl results`: run records in git (export, import) and re-scoring stored runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from harness.cli._common import (
    DatabaseUrl,
    Executor,
    Jobs,
    MaxRetries,
    RayAddress,
    chosen_executor,
    reports_errors,
    stderr,
    stdout,
)
from harness.results.rescore import RescoreOutcome, rescore_store
from harness.results.store_io import export_store, import_folder
from harness.store import open_store

__all__ = ["app"]

app = typer.Typer(
    help="Run records in git (export, import) and re-scoring of stored runs.",
    no_args_is_help=True,
)

RESULTS_DIR = Path("leaderboard/results")


EXPORT_EPILOG = """
Examples:

  zsl results export                          # into leaderboard/results

  zsl results export --prune                  # also delete records of runs no longer stored

  zsl results export --out /tmp/results --database-url sqlite:////tmp/zsl.sqlite3

One file per run: <out>/<benchmark>/v<version>/<submission>@<version>.json. Unchanged files
are not rewritten, so `git diff` shows exactly the runs that changed.
"""


@app.command(epilog=EXPORT_EPILOG)
@reports_errors
def export(
    out: Annotated[
        Path, typer.Option("--out", help="Folder of record files.", file_okay=False)
    ] = RESULTS_DIR,
    database_url: DatabaseUrl = None,
    prune: Annotated[
        bool,
        typer.Option("--prune", help="Delete *.json files under --out that match no stored run."),
    ] = False,
) -> None:
    """Write every stored run to one JSON record file (stable text, content-addressed)."""
    engine = open_store(database_url)
    try:
        result = export_store(engine, out, prune=prune)
    finally:
        engine.dispose()
    stdout.print(
        f"{len(result.paths)} records in {out}: {len(result.written)} written, "
        f"{len(result.paths) - len(result.written)} unchanged"
        + (f", {len(result.removed)} stale removed" if prune else ""),
        soft_wrap=True,
    )


IMPORT_EPILOG = """
Examples:

  zsl results import                          # from leaderboard/results

  zsl results import --from /tmp/results --database-url postgresql://zsl@db/board

Every file is verified first (format, schema, id = hash of the content, one file per run);
one bad file stores nothing. Runs already stored are replaced by the imported records.
"""


@app.command("import", epilog=IMPORT_EPILOG)
@reports_errors
def import_(
    source: Annotated[
        Path,
        typer.Option("--from", help="Folder of record files.", file_okay=False),
    ] = RESULTS_DIR,
    database_url: DatabaseUrl = None,
) -> None:
    """Verify every record file in a folder, then store them all in one transaction."""
    engine = open_store(database_url)
    try:
        records = import_folder(engine, source)
    finally:
        engine.dispose()
    stdout.print(f"imported {len(records)} records from {source}", soft_wrap=True)


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
    engine = open_store(database_url)
    try:
        outcomes = rescore_store(
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
        stdout.print(f"{outcome.status}: {outcome.run}", soft_wrap=True)
        for line in outcome.changes or ["no score changed"]:
            stdout.print(f"  {line}", soft_wrap=True)
        return
    stderr.print(
        Text.assemble((f"{outcome.status}: ", "bold red"), f"{outcome.run}: {outcome.message}"),
        soft_wrap=True,
    )
