"""Managing the store from the command line: `zsl results list / delete / hide / unhide`, and
`zsl run --dry-run / --no-store`, the note when a run replaces a stored one, and the warning
when a score is below chance (a score matrix with its columns in another class order)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.data.artifacts import benchmark_dir
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.pipeline import run_submission
from harness.results.store_io import resolve_runs
from harness.spec import load_spec
from harness.store import count_runs, list_runs, load_runs, open_store, save_run
from harness.submission.package import load_package
from harness.submission.predictions import write_predictions
from tests.conftest import SPECS, SUBMISSIONS
from tests.store_records import make_record

runner = CliRunner()
DEMO = SPECS / "demo.yaml"
CAUSE = (
    "columns of the score matrix in another class order than the benchmark's class list "
    "(see `zsl spec describe`), or labels shifted"
)
ALE = "ale@1.0 on cub-demo v1"
SAE = "sae@1.0 on cub-demo v1"
ESZSL = "eszsl@1.0 on awa2 v1"


def _store(db: str) -> None:
    engine = open_store(db)
    save_run(engine, make_record())
    save_run(engine, make_record(name="sae", zsl_top1=0.25, gzsl=None))
    save_run(engine, make_record(benchmark="awa2", name="eszsl", zsl_top1=0.125))
    engine.dispose()


def _zsl(db: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, [*args, "--database-url", db])
    return result.exit_code, result.stdout, result.stderr


# -- run names ----------------------------------------------------------------------------------


KEYS = [("cub-demo", 1, "ale", "1.0"), ("cub-demo", 1, "sae", "1.0"), ("awa2", 1, "eszsl", "1.0")]


def test_run_names_resolve_in_one_form() -> None:
    assert resolve_runs([SAE, ALE, SAE], KEYS) == [KEYS[1], KEYS[0]]
    assert resolve_runs(["  ale@1.0   on cub-demo v1 "], KEYS) == [KEYS[0]]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "ale@1.0 on cub-demo v2",
            "no stored run is 'ale@1.0 on cub-demo v2'; did you mean 'ale@1.0 on cub-demo v1'"
            " or 'sae@1.0 on cub-demo v1'?",
        ),
        (
            "cub-demo/ale@1.0",
            "'cub-demo/ale@1.0' is not a run name: name a run as 'SUBMISSION@VERSION on "
            "BENCHMARK vN', e.g. 'ale@1.0 on cub-demo v1'; did you mean 'ale@1.0 on cub-demo v1'?",
        ),
        (
            "nothing-like-it",
            "'nothing-like-it' is not a run name: name a run as 'SUBMISSION@VERSION on "
            "BENCHMARK vN', e.g. 'ale@1.0 on cub-demo v1'; the store holds 3 runs: "
            "`zsl results list` shows them",
        ),
    ],
)
def test_an_unknown_run_name_lists_close_matches(name: str, message: str) -> None:
    with pytest.raises(HarnessError) as err:
        resolve_runs([ALE, name], KEYS)
    assert str(err.value) == message


def test_no_run_in_an_empty_store() -> None:
    with pytest.raises(
        HarnessError, match=r"^no stored run is 'a@1 on b v1'; the store holds no run$"
    ):
        resolve_runs(["a@1 on b v1"], [])


# -- zsl results list / delete / hide / unhide ---------------------------------------------------


def test_results_list_shows_and_filters_runs(db: str) -> None:
    _store(db)
    code, out, _ = _zsl(db, "results", "list")
    assert code == 0
    assert out.splitlines() == [
        f"{ESZSL}  local  2024-05-17 12:30  zsl top1 12.5, gzsl H 48.0  [source not recorded]",
        f"{ALE}  local  2024-05-17 12:30  zsl top1 50.0, gzsl H 48.0  [source not recorded]",
        f"{SAE}  local  2024-05-17 12:30  zsl top1 25.0  [source not recorded]",
        "3 runs stored",
    ]
    code, out, _ = _zsl(db, "results", "list", "--benchmark", "cub-demo", "--submission", "sae")
    assert (code, out.splitlines()) == (
        0,
        [
            f"{SAE}  local  2024-05-17 12:30  zsl top1 25.0  [source not recorded]",
            "1 matching run stored",
        ],
    )


def test_results_delete_dry_run_then_delete(db: str) -> None:
    _store(db)
    code, out, _ = _zsl(db, "results", "delete", ALE, ESZSL, "--dry-run")
    assert (code, out.splitlines()) == (0, [f"would delete: {ALE}", f"would delete: {ESZSL}"])
    assert count_runs(open_store(db)) == 3
    code, out, _ = _zsl(db, "results", "delete", ALE, ESZSL)
    assert code == 0
    assert out.splitlines() == [
        f"deleted: {ALE}",
        f"deleted: {ESZSL}",
        "run `zsl results export --prune` to delete their record files too",
    ]
    assert [s.record.submission.name for s in list_runs(open_store(db))] == ["sae"]


def test_results_delete_of_an_unknown_run_changes_nothing(db: str) -> None:
    _store(db)
    code, out, err = _zsl(db, "results", "delete", ALE, "eszsl@1.0 on awa2 v2")
    assert code == 1 and out == ""
    assert err == (
        "error: no stored run is 'eszsl@1.0 on awa2 v2'; did you mean 'eszsl@1.0 on awa2 v1'?\n"
    )
    assert count_runs(open_store(db)) == 3


def test_hidden_runs_leave_exports_and_come_back(db: str, tmp_path: Path) -> None:
    _store(db)
    out_dir = tmp_path / "results"
    assert _zsl(db, "results", "export", "--results", str(out_dir))[0] == 0
    sae_file = out_dir / "cub-demo" / "v1" / "sae@1.0.json"
    assert sae_file.is_file()

    code, out, _ = _zsl(db, "results", "hide", SAE, "--dry-run")
    assert (code, out.splitlines()) == (0, [f"would be hidden: {SAE}"])
    assert count_runs(open_store(db), hidden=True) == 0
    code, out, _ = _zsl(db, "results", "hide", SAE)
    assert code == 0
    assert out.splitlines() == [
        f"hidden: {SAE}",
        "run `zsl results export --prune` to update the record files (a hidden run's file is "
        "deleted)",
    ]
    code, out, _ = _zsl(db, "results", "hide", SAE)
    assert out.splitlines() == [f"hidden: {SAE} (already hidden: unchanged)"]
    code, out, _ = _zsl(db, "results", "list", "--submission", "sae")
    assert out.splitlines() == [
        f"{SAE}  local  2024-05-17 12:30  zsl top1 25.0  [source not recorded]  [hidden]",
        "1 matching run stored (1 hidden)",
    ]
    assert [r.submission.name for r in load_runs(open_store(db))] == ["eszsl", "ale"]

    code, out, _ = _zsl(db, "results", "export", "--results", str(out_dir), "--prune")
    assert code == 0
    assert (
        out
        == f"2 records in {out_dir}: 0 written, 2 unchanged, 1 stale removed; 1 hidden run left out\n"
    )
    assert not sae_file.exists()

    code, out, _ = _zsl(db, "results", "unhide", SAE)
    assert (code, out.splitlines()[0]) == (0, f"shown: {SAE}")
    assert _zsl(db, "results", "export", "--results", str(out_dir))[0] == 0
    assert sae_file.is_file()


# -- zsl run: below chance, replacing, --no-store, --dry-run --------------------------------------


def _labels(bench: PreparedBenchmark, setting: str) -> np.ndarray:
    """The column of each row's true class (what the scorer compares with)."""
    columns = bench.columns(setting)
    column_of = np.full(len(bench.class_ids), -1)
    column_of[columns] = np.arange(len(columns))
    return column_of[bench.array("labels")[bench.rows(setting)]]


