"""The run record shows the time of each fit and the run's peak memory (issue 15).

The worker times each fit (``fit_validation``, ``fit_main``), each setting's prediction pass and
each inductive check, and measures the peak resident memory of itself and its model processes;
the pipeline puts them, checked, into the record's typed ``timings`` (metadata, not results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.errors import RunnerError
from harness.pipeline import run_submission
from harness.records import RUN_METADATA_FIELDS, result_payload
from harness.results.records_io import dump_record, load_record
from harness.runners.outputs import worker_timings
from tests.conftest import SPECS, SUBMISSIONS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_real_run_records_each_fit_and_the_peak_memory() -> None:
    record = run_submission(SUBMISSIONS / "eszsl", SPECS / "demo.yaml", store=False, quiet=True)
    timings = record.timings
    # The demo's metrics need validation predictions: two fits, each timed by the worker.
    for step in ("fit_validation", "fit_main", "predict_zsl", "predict_zsl_val", "check_main"):
        assert step in timings, sorted(timings)
        assert 0 < timings[step] < timings["run"], (step, timings)
    assert timings["fit_main"] + timings["fit_validation"] < timings["run"]
    # The harness's own steps are still there.
    assert {"prepare", "validate", "run", "score"} <= set(timings)
    # A Python process with numpy holds tens of MiB; the demo is far below 2 GiB.
    assert 20 < timings["peak_rss_mib"] < 2048, timings["peak_rss_mib"]
    # Typed in timings now, no longer a JSON string among the logs.
    assert "worker_timings" not in record.logs
    # Metadata: two runs differing only in timings hold the same result.
    assert "timings" in RUN_METADATA_FIELDS
    slower = record.model_copy(update={"timings": {**timings, "fit_main": 1e6}})
    assert result_payload(slower) == result_payload(record)


def test_records_stored_before_fit_timings_still_load() -> None:
    """A record file as the harness wrote it before 08c5d97: the four harness steps in
    ``timings``, the worker's timings as a JSON string among the logs."""
    path = ROOT / "leaderboard/results/demo/v1/sae@1.0.json"
    current = load_record(path.read_text(), str(path))
    old_timings = {k: current.timings[k] for k in ("prepare", "validate", "run", "score")}
    worker = {k: v for k, v in current.timings.items() if k not in old_timings}
    old_logs = {**current.logs, "worker_timings": json.dumps(worker, sort_keys=True)}
    text = dump_record(current.model_copy(update={"timings": old_timings, "logs": old_logs}))
    record = load_record(text, "old record")
    assert set(record.timings) == {"prepare", "validate", "run", "score"}
    assert json.loads(record.logs["worker_timings"])["fit_main"] == current.timings["fit_main"]
    assert result_payload(record) == result_payload(current)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            {"timings": {"fit_main": "fast"}},
            "out/worker.json: timings['fit_main'] must be a number, not str",
        ),
        (
            {"timings": {"fit_main": -1.0}},
            "out/worker.json: timings['fit_main'] must be a finite number >= 0, not -1.0",
        ),
        (
            {"timings": {"<script>": 1.0}},
            "out/worker.json: 'timings' names an unknown step '<script>'",
        ),
        ({"timings": [1.0]}, "out/worker.json: 'timings' must be an object of at most 200 steps"),
        (
            {"timings": {}, "peak_rss_mib": float("inf")},
            "out/worker.json: 'peak_rss_mib' must be a finite number >= 0, not inf",
        ),
        (
            {"timings": {}, "peak_rss_mib": True},
            "out/worker.json: 'peak_rss_mib' must be a number, not bool",
        ),
    ],
)
def test_worker_timings_are_read_without_trust(status: dict[str, object], message: str) -> None:
    # worker.json lies in a folder model code could write during the run.
    with pytest.raises(RunnerError) as err:
        worker_timings(status, Path("out"))
    assert str(err.value) == message


def test_worker_timings_keep_steps_and_memory() -> None:
    status = {"timings": {"fit_main": 1.23456789, "predict_zsl": 0.5}, "peak_rss_mib": 812.4}
    assert worker_timings(status, Path("out")) == {
        "fit_main": 1.2346,
        "predict_zsl": 0.5,
        "peak_rss_mib": 812.4,
    }
