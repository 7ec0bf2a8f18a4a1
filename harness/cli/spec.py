"""``zsl spec``: validate specs and print their JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from harness.cli._common import ask_before_download, reports_errors, stdout
from harness.core.errors import SpecError
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    import pydantic

    from harness import audit
    from harness import describe as description
    from harness import spec as spec_module
    from harness.cli import doctor as prerequisites
    from harness.data import artifacts, download
    from harness.data import prepare as preparation
else:
    # The implementation, imported when a command runs: its --help must not import it (pydantic,
    # NumPy).
    pydantic = lazy_module("pydantic")
    audit = lazy_module("harness.audit")
    description = lazy_module("harness.describe")
    spec_module = lazy_module("harness.spec")
    preparation = lazy_module("harness.data.prepare")
    download = lazy_module("harness.data.download")
    artifacts = lazy_module("harness.data.artifacts")
    prerequisites = lazy_module("harness.cli.doctor")

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
    return (
        f"ok {path}: {spec.benchmark} v{spec.version} (spec hash {spec.spec_hash()[:19]}…){member}"
    )


@app.command()
def schema() -> None:
    """Print the JSON Schema of a spec (for editors and CI)."""
    typer.echo(json.dumps(spec_module.json_schema(), indent=2, sort_keys=True))


DESCRIBE_EPILOG = """
Example: zsl spec describe specs/demo.yaml. Prepares the benchmark first (under ZSL_HOME), so
the raw data must be reachable: where a spec's raw data would be downloaded (the xlsa17
archive, about 1 GB), describe asks first; --yes answers yes, and without a terminal to ask on
and without --yes it refuses. --release-only reads the release's split files alone (e.g. xlsa17
att_splits.mat and the class lists, a few MB) and never downloads: without them here it says
where it looked and how to provide them.
"""


@app.command(epilog=DESCRIBE_EPILOG)
@reports_errors
def describe(
    path: Annotated[Path, typer.Argument(help="spec file", exists=True, dir_okay=False)],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    release_only: Annotated[
        bool,
        typer.Option(
            "--release-only",
            help="only the split files (e.g. xlsa17 att_splits.mat), no features: GBU Table I;"
            " never downloads",
        ),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="download the raw data without asking when it is not on this machine",
        ),
    ] = False,
) -> None:
    """Print a benchmark's sizes, structure diagnostics and leakage audit."""
    spec = spec_module.load_spec(path)
    if release_only:
        prerequisites.require_prerequisites(spec, release_only=True)
        with download.download_policy(_never_downloads):
            table = description.describe_release(spec)
        if as_json:
            typer.echo(json.dumps(table, indent=1, sort_keys=True, default=_jsonable))
            return
        leak = table.pop("leakage", None)
        stdout.print(f"{spec.benchmark} v{spec.version}: the release's split files only")
        _print_facts(list(table.items()))
        if leak is not None:
            _print_leakage(leak)
        return
    root = artifacts.benchmark_dir(spec.benchmark, spec.version)
    if artifacts.cache_action(root, spec.data_hash()) == "create":  # not frozen yet
        prerequisites.require_prerequisites(spec)
    with download.download_policy(ask_before_download(yes)):
        bench = preparation.load_benchmark(spec)
    report = description.describe_benchmark(spec, bench)
    if as_json:
        typer.echo(json.dumps(report, indent=1, sort_keys=True, default=_jsonable))
        return
    sizes = report["sizes"]
    stdout.print(f"{spec.benchmark} v{spec.version}", soft_wrap=True)
    facts: list[tuple[str, Any]] = [
        ("benchmark hash", report["hash"]),
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
        facts += [
            ("hierarchy", report["hierarchy"]),
            ("structural_ratio", report["structural_ratio"]),
            ("hops_to_train", report.get("hops_to_train", {})),
            ("mutual_exclusivity_violations", report["mutual_exclusivity_violations"]),
        ]
    _print_facts(facts)
    _print_leakage(report["leakage"])


def _never_downloads(planned: download.Download) -> str:
    return (
        "--release-only never downloads (it reads the release's split files alone, a few MB:"
        " e.g. <DATASET>/att_splits.mat and the class lists)"
    )


#: Row labels of the report's keys where their own spelling reads badly.
_LABELS = {
    "hops_to_train": "hops to the nearest training class",
    "mutual_exclusivity_violations": "mutual-exclusivity violations",
}


def _print_facts(rows: list[tuple[str, Any]]) -> None:
    """Print the rows as aligned ``label  value`` lines, never wrapped by us (a hash stays whole
    when copied), values in words. Labels are the report's keys in words; keys inside a value
    are data (file names, index vector names) and are shown as written."""
    labelled = [(_LABELS.get(str(k), str(k).replace("_", " ")), k, v) for k, v in rows]
    width = max((len(label) for label, _, _ in labelled), default=0)
    for label, key, value in labelled:
        lines = _value_lines(str(key), value)
        stdout.print(f" {label.ljust(width)}   {lines[0]}".rstrip(), soft_wrap=True)
        for line in lines[1:]:
            stdout.print(f" {' ' * width}   {line}", soft_wrap=True)


def _value_lines(key: str, value: Any) -> list[str]:
    """``value`` of the report's ``key`` in words: one line, or a first line and nested ones."""
    if key == "structural_ratio" and isinstance(value, dict):
        return [_ratio(value["value"], value["n_included"], value["excluded"])]
    if key == "hops_to_train" and isinstance(value, dict):
        return [", ".join(f"{hops}: {n} unseen" for hops, n in value.items()) or "none"]
    if key == "mutual_exclusivity_violations" and isinstance(value, dict):
        return [
            f"{len(value['unseen'])} among unseen classes, {value['all']} among all classes"
            + "".join(f"; {a} is an ancestor of {b}" for a, b in value["unseen"])
        ]
    if key == "hierarchy" and isinstance(value, dict):
        return [", ".join(f"{k.replace('_', ' ')} {_plain(v)}" for k, v in value.items())]
    if key == "structure" and isinstance(value, dict) and "structural_ratio" in value:
        rest = {k: v for k, v in value.items() if k not in ("structural_ratio", "n_included")}
        excluded = rest.pop("excluded", {})
        count = sum(len(v) for v in excluded.values()) if isinstance(excluded, dict) else excluded
        lines = [_ratio(value["structural_ratio"], value["n_included"], count)]
        if isinstance(excluded, dict) and count:
            lines += [f"excluded, {k.replace('_', ' ')}: {_plain(v)}" for k, v in excluded.items()]
        return lines + [f"{k}: {_plain(v)}" for k, v in rest.items()]
    return _nested(value)


def _ratio(value: float | None, n_included: int, excluded: int) -> str:
    shown = "undefined" if value is None else _number(value)
    return f"{shown} over {n_included} unseen classes ({excluded} excluded)"


def _nested(value: Any) -> list[str]:
    """A flat mapping of numbers on one line (``key number, …``); any other mapping as one
    ``key: value`` line per entry, indented under an empty first line; keys as written."""
    if isinstance(value, dict) and value:
        if all(v is None or isinstance(v, (bool, int, float)) for v in value.values()):
            return [", ".join(f"{k} {_plain(v)}" for k, v in value.items())]
        lines = [""]
        for k, v in value.items():
            inner = _nested(v)
            lines.append(f"  {k}: {inner[0]}".rstrip())
            lines += [f"  {line}" for line in inner[1:]]
        return lines
    return [_plain(value)]


def _number(value: float | int) -> str:
    return f"{value:.4g}" if isinstance(value, float) else f"{value:,}"


def _plain(value: Any) -> str:
    """A scalar or a list in words: lists joined (an empty one is "none"), numbers rounded."""
    if isinstance(value, dict):
        return "none" if not value else " ".join(_nested(value)).strip()
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value) if value else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _number(value)
    if value is None:
        return "none"
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
