"""The ``zsl`` command: composes one sub-app per module (spec, data, hierarchy, …)."""

from __future__ import annotations

from typing import Annotated

import typer

import harness
from harness.cli import (
    board,
    ci,
    classmap,
    data,
    hierarchy,
    image,
    metrics,
    results,
    run,
    spec,
    submission,
)
from harness.cli._common import state

__all__ = ["app", "main"]

app = typer.Typer(
    name="zsl",
    help="Declarative zero-shot learning benchmarks, honest scoring, a static leaderboard.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(spec.app, name="spec")
app.add_typer(data.app, name="data")
app.add_typer(hierarchy.app, name="hierarchy")
app.add_typer(submission.app, name="submission")
app.add_typer(metrics.app, name="metrics")
app.add_typer(classmap.app, name="classmap")
app.add_typer(board.app, name="leaderboard")
app.add_typer(ci.app, name="ci")
app.add_typer(results.app, name="results")
app.add_typer(image.app, name="image")
app.command("run")(run.run)
app.command("demo")(run.demo)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"zsl-harness {harness.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks of known errors")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Declarative zero-shot learning benchmarks, honest scoring, a static leaderboard."""
    state.debug = debug


def main() -> None:
    app()


if __name__ == "__main__":
    main()
