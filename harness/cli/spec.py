"""``zsl spec``: validate specs and print their JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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


@app.command(
    epilog="Example: zsl spec describe specs/demo.yaml. Prepares the benchmark first (under"
    " ZSL_HOME), so the raw data must be reachable."
)
@reports_errors
def describe(
    path: Annotated[Path, typer.Argument(help="spec file", exists=True, dir_okay=False)],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    release_only: Annotated[
        bool,
        typer.Option(
            "--release-only",
            help="only the split files (e.g. xlsa17 att_splits.mat), no features: GBU Table I",
        ),
    ] = False,
) -> None:
    """Print a benchmark's sizes, structure diagnostics and leakage audit."""
    from harness.data.prepare import load_benchmark
    from harness.describe import describe_benchmark, describe_release

    spec = load_spec(path)
    if release_only:
        table = describe_release(spec)
        if as_json:
            typer.echo(json.dumps(table, indent=1, sort_keys=True))
        else:
            leak = table.pop("leakage", None)
            for key, value in table.items():
                stdout.print(f"  {key}: {value}")
            if leak is not None:
                _print_leakage(leak)
        return
    report = describe_benchmark(spec, load_benchmark(spec))
    if as_json:
        typer.echo(json.dumps(report, indent=1, sort_keys=True, default=str))
        return
    sizes = report["sizes"]
    stdout.print(f"{spec.benchmark} v{spec.version} {report['hash']}")
    stdout.print(
        f"  features {report['features']['name']} ({report['features']['dim']}-d);"
        f" embeddings {report['embeddings']}"
    )
    stdout.print(
        f"  classes {report['n_classes']} = {sizes['train_classes']} train +"
        f" {sizes['val_classes']} val + {sizes['unseen_classes']} unseen"
    )
    stdout.print(
        f"  images {report['n_images']}: trainval {sizes['trainval_images']}"
        f" (train {sizes['train_images']}, val {sizes['val_images']}),"
        f" test_seen {sizes['test_seen_images']}, test_unseen {sizes['test_unseen_images']}"
    )
    for key, value in report["adapter"].items():
        stdout.print(f"  {key}: {value}")
    if "hierarchy" in report:
        stdout.print(f"  hierarchy: {report['hierarchy']}")
        stdout.print(f"  structural ratio: {report['structural_ratio']}")
        mev = report["mutual_exclusivity_violations"]
        stdout.print(
            f"  mutual-exclusivity violations: {len(mev['unseen'])} among unseen classes,"
            f" {mev['all']} among all classes"
        )
    _print_leakage(report["leakage"])


def _print_leakage(leak: dict[str, Any]) -> None:
    if "error" in leak:
        stdout.print(f"  leakage audit unavailable: {leak['error']}")
    else:
        stdout.print(
            f"  leakage ({leak['source']}, match {leak['match']}): {leak['n_overlap']} of"
            f" {leak['n_test']} test classes seen in pre-training" + _not_wordnet_note(leak)
        )
        for row in leak["overlap"]:
            how = " (by name)" if row.get("by") == "name" else ""
            stdout.print(f"    {row['class']} {row['name']} via {', '.join(row['via'][:5])}{how}")


def _not_wordnet_note(leak: dict[str, Any]) -> str:
    n, unaudited = leak["n_not_wordnet"], leak.get("n_not_auditable", leak["n_not_wordnet"])
    if not n:
        return ""
    if unaudited:
        return f" ({n} without WordNet id, {unaudited} of them not auditable)"
    return f" ({n} without WordNet id: compared by name with the WordNet synonyms)"