def _shifted_package(tmp_path: Path) -> tuple[Path, PreparedBenchmark]:
    """A predictions package whose scores are one column off, the true class scored last: every
    top-k is wrong."""
    package_dir = tmp_path / "shifted"
    shutil.copytree(
        SUBMISSIONS / "nearest-seen-class-transfer",
        package_dir,
        ignore=shutil.ignore_patterns("__pycache__", "predictions"),
    )
    package = load_package(package_dir)
    bench = load_benchmark(load_spec(DEMO))
    rng = np.random.default_rng(0)
    for setting in bench.spec.prediction_settings():
        labels = _labels(bench, setting)
        n_columns = len(bench.columns(setting))
        scores = rng.uniform(0.0, 0.1, size=(len(labels), n_columns)).astype("float32")
        rows = np.arange(len(labels))
        scores[rows, (labels + 1) % n_columns] += 1.0
        scores[rows, labels] -= 1.0
        write_predictions(
            package.prediction_path("demo", setting),
            scores,
            benchmark_hash=bench.hash,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
        )
    return package_dir, bench


def _warnings(bench: PreparedBenchmark) -> list[str]:
    n_zsl, n_gzsl = len(bench.columns("zsl")), len(bench.columns("gzsl"))
    zero = "0.0 % (95 % interval 0.0 % to 0.0 %) is below chance"
    return [
        f"zsl top1 = {zero} ({100 / n_zsl:.1f} % = 1/{n_zsl} candidate classes); "
        f"likely cause: {CAUSE}",
        f"zsl top5 = {zero} ({500 / n_zsl:.1f} % = 5/{n_zsl} candidate classes); "
        f"likely cause: {CAUSE}",
        # The package is a seen-class baseline (`declarations.seen_only: [gzsl]`): its GZSL
        # unseen accuracy and H are 0 by design and not warned about; its GZSL top-1 is not.
        f"gzsl top1 = {zero} ({100 / n_gzsl:.1f} % = 1/{n_gzsl} candidate classes); "
        f"likely cause: {CAUSE}",
    ]


