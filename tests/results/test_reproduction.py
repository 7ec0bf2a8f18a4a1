"""Reproducible records (issue 14 item 18): a record file changes only when its result does, a
demo method gives bit-identical predictions whatever the caller's thread settings, and fresh
runs are compared with committed records within a stated tolerance (``zsl results diff``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.pipeline import run_submission
from harness.records import RUN_METADATA_FIELDS, RunRecord, result_payload
from harness.results.records_io import read_records, record_path, write_records
from harness.results.reproduction import (
    SCORE_TOLERANCE,
    compare_reproduction,
    result_differences,
)
from tests.conftest import REPO, SPECS, SUBMISSIONS

COMMITTED = REPO / "leaderboard" / "results" / "demo"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.fixture
def eszsl() -> RunRecord:
    """The committed ESZSL demo record: real scores, curves, intervals and hashes."""
    return next(r for r in read_records(COMMITTED) if r.submission.name == "eszsl")


def _rerun(record: RunRecord) -> RunRecord:
    """The same result with every piece of run metadata new, as a re-run on this machine."""
    return record.model_copy(
        update={
            "created_at": datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC),
            "timings": {"run": 99.0, "score": 1.5},
            "environment": {"machine": "elsewhere", "numpy": "9.9"},
            "logs": {"stdout": "another run printed this"},
        }
    )


def _with(record: RunRecord, **changes: object) -> RunRecord:
    """``record`` with scores set by ``"<setting> <metric>": value`` and prediction hashes."""
    data = record.model_dump(mode="json")
    for name, value in changes.items():
        if name == "predictions_hashes":
            data["predictions_hashes"] = value
            continue
        setting, metric = name.split(" ")
        (entry,) = [e for e in data["scores"] if (e["setting"], e["metric"]) == (setting, metric)]
        entry["value"] = value
    return RunRecord.model_validate(data)


def _index(record: RunRecord, setting: str, metric: str) -> int:
    return next(
        i for i, e in enumerate(record.scores) if (e.setting, e.metric) == (setting, metric)
    )


# -- what identifies a result ---------------------------------------------------------------------


def test_run_metadata_is_all_a_rerun_changes_and_nothing_of_the_result(eszsl: RunRecord) -> None:
    assert {"created_at", "timings", "environment", "logs"} == RUN_METADATA_FIELDS
    payload = result_payload(eszsl)
    assert not RUN_METADATA_FIELDS & payload.keys()
    for name in ("benchmark", "submission", "predictions_hashes", "scores", "harness_version"):
        assert name in payload
    assert result_payload(_rerun(eszsl)) == payload


def test_export_keeps_a_file_whose_result_is_unchanged_byte_for_byte(
    tmp_path: Path, eszsl: RunRecord
) -> None:
    first = write_records([eszsl], tmp_path)
    path = record_path(tmp_path, eszsl)
    assert first.written == [path]
    before = path.read_bytes()

    again = write_records([_rerun(eszsl)], tmp_path)
    assert (again.written, again.kept) == ([], [path])
    assert path.read_bytes() == before  # the metadata of the run that gave the result stays

    same = write_records([eszsl], tmp_path)
    assert (same.written, same.kept) == ([], [])  # identical text: unchanged, not "kept"


def test_export_rewrites_a_file_when_the_result_changes_even_in_the_last_bit(
    tmp_path: Path, eszsl: RunRecord
) -> None:
    write_records([eszsl], tmp_path)
    path = record_path(tmp_path, eszsl)
    value = eszsl.scores[0].value
    changed = _with(_rerun(eszsl), **{"zsl top1": value + value * 2.0**-52})
    assert changed.scores[0].value != value
    result = write_records([changed], tmp_path)
    assert (result.written, result.kept) == ([path], [])
    assert read_records(tmp_path) == [changed]  # with the new run's metadata too


def test_export_replaces_an_edited_file_of_the_same_result(
    tmp_path: Path, eszsl: RunRecord
) -> None:
    write_records([eszsl], tmp_path)
    path = record_path(tmp_path, eszsl)
    path.write_text(path.read_text().replace('"runner": "sandbox"', '"runner": "local"'))
    result = write_records([eszsl], tmp_path)  # the file no longer verifies: it is replaced
    assert result.written == [path]
    assert read_records(tmp_path) == [eszsl]


def test_cli_export_after_a_rerun_changes_no_file(
    tmp_path: Path, eszsl: RunRecord, db: str
) -> None:
    results = tmp_path / "results"
    write_records([eszsl], results)
    before = record_path(results, eszsl).read_bytes()
    fresh = tmp_path / "fresh"
    write_records([_rerun(eszsl)], fresh)
    runner = CliRunner()
    imported = runner.invoke(
        app, ["results", "import", "--results", str(fresh), "--database-url", db]
    )
    assert imported.exit_code == 0, imported.output
    out = runner.invoke(app, ["results", "export", "--results", str(results), "--database-url", db])
    assert out.exit_code == 0, out.output
    assert (
        out.output.split()
        == (
            f"1 records in {results}: 0 written, 1 unchanged (1 with the same result and other run"
            " metadata: file kept)"
        ).split()
    )
    assert record_path(results, eszsl).read_bytes() == before


# -- comparing across platforms -------------------------------------------------------------------


def test_prediction_hashes_and_scores_within_tolerance_reproduce(eszsl: RunRecord) -> None:
    # gzsl H moved by 1.2e-9; severity (5.477...) by 3e-5, within 1e-5 x 5.477 (relative);
    # every prediction hash differs, as on another CPU.
    severity = eszsl.score("zsl", "severity")
    assert severity is not None and 5 < severity.value < 6
    fresh = _with(
        eszsl,
        **{
            "gzsl H": 0.77803409,
            "zsl severity": severity.value + 3e-5,
            "predictions_hashes": {k: "sha256:" + "0" * 64 for k in eszsl.predictions_hashes},
        },
    )
    found = result_differences(eszsl, fresh)
    assert [d.field for d in found] == [
        "predictions_hashes.gzsl",
        "predictions_hashes.gzsl_val",
        "predictions_hashes.scale",
        "predictions_hashes.scale_val",
        "predictions_hashes.zsl",
        "predictions_hashes.zsl_val",
        f"scores[{_index(eszsl, 'zsl', 'severity')}].value",
        f"scores[{_index(eszsl, 'gzsl', 'H')}].value",
    ]
    assert all(d.within_tolerance for d in found)
    report = compare_reproduction([eszsl], [fresh])
    assert report.ok and list(report.within) == [("demo", 1, "eszsl", "1.0")]
    # To the bit, they are other results.
    assert not compare_reproduction([eszsl], [fresh], tolerance=0.0).ok


def test_a_score_beyond_tolerance_or_another_identity_field_does_not(eszsl: RunRecord) -> None:
    beyond = _with(eszsl, **{"gzsl AUSUC": 0.7666})  # committed 0.766573449203307
    (difference,) = result_differences(eszsl, beyond)
    i = _index(eszsl, "gzsl", "AUSUC")
    assert difference.describe("eszsl@1.0 on demo v1") == (
        f"eszsl@1.0 on demo v1: gzsl AUSUC: scores[{i}].value: committed 0.766573449203307, "
        "new 0.7666 (|Δ| 2.66e-05 > tolerance 1e-05)"
    )
    assert not compare_reproduction([eszsl], [beyond]).ok
    # A texts or an integer under scores, and any field outside them, must be identical.
    data = eszsl.model_dump(mode="json")
    data["scores"][0]["version"] = "9"
    data["scores"][0]["details"]["n_images"] += 1
    data["submission"]["package_hash"] = "sha256:" + "1" * 64
    other = result_differences(eszsl, RunRecord.model_validate(data))
    assert [(d.field, d.within_tolerance) for d in other] == [
        ("scores[0].details.n_images", False),
        ("scores[0].version", False),
        ("submission.package_hash", False),
    ]
    assert SCORE_TOLERANCE == 1e-5


def _with_curve(record: RunRecord, key: str, curve: dict[str, object], value: float) -> RunRecord:
    data = record.model_dump(mode="json")
    (entry,) = [e for e in data["scores"] if e["metric"] == "AUSUC"]
    entry["details"][key] = curve
    entry["value"] = value
    return RunRecord.model_validate(data)


def test_a_curve_may_gain_a_breakpoint_while_its_area_stays_within_tolerance(
    eszsl: RunRecord,
) -> None:
    # Two margins tied on one CPU split on another: one more point, the later ones shifted.
    area = 0.766573449203307
    committed = _with_curve(eszsl, "curve", {"n_points": 3, "seen": [1.0, 0.5, 0.0]}, area)
    split = {"n_points": 4, "seen": [1.0, 0.6, 0.5, 0.0]}
    i = _index(eszsl, "gzsl", "AUSUC")
    found = result_differences(committed, _with_curve(eszsl, "curve", split, area + 1e-16))
    assert [(d.field, d.within_tolerance) for d in found] == [
        (f"scores[{i}].details.curve.n_points", True),
        (f"scores[{i}].details.curve.seen", True),
        (f"scores[{i}].value", True),
    ]
    # The same change while the area moves beyond tolerance, or outside a curve, is not.
    moved = result_differences(committed, _with_curve(eszsl, "curve", split, 0.7666))
    assert not any(d.within_tolerance for d in moved)
    elsewhere = _with_curve(eszsl, "points", {"n_points": 3, "seen": [1.0, 0.5, 0.0]}, area)
    other = result_differences(elsewhere, _with_curve(eszsl, "points", split, area))
    assert [(d.field, d.within_tolerance) for d in other] == [
        (f"scores[{i}].details.points.n_points", False),
        (f"scores[{i}].details.points.seen", False),
    ]


def test_results_diff_prints_each_difference_beyond_tolerance_and_fails(
    tmp_path: Path, eszsl: RunRecord, db: str
) -> None:
    committed = tmp_path / "committed"
    write_records([eszsl], committed)
    fresh = tmp_path / "fresh"
    changed = _with(_rerun(eszsl), **{"gzsl AUSUC": 0.7666, "gzsl H": 0.77803409})
    write_records([changed], fresh)
    runner = CliRunner()
    imported = runner.invoke(
        app, ["results", "import", "--results", str(fresh), "--database-url", db]
    )
    assert imported.exit_code == 0, imported.output

    result = runner.invoke(
        app, ["results", "diff", "--results", str(committed), "--database-url", db]
    )
    i = _index(eszsl, "gzsl", "AUSUC")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        f"eszsl@1.0 on demo v1: gzsl AUSUC: scores[{i}].value: committed 0.766573449203307, "
        "new 0.7666 (|Δ| 2.66e-05 > tolerance 1e-05)",
        f"1 run compared with {committed}: 0 identical, 0 within tolerance 1e-05, 1 beyond",
    ]

    loose = runner.invoke(
        app,
        [
            "results",
            "diff",
            "--results",
            str(committed),
            "--database-url",
            db,
            "--tolerance",
            "1e-4",
        ],
    )
    assert loose.exit_code == 0, loose.output
    assert loose.output.splitlines() == [
        f"1 run compared with {committed}: 0 identical, 1 within tolerance 0.0001, 0 beyond"
    ]


def test_results_diff_with_nothing_to_compare_says_so(
    tmp_path: Path, eszsl: RunRecord, db: str
) -> None:
    committed = tmp_path / "committed"
    write_records([eszsl], committed)
    result = CliRunner().invoke(
        app, ["results", "diff", "--results", str(committed), "--database-url", db]
    )
    assert result.exit_code == 1
    assert "no stored run has a record file under" in result.output
    assert "none of its 1 records a stored run" in result.output


# -- one platform: bit-identical, whatever the thread settings ------------------------------------


@pytest.mark.slow
def test_a_demo_method_is_bit_identical_across_thread_settings_and_reexport_is_a_no_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    """SAE (BLAS solves, under a second) twice, the caller asking for 1 then 2 BLAS threads:
    the runner pins the worker's threads to the package's CPUs, so the predictions are the same
    to the bit, and exporting after the second run changes no file."""
    results = tmp_path / "results"
    records = []
    for threads in ("1", "2"):
        for name in THREAD_VARIABLES:
            monkeypatch.setenv(name, threads)
        record = run_submission(
            SUBMISSIONS / "sae", SPECS / "demo.yaml", runner="local", database_url=db, quiet=True
        )
        records.append(record)
        exported = CliRunner().invoke(
            app, ["results", "export", "--results", str(results), "--database-url", db]
        )
        assert exported.exit_code == 0, exported.output
        if threads == "1":
            first = record_path(results, record).read_bytes()
    one, two = records
    assert one.created_at != two.created_at  # two runs indeed
    assert one.predictions_hashes == two.predictions_hashes
    assert result_payload(one) == result_payload(two)
    assert "0 written, 1 unchanged (1 with the same result" in " ".join(exported.output.split())
    assert record_path(results, one).read_bytes() == first
