"""Re-running the demo reproduces the committed records: the guard of every refactor.

``leaderboard/results/demo`` holds the records `zsl demo` made. A change that claims to leave
behaviour alone (issue 12's refactor, say) must leave them alone too: this test runs every
shipped submission on the demo benchmark again, through the same CLI command, and compares each
new record with the committed one field by field, as ``zsl results diff`` does
(:func:`harness.results.reproduction.compare_reproduction`). Only what describes *when and
where* a run happened may differ (time stamps, durations, the machine, log paths, and the record
id, which hashes the time stamp); package and benchmark hashes, the leakage audit, metric names
and versions and the harness version must be identical, and so must every score, interval and
per-class value, except that a floating-point number under ``scores`` may move by the
reproduction tolerance (with the prediction and fitted-state hashes then): torch picks its CPU kernels by
instruction set, so the torch methods (ALE, DeViSE, SJE) train to results ~1e-6 apart on two
of this project's machines (measured 2026-11-28: DARTS lambda 0.1329011 vs 0.1328987), while
the numpy methods came out bit-identical on both.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.records import result_payload
from harness.results.records_io import read_records
from harness.results.reproduction import compare_reproduction
from harness.store import load_runs, open_store
from tests.conftest import REPO, DemoRun, needs_bwrap

COMMITTED = REPO / "leaderboard" / "results" / "demo"


def _first_difference(old: Any, new: Any, where: str = "") -> str:
    """The path of the first place two JSON values differ (for a message a reader can act on)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return _first_difference(old.get(key), new.get(key), f"{where}.{key}")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
    return f"{where or '.'}: committed {json.dumps(old)[:200]} != re-run {json.dumps(new)[:200]}"


@pytest.mark.slow
@needs_bwrap
def test_rerunning_the_demo_reproduces_the_committed_records(demo_run: DemoRun) -> None:
    committed = {r.submission.name: r for r in read_records(COMMITTED)}
    assert len(committed) >= 10  # every shipped submission has a committed record
    # The session's one `zsl demo` over a copy of the shipped submissions (tests/conftest.py).
    assert demo_run.exit_code == 0, demo_run.output
    db = demo_run.database_url
    rerun = {r.submission.name: r for r in load_runs(open_store(db))}
    assert sorted(rerun) == sorted(committed)
    report = compare_reproduction(committed.values(), rerun.values())
    assert not report.not_rerun and not report.not_committed, report
    beyond = [
        d.describe(f"{key[2]}@{key[3]}")
        for key, found in report.beyond.items()
        for d in found
        if not d.within_tolerance
    ]
    assert report.ok, "\n".join(beyond[:20])
    # The tolerance is for floating point only: with it, the results are still the same ones.
    for name, record in rerun.items():
        old, new = result_payload(committed[name]), result_payload(record)
        for payload in (old, new):
            payload.pop("scores"), payload.pop("predictions_hashes"), payload.pop("model_state")
        assert new == old, f"{name}: {_first_difference(old, new)}"


def test_the_comparison_names_the_first_difference() -> None:
    old = {"scores": [{"metric": "top1", "value": 0.5}], "runner": "sandbox"}
    new = {"scores": [{"metric": "top1", "value": 0.25}], "runner": "sandbox"}
    assert _first_difference(old, new) == ".scores[0].value: committed 0.5 != re-run 0.25"
    assert _first_difference({"a": 1}, {"a": 1, "b": 2}) == ".b: committed null != re-run 2"
