"""``zsl data``: freeze benchmarks into hashed artifacts and re-verify them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.data.artifacts import FrozenBenchmark, benchmark_dir
from harness.data.prepare import prepare
from harness.spec import load_spec

__all__ = ["app"]

app = typer.Typer(help="Freeze benchmarks under ZSL_HOME and verify them.", no_args_is_help=True)

SpecPath = Annotated[Path, typer.Argument(help="spec file", exists=True, dir_okay=False)]


@app.command("prepare")
@reports_errors
def prepare_benchmark(spec: SpecPath) -> None:
    """Freeze a benchmark's artifacts under ZSL_HOME (or verify the frozen copy)."""
    loaded = load_spec(spec)
    frozen = prepare(loaded)
    stdout.print(f"{loaded.benchmark} v{loaded.version}: {frozen.hash}")
    stdout.print(f"  {frozen.root} ({len(frozen.entries)} artifacts)")


@app.command()
@reports_errors
def verify(spec: SpecPath) -> None:
    """Re-hash every frozen artifact of a benchmark and compare with its manifest."""
    loaded = load_spec(spec)
    frozen = FrozenBenchmark(benchmark_dir(loaded.benchmark, loaded.version))
    names = frozen.verify()
    stdout.print(f"ok {frozen.root}: {len(names)} artifacts match {frozen.hash}")
