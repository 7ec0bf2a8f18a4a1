"""``zsl run`` and ``zsl demo``: score submissions end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import DatabaseUrl, reports_errors, stdout
from harness.errors import PredictionError, SubmissionError
from harness.pipeline import (
    generate_prediction_files,
    prediction_settings,
    read_all,
    run_submission,
)
from harness.records import RunRecord
from harness.runners import default_runner
from harness.spec import load_spec
from harness.submission.package import MANIFEST, load_package

__all__ = ["RUNNER_HELP", "demo", "run"]

RUNNER_HELP = (
    "isolation for the package's code: 'sandbox' (bubblewrap), 'container' (docker/podman,"
    " needs model.image) or 'local' (no isolation: only for your own trusted code); default:"
    " the strongest this machine offers, sandbox > container > local (with a warning)"
)


def _summary(record: RunRecord) -> str:
    parts = []
    for entry in record.scores:
        if entry.metric == record.benchmark.primary.get(entry.setting):
            parts.append(f"{entry.setting} {entry.metric} {100 * entry.value:.1f}")
    return f"{record.submission.name} on {record.benchmark.id}: " + ", ".join(parts)


@reports_errors
def run(
    package: Annotated[
        Path, typer.Argument(help="submission folder, .zip or .tar.gz", exists=True)
    ],
    spec: Annotated[Path, typer.Option(help="benchmark spec", exists=True, dir_okay=False)],
    runner: Annotated[str | None, typer.Option(help=RUNNER_HELP, show_default=False)] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Prepare, validate, run, score and store one submission on one benchmark."""
    record = run_submission(package, spec, runner=runner, database_url=database_url)
    stdout.print(_summary(record))


def _ensure_predictions(package_dir: Path, spec_path: Path, runner: str) -> None:
    """Regenerate a shipped predictions package's files when missing or made for other data."""
    from harness.data.prepare import load_benchmark

    package = load_package(package_dir)
    if (
        package.manifest.kind != "predictions"
        or package.manifest.prediction_files.generator is None
    ):
        return
    bench = load_benchmark(load_spec(spec_path))
    paths: dict[str, Path] = {
        s: package.prediction_path(bench.spec.benchmark, s) for s in prediction_settings(bench.spec)
    }
    try:
        read_all(bench, paths)
    except PredictionError:
        generate_prediction_files(package, bench, runner=runner)


@reports_errors
def demo(
    spec: Annotated[Path, typer.Option(help="demo spec")] = Path("specs/demo.yaml"),
    submissions: Annotated[Path, typer.Option(help="folder of shipped submissions")] = Path(
        "submissions"
    ),
    out: Annotated[Path, typer.Option(help="site output folder")] = Path("leaderboard/site"),
    database_url: DatabaseUrl = None,
) -> None:
    """Run every shipped submission on the demo benchmark and build the leaderboard site."""
    from harness.site.builder import build_site
    from harness.store import load_runs, open_store

    if not spec.is_file() or not submissions.is_dir():
        raise SubmissionError(
            f"{spec} or {submissions}/ not found: run `zsl demo` from the repository root"
            " or pass --spec and --submissions"
        )
    packages = sorted(p.parent for p in submissions.glob(f"*/{MANIFEST}"))
    runner = default_runner()  # once (one warning at most): no shipped package names an image
    for package in packages:
        _ensure_predictions(package, spec, runner)
        record = run_submission(package, spec, runner=runner, database_url=database_url)
        stdout.print(_summary(record))
    index = build_site(load_runs(open_store(database_url)), out)
    stdout.print(f"leaderboard: {index.resolve()}")
