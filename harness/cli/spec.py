"""``zsl spec``: validate specs and print their JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.errors import SpecError
from harness.spec import json_schema, load_spec

app = typer.Typer(
    help="Validate benchmark specs and print their JSON Schema.", no_args_is_help=True
)


@app.command(
    epilog="Example: zsl spec validate specs/*.yaml. Checks YAML syntax, duplicate and unknown"
    " keys, types and bounds, metric names and parameters against the registry, settings and"
    " primary metrics; each problem is printed as file:line: key.path: message."
)
@reports_errors
def validate(
    paths: Annotated[list[Path], typer.Argument(help="spec files", exists=True, dir_okay=False)],
) -> None:
    """Validate spec files and report every problem with file, line and key path."""
    failed = []
    for path in paths:
        try:
            spec = load_spec(path)
        except SpecError as err:
            failed.append(str(err))
            continue
        stdout.print(f"ok {path}: {spec.benchmark} v{spec.version} ({spec.spec_hash()[:19]})")
    if failed:
        raise SpecError("\n".join(failed))


@app.command()
def schema() -> None:
    """Print the JSON Schema of a spec (for editors and CI)."""
    typer.echo(json.dumps(json_schema(), indent=2, sort_keys=True))
