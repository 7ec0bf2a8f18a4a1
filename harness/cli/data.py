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


SYNTHETIC_EPILOG = """
Example (the split files come with the xlsa17 release, a few MB without res101.mat):

  zsl data synthetic-xlsa17 --source ~/xlsa17/data --out ~/xlsa17-synthetic --dataset AWA2

  ZSL_XLSA17_DIR=~/xlsa17-synthetic zsl run submissions/eszsl --spec specs/xlsa17/awa2-ps.yaml

SYNTHETIC features: the scores they give say that the pipeline runs, nothing about a method.
The frozen benchmark has another hash than the real one's, so the store keeps the two apart.
"""


@app.command("synthetic-xlsa17", epilog=SYNTHETIC_EPILOG)
@reports_errors
def synthetic_xlsa17(
    source: Annotated[
        Path,
        typer.Option(
            help="folder holding the release's split files: <DATASET>/att_splits.mat and the"
            " class lists",
            exists=True,
            file_okay=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option(help="folder to write <DATASET>/ into (then ZSL_XLSA17_DIR=OUT)")
    ],
    dataset: Annotated[
        list[str] | None,
        typer.Option(help="AWA1, AWA2, CUB, SUN or APY (repeatable; default: every one)"),
    ] = None,
    dim: Annotated[
        int,
        typer.Option(
            help="feature dimension (the shipped specs declare the release's 2048)", min=1
        ),
    ] = 2048,
    seed: Annotated[int, typer.Option(help="seeds the labels and the features")] = 0,
) -> None:
    """Write SYNTHETIC res101.mat features for the real xlsa17 split files, to try the GBU
    benchmarks end to end without the release's features."""
    from harness.data.xlsa17 import DATASETS
    from harness.data.xlsa17_synthetic import synthetic_release

    made = synthetic_release(source, out, dataset or DATASETS, dim=dim, seed=seed)
    for folder in made:
        stdout.print(f"{folder / 'res101.mat'}: synthetic {dim}-d features", soft_wrap=True)
    stdout.print(f"then: export ZSL_XLSA17_DIR={out}", soft_wrap=True)
