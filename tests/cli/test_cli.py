"""The CLI: one-line help everywhere, clean errors with exit codes, and the demo end to end."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from tests.conftest import SPECS, SUBMISSIONS, DemoRun

runner = CliRunner()
COMMANDS = [
    ["spec"],
    ["spec", "validate"],
    ["spec", "schema"],
    ["spec", "describe"],
    ["data"],
    ["data", "prepare"],
    ["data", "verify"],
    ["hierarchy"],
    ["hierarchy", "build"],
    ["hierarchy", "show"],
    ["submission"],
    ["submission", "validate"],
    ["submission", "generate"],
    ["leaderboard"],
    ["leaderboard", "build"],
    ["metrics"],
    ["metrics", "list"],
    ["results"],
    ["results", "export"],
    ["results", "import"],
    ["results", "rescore"],
    ["results", "list"],
    ["results", "delete"],
    ["results", "hide"],
    ["results", "unhide"],
    ["ci"],
    ["ci", "changed"],
    ["ci", "pr"],
    ["ci", "publish"],
    ["run"],
    ["demo"],
]


def test_top_level_help_lists_every_command_with_a_line() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in (
        "spec",
        "data",
        "hierarchy",
        "submission",
        "leaderboard",
        "results",
        "ci",
        "metrics",
        "run",
        "demo",
    ):
        match = re.search(rf"^\W*{name}\s+(\w.*?)\s*\W*$", result.output, flags=re.M)
        assert match is not None, (name, result.output)
        assert len(match.group(1)) > 15, match.group(0)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_subcommand_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    lines = [line.strip(" │") for line in result.output.splitlines()]
    usage = next(i for i, line in enumerate(lines) if line.startswith("Usage:"))
    description = next(line for line in lines[usage + 1 :] if line)
    assert not description.startswith("╭") and len(description) > 15, result.output


def test_spec_validate_and_schema(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["spec", "validate", str(SPECS / "demo.yaml")])
    assert ok.exit_code == 0 and "ok" in ok.output
    bad = tmp_path / "bad.yaml"
    shutil.copytree(SPECS / "demo", tmp_path / "demo")
    bad.write_text((SPECS / "demo.yaml").read_text().replace("version: 1", "version: one"))
    result = runner.invoke(app, ["spec", "validate", str(bad)])
    assert result.exit_code == 1
    assert "version: Input should be a valid integer" in result.output
    assert "Traceback" not in result.output
    schema = runner.invoke(app, ["spec", "schema"])
    assert schema.exit_code == 0 and '"benchmark"' in schema.output


def test_data_prepare_verify_and_tamper_exit_2(isolated_home: Path) -> None:
    spec = str(SPECS / "demo.yaml")
    first = runner.invoke(app, ["data", "prepare", spec])
    assert first.exit_code == 0, first.output
    assert "sha256:" in first.output
    verified = runner.invoke(app, ["data", "verify", spec])
    assert verified.exit_code == 0 and "ok facts.json" in verified.output
    # The facts beside the manifest, outside its hash: a forged file is found and replaced.
    facts = isolated_home / "benchmarks" / "demo" / "v1" / "facts.json"
    forged = json.loads(facts.read_text())
    forged["structure"] = {"forged": True}
    facts.write_text(json.dumps(forged))
    result = runner.invoke(app, ["data", "verify", spec])
    assert result.exit_code == 0 and "replaced facts.json" in result.output
    assert "forged" not in facts.read_text()
    features = isolated_home / "benchmarks" / "demo" / "v1" / "features.npy"
    data = np.load(features)
    data[0, 0] += 1
    np.save(features, data)
    result = runner.invoke(app, ["data", "verify", spec])
    assert result.exit_code == 2
    assert "features.npy" in result.output and "does not match the manifest" in result.output


@pytest.mark.slow
def test_demo_builds_a_site_with_both_submissions(demo_run: DemoRun) -> None:
    # The session's one demo run (tests/conftest.py), whose records test_demo_records checks.
    assert demo_run.exit_code == 0, demo_run.output
    out = demo_run.site
    assert f"leaderboard: {(out / 'index.html').resolve()}" in demo_run.output.replace("\n", "")
    page = (out / "benchmarks" / "demo-v1.html").read_text()
    assert "eszsl" in page and "nearest-seen-class-transfer" in page
    assert "top1" in page and "H" in page


def test_run_unknown_runner_is_a_clean_error() -> None:
    result = runner.invoke(
        app,
        [
            "run",
            str(SUBMISSIONS / "eszsl"),
            "--spec",
            str(SPECS / "demo.yaml"),
            "--runner",
            "lcoal",
        ],
    )
    assert result.exit_code == 1
    assert "unknown runner 'lcoal'. Did you mean 'local'?" in result.output


def test_metrics_list_shows_every_registered_metric() -> None:
    import json

    from harness.metrics import metrics

    result = runner.invoke(app, ["metrics", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == list(metrics)
    hp = next(r for r in rows if r["name"] == "hierarchical_precision_at_k")
    assert hp["needs_hierarchy"] and set(hp["params"]) == {"k", "valid"}
    table = runner.invoke(app, ["metrics", "list"], env={"COLUMNS": "250"})
    assert "calibrated_harmonic_mean" in table.output and "hierarchical_cost ↓" in table.output
    # Every metric says what it averages over, as the registry declares it.
    for row in rows:
        metric = metrics.get(row["name"])
        assert row["averaged_over"] == metric.averaged_over in ("images", "classes")
        assert row["averaging"] == metric.averaging
    units = {r["name"]: r["averaged_over"] for r in rows}
    assert units["hierarchical_precision_at_k"] == "images"
    assert units["per_class_hierarchical_precision_at_k"] == "classes"
    assert units["darts_reward"] == "images" and units["hierarchical_cost"] == "classes"
    line = next(x for x in table.output.splitlines() if "per_image_top_k_accuracy" in x)
    assert "averaged over images" in line
    narrow = runner.invoke(app, ["metrics", "list"], env={"COLUMNS": "60"})
    names = {x.split()[0] for x in narrow.output.splitlines() if x and not x.startswith(" ")}
    assert set(metrics) <= names  # never cut, whatever the width


def test_spec_describe_demo() -> None:
    import json

    result = runner.invoke(app, ["spec", "describe", str(SPECS / "demo.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["sizes"]["unseen_classes"] == 20 and report["n_classes"] == 100
    assert report["hierarchy"]["leaves"] == 100
    assert 0 < report["structural_ratio"]["value"] < 10
    assert report["mutual_exclusivity_violations"]["unseen"] == []
    assert report["leakage"]["classes"] == [] and report["leakage"]["source"] == "none"
    text = runner.invoke(app, ["spec", "describe", str(SPECS / "demo.yaml")])
    assert "classes 100 = 64 train + 16 val + 20 unseen" in " ".join(text.output.split())


def test_spec_validate_checks_spec_bases_apart() -> None:
    paths = sorted(str(p) for p in (SPECS / "xlsa17").glob("*.yaml"))
    result = runner.invoke(app, ["spec", "validate", *paths])
    assert result.exit_code == 0, result.output
    bases = [line for line in result.output.splitlines() if line.startswith("base ")]
    assert len(bases) == 2 and all("_protocol-gbu" in line for line in bases)
