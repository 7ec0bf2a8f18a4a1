"""`zsl leaderboard`: build the static leaderboard site from the run store or exported records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli._common import (
    REPORTED_DIR,
    SITE_DIR,
    DatabaseUrl,
    ReportedFolder,
    SiteFolder,
    reports_errors,
    stdout,
)
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness import site, store
    from harness.results import records_io
    from harness.results import reported as reported_values
else:
    # The implementation, imported when the command runs: its --help must not import it.
    records_io = lazy_module("harness.results.records_io")
    reported_values = lazy_module("harness.results.reported")
    site = lazy_module("harness.site")
    store = lazy_module("harness.store")

__all__ = ["app"]

app = typer.Typer(
    no_args_is_help=True,
)


@app.callback()
def _group() -> None:
    # Keeps `build` a named subcommand even while it is the only one.
    pass


BUILD_EPILOG = """
Examples:

  zsl leaderboard build                        # into leaderboard/site

  zsl leaderboard build --out /tmp/site

  ZSL_DATABASE_URL=postgresql://zsl@db/board zsl leaderboard build

  zsl leaderboard build --results leaderboard/results   # from exported JSON records

The site is plain HTML with relative links: open index.html from disk or serve the folder.
An existing --out folder is replaced only if it was built by this command (or is empty).
"""


@app.command(epilog=BUILD_EPILOG)
@reports_errors
def build(
    out: SiteFolder = SITE_DIR,
    database_url: DatabaseUrl = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="Build from the JSON run records under this folder (as written by "
            "`zsl results export`) instead of the store.",
            show_default=False,
        ),
    ] = None,
    reported: ReportedFolder = REPORTED_DIR,
) -> None:
    """Render every run into a static site and print the path of its index.html."""
    if results is not None:
        records = records_io.read_records(results)
    else:
        engine = store.open_store(database_url)
        try:
            records = store.load_runs(engine)
        finally:
            engine.dispose()
    # The default folder is the repository's; a folder named on the command line must exist.
    values = (
        reported_values.reported_in(reported)
        if reported == REPORTED_DIR
        else reported_values.load_reported(reported)
    )
    index = site.build_site(records, out, reported=values)
    stdout.print(str(index), soft_wrap=True)