NAME = "nearest-seen-class-transfer@1.0 on demo v1"


@pytest.mark.slow  # prepares the demo and scores it
def test_shifted_columns_warn_on_stderr_and_in_the_record(tmp_path: Path, db: str) -> None:
    package, bench = _shifted_package(tmp_path)
    expected = _warnings(bench)
    # --no-store: scored and printed, nothing stored
    code, out, err = _zsl(db, "run", str(package), "--spec", str(DEMO), "--no-store")
    assert code == 0, err
    assert out.endswith(" (not stored: --no-store)\n")
    assert [line for line in err.splitlines() if line.startswith("warning: ")] == [
        f"warning: {NAME}: {w}" for w in expected
    ]
    assert count_runs(open_store(db)) == 0

    code, out, err = _zsl(db, "run", str(package), "--spec", str(DEMO))
    assert code == 0, err
    assert "note: " not in err  # nothing replaced
    [record] = load_runs(open_store(db))
    assert record.logs["warnings"].splitlines() == expected

    # the same run again replaces the stored one, and says so
    code, out, err = _zsl(db, "run", str(package), "--spec", str(DEMO))
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: this predictions run replaces the stored run of {NAME} (predictions runner, "
        f"{record.created_at:%Y-%m-%d %H:%M} UTC; zsl top1 0.0 → 0.0, gzsl H 0.0 → 0.0)"
    ]
    assert count_runs(open_store(db)) == 1


