"""``zsl submission``: validate packages and run prediction generators."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.data.prepare import load_benchmark
from harness.pipeline import generate_prediction_files, prediction_settings
from harness.spec import load_spec
from harness.submission.package import load_package

app = typer.Typer(
    help="Validate submission packages and write their prediction files.", no_args_is_help=True
)

PackagePath = Annotated[
    Path, typer.Argument(help="submission folder", exists=True, file_okay=False)
]


@app.command()
@reports_errors
def validate(package: PackagePath) -> None:
    """Check a package's submission.yaml and files; print its hash."""
    loaded = load_package(package)
    m = loaded.manifest
    stdout.print(f"ok {package}: {m.name} {m.version} ({m.kind}) {loaded.hash()}")


@app.command()
@reports_errors
def generate(
    package: PackagePath,
    spec: Annotated[Path, typer.Option(help="benchmark spec", exists=True, dir_okay=False)],
) -> None:
    """Run a predictions package's generator on a benchmark's task bundle."""
    loaded = load_package(package)
    bench = load_benchmark(load_spec(spec))
    generate_prediction_files(loaded, bench)
    for setting in prediction_settings(bench.spec):
        stdout.print(f"wrote {loaded.prediction_path(bench.spec.benchmark, setting)}")
