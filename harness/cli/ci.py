"""``zsl ci``: the leaderboard CI's steps, one command each, so the workflow stays thin."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from harness.cli._common import (
    RESULTS_DIR,
    SITE_DIR,
    Executor,
    Jobs,
    MaxRetries,
    RayAddress,
    ResultsFolder,
    SiteFolder,
    chosen_executor,
    reports_errors,
    stderr,
    stdout,
)
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness import ci
else:
    # The implementation, imported when a command runs: its --help must not import it (the
    # store's SQLAlchemy, the site's Jinja2, pydantic models, NumPy).
    ci = lazy_module("harness.ci")

#: Where ``zsl ci pr`` writes in its OUT folder, for the help: ``harness.ci.pr``'s
#: ``SITE_DIRNAME`` and ``DIFF_FILENAME``, spelled here so that defining the command imports
#: none of it (tests/cli/test_cli_startup.py holds them equal).
SITE_DIRNAME = "site"
DIFF_FILENAME = "leaderboard-diff.md"

app = typer.Typer(
    no_args_is_help=True,
)

Base = Annotated[
    str,
    typer.Option(
        "--base",
        help="git revision the change is compared with (e.g. origin/main); "
        "packages changed in BASE...HEAD count",
        show_default=False,
    ),
]

CHANGED_EPILOG = """
Example: zsl ci changed --base origin/main

Prints one line per package, "added", "modified" or "deleted", a tab, and the folder.
Only committed changes count (git diff BASE...HEAD).
"""


@app.command(epilog=CHANGED_EPILOG)
@reports_errors
def changed(base: Base) -> None:
    """List the submission packages added, modified or deleted between BASE and HEAD."""
    changes = ci.changed_packages(base, ci.find_repo_root(Path.cwd()))
    for status, folders in (
        ("added", changes.added),
        ("modified", changes.modified),
        ("deleted", changes.deleted),
    ):
        for folder in folders:
            typer.echo(f"{status}\t{folder}")  # plain: rich would expand the tab
    if not (changes.added or changes.modified or changes.deleted):
        stderr.print(f"no submission package changed between {base} and HEAD", soft_wrap=True)


PR_EPILOG = f"""
Example: zsl ci pr --base origin/main

In CI (see .github/workflows/leaderboard.yml), the base branch's harness scores the pull
request's checkout: zsl ci pr --repo pr --base BASE_SHA --config base/leaderboard/ci.yaml

For each package changed since BASE: validate it, then run and score it on every spec in the
CI configuration, in a throwaway store (OUT/store.sqlite3) seeded with the committed records;
model code runs under RUNNER. The runs go to EXECUTOR as one matrix: a process pool on this
machine by default (--jobs), or a Ray cluster (--ray-address HEAD:6379, as for zsl run).
Every record file that differs from BASE is re-made by its package (changed or not) and
compared with the fresh run: a record that differs, or that no package reproduces, fails the
job. The records are exported into RESULTS, the site is built
into OUT/{SITE_DIRNAME} and the Markdown leaderboard diff (base records vs. the exported ones) is
written to OUT/{DIFF_FILENAME}. Exits 1 when a package is invalid or its run fails, or a record
was not reproduced; the diff file says which and why.

A package may hold only source and the harness's declared data formats (.npy, .npz,
.safetensors, .csv, .tsv, its own prediction files), plus the suffixes allowed_data_suffixes in
the CI configuration lists. A record file of BASE that the pull request deletes fails the job
while its package is still there: a record leaves the board with its package, or by a
maintainer's zsl results delete on main.

Refuses to run when the harness running it lives in REPO and differs there from BASE (a pull
request must not score itself): run the base branch's harness, or pass --trust-pr-harness for
a local run of your own change.
"""


@app.command(epilog=PR_EPILOG)
@reports_errors
def pr(
    base: Base,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="checkout to score: its submissions/ and leaderboard/results "
            "(default: the repository of the current folder)",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="folder of committed run records (default: leaderboard/results in REPO)",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option("--out", help="folder for the store, the site and the diff", file_okay=False),
    ] = Path("build/ci"),
    runner: Annotated[str, typer.Option(help="isolation backend for model code")] = "sandbox",
    config: Annotated[
        Path | None,
        typer.Option(
            help="CI configuration; its spec paths are relative to the repository holding it "
            "(default: leaderboard/ci.yaml in REPO)",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    every_package: Annotated[
        bool,
        typer.Option(
            "--all", help="score every package, changed or not (e.g. after adding a benchmark)"
        ),
    ] = False,
    trust_pr_harness: Annotated[
        bool,
        typer.Option(
            "--trust-pr-harness",
            help="run even though the harness running this lives in REPO and differs from "
            "BASE (local use only: CI runs the base branch's harness)",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress bar")] = False,
    executor: Executor = None,
    jobs: Jobs = None,
    ray_address: RayAddress = None,
    max_retries: MaxRetries = 2,
) -> None:
    """Validate, run and score the changed packages; write the site and the leaderboard diff."""
    repo_root = ci.find_repo_root(repo if repo is not None else Path.cwd())
    result = ci.run_pull_request(
        base,
        repo_root=repo_root,
        results_dir=results if results is not None else repo_root / RESULTS_DIR,
        out_dir=out,
        runner=runner,
        config_path=config,
        every_package=every_package,
        quiet=quiet,
        trust_pr_harness=trust_pr_harness,
        execution=ci.Execution(
            chosen_executor(executor, ray_address), jobs, ray_address, max_retries
        ),
    )
    for outcome in result.outcomes:
        line = f"{outcome.status} {outcome.package}: {outcome.detail}"
        if outcome.failed:
            stderr.print(Text.assemble(("error: ", "bold red"), line), soft_wrap=True)
        else:
            stdout.print(line, soft_wrap=True)
    for problem in result.problems:
        stderr.print(Text.assemble(("error: ", "bold red"), problem), soft_wrap=True)
    if result.site is not None:
        stdout.print(f"site: {result.site}", soft_wrap=True)
    stdout.print(f"diff: {result.report}", soft_wrap=True)
    if not result.ok:
        raise typer.Exit(code=1)


PUBLISH_EPILOG = """
Example: zsl ci publish --out leaderboard/site

Reads only the committed records (no store, no runs): what the merge-to-main job deploys.
"""


@app.command(epilog=PUBLISH_EPILOG)
@reports_errors
def publish(
    results: ResultsFolder = RESULTS_DIR,
    out: SiteFolder = SITE_DIR,
) -> None:
    """Build the site from the committed run records and print the path of its index.html."""
    index = ci.publish_site(results, out)
    stdout.print(str(index), soft_wrap=True)
