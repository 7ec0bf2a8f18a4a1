"""``zsl metrics``: the registered metrics, as the spec's ``metrics[].name`` refers to them."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli._common import reports_errors, stdout
from harness.metrics import metrics

app = typer.Typer(help="List the registered metrics and their parameters.", no_args_is_help=True)


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
    for name, metric in metrics.items():
        params = {key: field.description or "" for key, field in metric.params.model_fields.items()}
        rows.append(
            {
                "name": name,
                "version": metric.version,
                "settings": sorted(metric.settings),
                "inputs": sorted(metric.inputs),
                "higher_is_better": metric.higher_is_better,
                "averaged_over": metric.averaged_over,
                "averaging": metric.averaging,
                "averaging_note": metric.averaging_note,
                "needs_hierarchy": metric.needs_hierarchy,
                "needs_validation": metric.needs_validation,
                "params": params,
                "description": metric.description,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table("metric", "v", "averaged over", "settings", "needs", "params", "what it measures")
    for row in rows:
        needs = [n for n in ("hierarchy", "validation") if row[f"needs_{n}"]]
        table.add_row(
            row["name"] + ("" if row["higher_is_better"] else " ↓"),
            row["version"],
            row["averaged_over"] + (f" ({row['averaging_note']})" if row["averaging_note"] else ""),
            ",".join(row["settings"]),
            ",".join(needs) or "—",
            ",".join(row["params"]) or "—",
            row["description"],
        )
    stdout.print(table)
