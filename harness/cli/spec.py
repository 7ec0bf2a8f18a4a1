"""``zsl spec``: validate specs and print their JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from harness.cli._common import reports_errors, stdout
from harness.core.errors import SpecError
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    import pydantic

    from harness import audit
    from harness import describe as description
    from harness import spec as spec_module
    from harness.data import prepare as preparation
else:
    # The implementation, imported when a command runs: its --help must not import it (pydantic,
    # NumPy).
    pydantic = lazy_module("pydantic")
    audit = lazy_module("harness.audit")
    description = lazy_module("harness.describe")
    spec_module = lazy_module("harness.spec")
    preparation = lazy_module("harness.data.prepare")

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True)


@app.command(
    epilog="Example: zsl spec validate specs/*.yaml. Checks YAML syntax, duplicate and unknown"
    " keys, types and bounds, metric names and parameters against the registry, settings and"
    " primary metrics, and that a spec's benchmark family (family:) finds every member agreeing"
    " with it; each problem is printed as file:line: key.path: message. A spec base"
    " (_<name>.yaml, what a spec's 'extends:' names) is checked for what it can be alone (YAML,"
    " known keys, no benchmark/version/extends); its values are checked with each spec that"
    " extends it."
)
@reports_errors
def validate(
    paths: Annotated[list[Path], typer.Argument(help="spec files", exists=True, dir_okay=False)],
) -> None:
    """Validate spec files and report every problem with file, line and key path."""
    failed = []
    for path in paths:
        try:
            stdout.print(_validated(path))
        except SpecError as err:
            failed.append(str(err))
    if failed:
        raise SpecError("\n".join(failed))


def _validated(path: Path) -> str:
    """Load one spec or spec base (raising :class:`SpecError`); its line for ``validate``."""
    if spec_module.is_spec_base(path):
        keys = spec_module.load_spec_base(path)
        return f"base {path}: {len(keys)} keys, checked with each spec extending it"
    spec = spec_module.load_spec(path)
    family = spec_module.load_family(spec)  # every member found, and agreeing with this one
    member = f", family {family.id} member {spec.family.member}" if family and spec.family else ""
    return f"ok {path}: {spec.benchmark} v{spec.version} ({spec.spec_hash()[:19]}){member}"


@app.command()
def schema() -> None:
    """Print the JSON Schema of a spec (for editors and CI)."""
    typer.echo(json.dumps(spec_module.json_schema(), indent=2, sort_keys=True))


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
    spec = spec_module.load_spec(path)
    if release_only:
        table = description.describe_release(spec)
        if as_json:
            typer.echo(json.dumps(table, indent=1, sort_keys=True, default=_jsonable))
            return
        leak = table.pop("leakage", None)
        stdout.print(f"{spec.benchmark} v{spec.version}: the release's split files only")
        stdout.print(_facts(list(table.items())))
        if leak is not None:
            _print_leakage(leak)
        return
    report = description.describe_benchmark(spec, preparation.load_benchmark(spec))
    if as_json:
        typer.echo(json.dumps(report, indent=1, sort_keys=True, default=_jsonable))
        return
    sizes = report["sizes"]
    stdout.print(f"{spec.benchmark} v{spec.version} {report['hash']}", soft_wrap=True)
    facts: list[tuple[str, Any]] = [
        ("features", f"{report['features']['name']} ({report['features']['dim']}-d)"),
        ("embeddings", ", ".join(f"{k} ({v}-d)" for k, v in report["embeddings"].items())),
        (
            "classes",
            f"{report['n_classes']:,} = {sizes['train_classes']:,} train +"
            f" {sizes['val_classes']:,} val + {sizes['unseen_classes']:,} unseen",
        ),
        (
            "images",
            f"{report['n_images']:,}: trainval {sizes['trainval_images']:,}"
            f" (train {sizes['train_images']:,}, val {sizes['val_images']:,}), test seen"
            f" {sizes['test_seen_images']:,}, test unseen {sizes['test_unseen_images']:,}",
        ),
        *report["adapter"].items(),
    ]
    if "hierarchy" in report:
        ratio = report["structural_ratio"]
        mev = report["mutual_exclusivity_violations"]
        facts += [
            ("hierarchy", report["hierarchy"]),
            (
                "structural ratio",
                f"{_number(ratio['value'])} over {ratio['n_included']} unseen classes"
                f" ({ratio['excluded']} excluded)",
            ),
            (
                "hops to the nearest training class",
                ", ".join(
                    f"{hops}: {n} unseen" for hops, n in report.get("hops_to_train", {}).items()
                ),
            ),
            (
                "mutual-exclusivity violations",
                f"{len(mev['unseen'])} among unseen classes, {mev['all']} among all classes",
            ),
        ]
    stdout.print(_facts(facts))
    _print_leakage(report["leakage"])


def _facts(rows: list[tuple[str, Any]]) -> Table:
    """Two columns, what and its value in words (no Python reprs, numbers rounded)."""
    table = Table(box=box.SIMPLE, show_header=False, pad_edge=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(str(key).replace("_", " "), _plain(value))
    return table


def _number(value: float | int) -> str:
    return f"{value:.4g}" if isinstance(value, float) else f"{value:,}"


def _plain(value: Any) -> str:
    """``value`` in words: mappings as "key value, …" (underscores as spaces), lists joined."""
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {_plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _number(value)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return str(value)


def _print_leakage(leak: audit.LeakageAudit) -> None:
    if not leak.audited:  # not applicable, not audited (frozen so) or unavailable: says why
        stdout.print(f"  leakage: {leak.summary()}", soft_wrap=True)
        return
    stdout.print(f"  leakage: {leak.summary()}", soft_wrap=True)
    if leak.inputs_text():
        stdout.print(f"    (frozen with the benchmark, from {leak.inputs_text()})", soft_wrap=True)
    for relation in audit.Relation:
        stdout.print(
            f"    ({audit.relation_meaning(relation, leak.related_within)})", soft_wrap=True
        )
    for relation in audit.Relation:
        classes = leak.with_relation(relation)
        if not classes:
            continue
        counted = "counted" if relation in leak.counted else "reported, not counted"
        stdout.print(f"    {relation.value} ({len(classes)} classes, {counted}):")
        for entry in classes:
            shown = entry.relatives_by(relation)
            kin = ", ".join(
                f"{r.name} {r.wordnet_id}" + (f" via {r.via}" if r.via else "") for r in shown[:5]
            )
            hidden = entry.counts[relation] - len(shown[:5])
            extra = f" and {hidden} more" if hidden else ""
            stdout.print(
                f"      {entry.label} ({entry.wordnet_id}, {entry.mapping}): {kin}{extra}",
                soft_wrap=True,
            )
    if leak.not_auditable:
        names = ", ".join(c.label for c in leak.not_auditable[:10])
        stdout.print(
            f"    not auditable ({len(leak.not_auditable)}: no WordNet id and no row in"
            f" audit.wordnet_map): {names}",
            soft_wrap=True,
        )
