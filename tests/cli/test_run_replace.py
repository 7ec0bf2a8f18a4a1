"""`zsl run` and a changed package under a stored name and version (issue 29, item 7): refused
before anything runs, naming both package hashes and the two ways out (a new `version`, or
`--replace`); a re-run of the same package replaces its run as before, and so does the demo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import harness.pipeline
from harness.cli.main import app
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.records import RunRecord, run_key
from harness.spec import load_spec
from harness.store import changed_packages, list_runs, load_runs, open_store, save_run
from harness.submission.package import load_package
from harness.submission.predictions import write_predictions
from tests.conftest import SPECS, SUBMISSIONS
from tests.store_records import make_record

DEMO = SPECS / "demo.yaml"
OLD = "sha256:" + "0" * 64

runner = CliRunner()


def _zsl(db: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, [*args, "--database-url", db])
    return result.exit_code, result.stdout, result.stderr


def _refusal(name: str, new: str) -> str:
    return (
        f"error: the stored run of {name}@1.0 on demo v1 was made from package 000000000000;"
        f" this package (same name and version) hashes to {new.partition(':')[2][:12]}: its"
        " files changed. Bump `version` in submission.yaml to keep both runs, or pass --replace"
        " to overwrite the stored run"
    )


def _package(root: Path, bench: PreparedBenchmark) -> Path:
    """A prediction-file package ``changing@1.0`` with seeded scores for every demo setting."""
    package = root / "changing"
    package.mkdir(parents=True)
    (package / "submission.yaml").write_text(
        'name: changing\nversion: "1.0"\nauthors: [Someone]\nkind: predictions\n'
    )
    rng = np.random.default_rng(0)
    for setting in bench.spec.prediction_settings():
        shape = (len(bench.rows(setting)), len(bench.columns(setting)))
        write_predictions(
            package / "predictions" / f"demo.{setting}.safetensors",
            rng.random(shape, dtype=np.float32),
            benchmark_hash=bench.hash,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
        )
    return package


def _seed(db: str, bench: PreparedBenchmark, name: str) -> list[RunRecord]:
    """A stored run of ``name``@1.0 on the demo made from package hash :data:`OLD`."""
    spec = load_spec(DEMO)
    record = make_record(benchmark="demo", name=name, benchmark_hash=bench.hash, package_hash=OLD)
    info = record.benchmark.model_copy(update={"spec_hash": spec.spec_hash(), "title": spec.title})
    save_run(open_store(db), record.model_copy(update={"benchmark": info}))
    return load_runs(open_store(db))


def _note(old: RunRecord, new: RunRecord, package: str) -> str:
    """The note of a run that replaced ``old`` (``package``: its hash change, or nothing)."""
    scores = ", ".join(
        f"{s} {m} {100 * old.score(s, m).value:.1f} → {100 * new.score(s, m).value:.1f}"  # type: ignore[union-attr]
        for s, m in (("zsl", "top1"), ("gzsl", "H"))
    )
    return (
        f"note: this predictions run replaces the stored run of changing@1.0 on demo v1"
        f" ({old.runner} runner, {old.created_at:%Y-%m-%d %H:%M} UTC; {package}{scores})"
    )


@pytest.mark.slow  # a scored run of the demo
def test_a_changed_package_is_refused_until_replace(tmp_path: Path, db: str) -> None:
    bench = load_benchmark(load_spec(DEMO))
    package = _package(tmp_path, bench)
    new = load_package(package).hash()
    stored = _seed(db, bench, "changing")
    run = ("run", str(package), "--spec", str(DEMO))

    code, stdout, stderr = _zsl(db, *run)
    assert (code, stdout) == (1, "")
    assert stderr.splitlines()[-1] == _refusal("changing", new)
    assert "✓ score" not in stderr  # refused before the files were scored
    assert load_runs(open_store(db)) == stored

    # --dry-run says what the run would say; with --replace, what it would replace
    code, stdout, stderr = _zsl(db, *run, "--dry-run")
    assert (code, stdout, stderr) == (1, "", _refusal("changing", new) + "\n")
    code, stdout, _ = _zsl(db, *run, "--dry-run", "--replace")
    assert code == 0
    assert stdout.splitlines()[-1].startswith(
        "  store:     would replace the stored run of changing@1.0 on demo v1 (local runner,"
    )

    code, stdout, stderr = _zsl(db, *run, "--replace")
    assert code == 0, stderr
    [replaced] = load_runs(open_store(db))
    assert replaced.submission.package_hash == new
    package_change = f"package 000000000000 → {new.partition(':')[2][:12]}, "
    assert [line for line in stderr.splitlines() if line.startswith("note: ")] == [
        _note(stored[0], replaced, package_change)
    ]
    # The same package again is a re-run, which replaces its run without --replace, as before:
    # tests/results/test_results_manage.py runs it (test_shifted_columns_warn_on_stderr...).
    assert changed_packages(open_store(db), {run_key(replaced): new}) == {}


def test_a_changed_model_is_refused_before_it_runs(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model ran")

    monkeypatch.setattr(harness.pipeline, "_run_model", never)
    bench = load_benchmark(load_spec(DEMO))
    stored = _seed(db, bench, "eszsl")
    package = SUBMISSIONS / "eszsl"
    code, stdout, stderr = _zsl(db, "run", str(package), "--spec", str(DEMO), "--runner", "local")
    assert (code, stdout) == (1, "")
    assert stderr.splitlines()[-1] == _refusal("eszsl", load_package(package).hash())
    assert load_runs(open_store(db)) == stored


@pytest.mark.slow  # one scored run of the demo
def test_the_matrix_refuses_a_changed_package_per_run(tmp_path: Path, db: str) -> None:
    bench = load_benchmark(load_spec(DEMO))
    package = _package(tmp_path, bench)
    stored = _seed(db, bench, "changing")
    matrix = ("run", str(package), "--spec", str(DEMO), "--executor", "inline")
    code, stdout, stderr = _zsl(db, *matrix)
    assert code == 1
    refusal = _refusal("changing", load_package(package).hash()).removeprefix("error: ")
    assert f"  ✗ changing@1.0 on demo v1: {refusal}\n" in stderr
    assert stdout.splitlines()[-1].startswith("0 done, 1 failed, 0 skipped (stored already)")
    assert load_runs(open_store(db)) == stored
    code, stdout, stderr = _zsl(db, *matrix, "--replace")
    assert code == 0, stderr
    assert stdout.splitlines()[-1].startswith("1 done, 0 failed, 0 skipped (stored already)")
    [replaced] = list_runs(open_store(db))
    assert replaced.record.submission.package_hash == load_package(package).hash()


@pytest.mark.slow  # one scored run of the demo and its site
def test_the_demo_replaces_a_changed_package_and_says_so(tmp_path: Path, db: str) -> None:
    # The demo re-makes the shipped runs: a shipped package that changed (a harness update)
    # replaces its run, with a note naming both package hashes.
    bench = load_benchmark(load_spec(DEMO))
    package = _package(tmp_path / "submissions", bench)
    [stored] = _seed(db, bench, "changing")
    code, _, stderr = _zsl(
        db,
        "demo",
        "--spec",
        str(DEMO),
        "--submissions",
        str(package.parent),
        "--out",
        str(tmp_path / "site"),
    )
    assert code == 0, stderr
    [replaced] = load_runs(open_store(db))
    new = load_package(package).hash()
    assert replaced.submission.package_hash == new
    package_change = f"package 000000000000 → {new.partition(':')[2][:12]}, "
    assert [line for line in stderr.splitlines() if line.startswith("note: ")] == [
        _note(stored, replaced, package_change)
    ]