@pytest.mark.slow  # prepares the demo and scores it
def test_a_run_under_another_runner_names_what_it_replaces(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    package, bench = _shifted_package(tmp_path)
    spec = load_spec(DEMO)
    sandbox_run = make_record(
        benchmark="demo", name="nearest-seen-class-transfer", benchmark_hash=bench.hash
    )
    sandbox_run = sandbox_run.model_copy(
        update={
            "runner": "sandbox",
            "benchmark": sandbox_run.benchmark.model_copy(
                update={"spec_hash": spec.spec_hash(), "title": spec.title}
            ),
            # the same package: only the runner differs (tests/cli/test_run_replace.py has the
            # notes of a changed package)
            "submission": sandbox_run.submission.model_copy(
                update={"package_hash": load_package(package).hash()}
            ),
        }
    )
    save_run(open_store(db), sandbox_run)
    capsys.readouterr()
    record = run_submission(package, DEMO, database_url=db, quiet=True)
    assert record.runner == "predictions"
    assert capsys.readouterr().err == (
        f"note: this predictions run replaces the stored run of {NAME} (sandbox runner, "
        "2024-05-17 12:30 UTC; zsl top1 50.0 → 0.0, gzsl H 48.0 → 0.0)\n"
    )
    [stored] = load_runs(open_store(db))
    assert (stored.runner, stored.created_at) == ("predictions", record.created_at)


@pytest.mark.slow  # prepares the demo and scores it
def test_a_matrix_rerun_names_the_run_it_replaced(tmp_path: Path, db: str) -> None:
    # The matrix stores each run as it arrives: what a run replaced comes back with its result
    # (no snapshot of the whole store up front), and only a run that was stored says so.
    package, _ = _shifted_package(tmp_path)
    matrix = [str(package), "--spec", str(DEMO), "--executor", "inline"]
    code, _, err = _zsl(db, "run", *matrix)
    assert (code, "replaces" in err) == (0, False)
    [first] = load_runs(open_store(db))
    code, out, err = _zsl(db, "run", *matrix)
    assert (code, "replaces" in err) == (0, False)
    assert out.splitlines()[-1].startswith("0 done, 0 failed, 1 skipped (stored already)")
    code, _, err = _zsl(db, "run", *matrix, "--rerun")
    assert code == 0, err
    assert (
        f"note: this predictions run replaces the stored run of {NAME} (predictions runner, "
        f"{first.created_at:%Y-%m-%d %H:%M} UTC; zsl top1 0.0 → 0.0, gzsl H 0.0 → 0.0)\n"
    ) in err


@pytest.mark.slow  # prepares the demo and scores it
def test_dry_run_validates_and_plans_without_running(tmp_path: Path, db: str) -> None:
    package, bench = _shifted_package(tmp_path)
    code, out, err = _zsl(db, "run", str(package), "--spec", str(DEMO), "--dry-run")
    assert code == 0, err
    hash_ = load_package(package).hash()
    spec = load_spec(DEMO)
    files = ", ".join(f"demo.{s}.safetensors" for s in spec.prediction_settings())
    assert out.splitlines() == [
        f"dry run of {package} on {DEMO}: nothing run, nothing stored",
        f"  package:   valid: nearest-seen-class-transfer@1.0 (predictions, {hash_})",
        f"  spec:      valid: demo v1 (spec {spec.spec_hash()})",
        f"  benchmark: prepared and verified ({bench.hash}) at {benchmark_dir('demo', 1)}",
        f"  run:       would score the prediction files {files} (read and checked)",
        f"  store:     would store a new run: {NAME}",
    ]
    assert count_runs(open_store(db)) == 0
    assert _zsl(db, "run", str(package), "--spec", str(DEMO))[0] == 0
    [stored] = load_runs(open_store(db))
    code, out, err = _zsl(db, "run", str(package), "--spec", str(DEMO), "--dry-run")
    assert code == 0, err
    assert out.splitlines()[-1] == (
        f"  store:     would replace the stored run of {NAME} (predictions runner, "
        f"{stored.created_at:%Y-%m-%d %H:%M} UTC; zsl top1 0.0, gzsl H 0.0); stored with the "
        "same package, benchmark and spec hashes"
    )
    assert load_runs(open_store(db)) == [stored]


def test_dry_run_of_a_model_names_the_runner_and_an_unprepared_benchmark(
    isolated_home: Path, db: str
) -> None:
    code, out, err = _zsl(
        db,
        "run",
        str(SUBMISSIONS / "eszsl"),
        "--spec",
        str(DEMO),
        "--dry-run",
        "--runner",
        "local",
        "--no-store",
    )
    assert code == 0, err
    root = isolated_home / "benchmarks" / "demo" / "v1"
    assert out.splitlines()[3:] == [
        f"  benchmark: not prepared yet: `zsl run` would prepare it first (or `zsl data prepare "
        f"{DEMO}`) under {root}",
        "  run:       would run model:ESZSL in the local runner (fit, then predict for zsl, gzsl,"
        " scale, zsl_val, gzsl_val, scale_val; at most 600 s, 2 GB, 2 CPU, 0 GPU), then score",
        "  store:     would store nothing (--no-store)",
    ]
    assert not root.exists()


def test_dry_run_of_a_bad_package_is_the_run_error(tmp_path: Path, db: str) -> None:
    code, _, err = _zsl(db, "run", str(tmp_path), "--spec", str(DEMO), "--dry-run")
    assert code == 1
    assert err.startswith("error: ") and "submission.yaml" in err


def test_no_store_refuses_the_matrix(db: str) -> None:
    code, _, err = _zsl(
        db,
        "run",
        str(SUBMISSIONS / "eszsl"),
        str(SUBMISSIONS / "sae"),
        "--spec",
        str(DEMO),
        "--no-store",
    )
    assert code == 1
    assert err == (
        "error: --no-store runs one package on one --spec (no --matrix, --executor, --jobs or"
        " --ray-address): the matrix stores each run as it arrives\n"
    )


def test_dry_run_of_several_packages_reports_each(tmp_path: Path, db: str) -> None:
    bad = tmp_path / "empty"
    bad.mkdir()
    eszsl = SUBMISSIONS / "eszsl"
    code, out, err = _zsl(
        db, "run", str(eszsl), str(bad), "--spec", str(DEMO), "--dry-run", "--runner", "local"
    )
    assert code == 1
    assert out.splitlines()[0] == f"dry run of {eszsl} on {DEMO}: nothing run, nothing stored"
    assert out.splitlines()[-1] == "  store:     would store a new run: eszsl@1.0 on demo v1"
    assert err == (
        f"error: {bad} on {DEMO}: {bad}: no submission.yaml; run `zsl submission init`\n"
    )
