"""``zsl metrics``: the registered metrics, as the spec's ``metrics[].name`` refers to them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.padding import Padding
from rich.text import Text

from harness.cli._common import reports_errors, stdout
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness import metrics
    from harness.site import glossary
else:
    # The implementation, imported when a command runs: its --help must not import it.
    metrics = lazy_module("harness.metrics")
    glossary = lazy_module("harness.site.glossary")

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True)


@app.command("list")
@reports_errors
def list_metrics(
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List every registered metric: name, version, what it averages over, settings, parameters.

    "averaged over" says whether a value is a mean over test images (each image weighs the same)
    or over classes with test images (each class weighs the same): on class-imbalanced splits
    the two differ, so hp@k has both (hierarchical_precision_at_k, per images;
    per_class_hierarchical_precision_at_k, per classes).
    """
    rows: list[dict[str, Any]] = []
    for name, metric in metrics.metrics.items():
        params = {key: field.description or "" for key, field in metric.params.model_fields.items()}
        rows.append(
            {
                "name": name,
                "version": metric.version,
                "settings": sorted(metric.settings),
                "inputs": sorted(metric.inputs),
                "higher_is_better": metric.higher_is_better,
                "averaged_over": metric.averaged_over,
                "group": metric.group,
                "figure": metric.figure,
                "averaging": metric.averaging,
                "averaging_note": metric.averaging_note,
                "needs_hierarchy": metric.needs_hierarchy,
                "needs_validation": metric.needs_validation,
                "params": params,
                "description": metric.description,
                "formula": metric.formula,
                "reference": metric.reference,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    # One block per metric rather than a table: names are what specs refer to and must never be
    # cut, and descriptions wrap to any terminal width.
    for row in rows:
        needs = [n for n in ("hierarchy", "validation") if row[f"needs_{n}"]]
        facts = [
            f"v{row['version']}",
            ",".join(row["settings"]),
            f"averaged over {row['averaged_over']}",
            "higher is better" if row["higher_is_better"] else "lower is better",
        ]
        if needs:
            facts.append("needs " + ", ".join(needs))
        if row["params"]:
            facts.append("params " + ", ".join(row["params"]))
        arrow = "" if row["higher_is_better"] else " ↓"
        stdout.print(
            Text.assemble((row["name"], "bold"), arrow, " ", " · ".join(facts)), soft_wrap=True
        )
        note = f" ({row['averaging_note']})" if row["averaging_note"] else ""
        text = row["description"] + f" Averaged over {row['averaged_over']}{note}."
        if stdout.is_terminal:
            stdout.print(Padding(Text(text), (0, 0, 1, 4)))
        else:  # piped (grep, a file): one line each, never cut or padded to a width
            stdout.print(f"    {text}\n", soft_wrap=True)


@app.command("describe")
@reports_errors
def describe_metric(
    name: Annotated[str, typer.Argument(help="a registered metric's name (zsl metrics list)")],
) -> None:
    """Print one metric's glossary entry: definition, formula, averaging unit, unit, parameters
    and source paper, the same entry the site's glossary.html shows."""
    entry = glossary.metric_entry(
        metrics.metrics.get(name)
    )  # an unknown name: the registry's "Did you mean"
    lines = [
        f"{entry.term} v{entry.version}: {entry.summary}",
        f"  formula: {entry.formula}",
        f"  averaged over: {entry.averaging}",
        f"  unit: {entry.unit}; {entry.direction}",
    ]
    if entry.parameters:
        lines.append("  parameters:")
        lines += [f"    {p.name} (default {p.default}): {p.description}" for p in entry.parameters]
    else:
        lines.append("  parameters: none")
    lines.append(f"  source: {entry.reference}")
    for line in lines:
        stdout.print(Text(line), soft_wrap=True)
