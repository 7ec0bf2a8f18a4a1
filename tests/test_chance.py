"""Scores below chance: the chance level by hand, which scores warn, and where the warning shows
(the CI report); what a replacing save says."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from harness.ci.pr import PackageOutcome, render_report
from harness.pipeline import replacement_message
from harness.records import Interval, RunRecord, ScoreEntry
from harness.scoring import BELOW_CHANCE_CAUSE, below_chance, chance_level, n_candidates
from harness.store import ReplacedRun
from tests.store_records import make_record

CAUSE = (
    "columns of the score matrix in another class order than the benchmark's class list "
    "(see `zsl spec describe`), or labels shifted"
)


@pytest.mark.parametrize(
    ("n", "k", "expected"),
    [(20, 1, 0.05), (50, 1, 0.02), (200, 1, 0.005), (50, 5, 0.1), (4, 5, 1.0), (1, 1, 1.0)],
)
def test_chance_level_by_hand(n: int, k: int, expected: float) -> None:
    # A constant ranking puts k of the n classes first: k classes score 1, the rest 0, so the
    # per-class mean is k / n (at most 1).
    assert chance_level(n, k) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "k"), [(0, 1), (5, 0), (-1, 1)])
def test_chance_level_refuses_empty_settings(n: int, k: int) -> None:
    with pytest.raises(ValueError, match=rf"n_candidates={n}, k={k}"):
        chance_level(n, k)


def test_the_cause_is_the_documented_sentence() -> None:
    assert BELOW_CHANCE_CAUSE == CAUSE


def _record(
    top1: float,
    *,
    interval: Interval | None = None,
    gzsl: tuple[float, float, float] = (0.6, 0.4, 0.48),
) -> RunRecord:
    """make_record with the real metric functions: 50 unseen, 150 seen classes."""
    record = make_record(zsl_top1=top1, gzsl=gzsl)
    functions = {
        ("zsl", "top1"): "per_class_top_k_accuracy",
        ("zsl", "top5"): "per_class_top_k_accuracy",
        ("gzsl", "seen"): "gzsl_seen_accuracy",
        ("gzsl", "unseen"): "gzsl_unseen_accuracy",
        ("gzsl", "H"): "gzsl_harmonic_mean",
    }
    scores = []
    for entry in record.scores:
        update: dict[str, object] = {"function": functions[(entry.setting, entry.metric)]}
        if entry.metric == "top5":
            update["details"] = {"k": 5}
        if entry.metric == "top1" and interval is not None:
            update["interval"] = interval
        scores.append(entry.model_copy(update=update))
    return record.model_copy(update={"scores": scores})


def test_candidates_per_setting() -> None:
    bench = make_record().benchmark
    assert (n_candidates(bench, "zsl"), n_candidates(bench, "gzsl")) == (50, 200)
    old = bench.model_copy(update={"n_seen": 0, "n_unseen": 0})  # a record without counts
    assert n_candidates(old, "zsl") is None and n_candidates(old, "gzsl") is None


def test_scores_above_chance_give_no_warning() -> None:
    assert below_chance(_record(0.5)) == []
    # 0.021 > 1/50 for top-1; top-5 (0.321) > 5/50
    assert below_chance(_record(0.021)) == []


def test_top1_below_chance_warns_with_the_cause() -> None:
    assert below_chance(_record(0.018, gzsl=(0.6, 0.004, 0.008))) == [
        f"zsl top1 = 1.8 % is below chance (2.0 % = 1/50 candidate classes); likely cause: {CAUSE}",
        f"gzsl unseen = 0.4 % is below chance (0.5 % = 1/200 candidate classes); likely cause: "
        f"{CAUSE}",
    ]


def test_top_k_is_checked_against_k_over_n() -> None:
    record = _record(0.5)
    top5 = record.scores[1].model_copy(update={"value": 0.08})
    record = record.model_copy(update={"scores": [record.scores[0], top5, *record.scores[2:]]})
    assert below_chance(record) == [
        f"zsl top5 = 8.0 % is below chance (10.0 % = 5/50 candidate classes); likely cause: {CAUSE}"
    ]


def test_the_interval_decides_when_there_is_one() -> None:
    # the value is below chance, but the interval reaches it: no warning
    reaching = Interval(lo=0.005, hi=0.03, scheme="images_within_class", n_boot=1000)
    assert below_chance(_record(0.018, interval=reaching)) == []
    below = Interval(lo=0.012, hi=0.019, scheme="images_within_class", n_boot=1000)
    assert below_chance(_record(0.018, interval=below)) == [
        "zsl top1 = 1.8 % (95 % interval 1.2 % to 1.9 %) is below chance (2.0 % = 1/50 "
        f"candidate classes); likely cause: {CAUSE}"
    ]


def test_unchecked_metrics_and_seen_accuracy_never_warn() -> None:
    record = _record(0.5, gzsl=(0.001, 0.4, 0.002))  # seen accuracy is not checked
    cost = ScoreEntry(
        setting="zsl", metric="hcost", function="hierarchical_cost", version="1", value=0.0
    )
    record = record.model_copy(update={"scores": [*record.scores, cost]})
    assert [w.split(" = ")[0] for w in below_chance(record)] == ["gzsl H"]


def test_ci_report_shows_a_line_per_warning_under_the_package() -> None:
    warning = "eszsl@1.0 on demo v1: zsl top1 = 1.8 % is below chance"
    outcomes = [
        PackageOutcome("submissions/eszsl", "ok", "scored on demo v1", (warning,)),
        PackageOutcome("submissions/sae", "ok", "scored on demo v1"),
    ]
    report = render_report(outcomes, "DIFF")
    lines = report.splitlines()
    row = lines.index("| submissions/eszsl | ✅ ok: scored on demo v1 |")
    assert lines[row + 1] == (
        "| | ⚠️ **warning**: eszsl\\@\u200b1.0 on demo v1: zsl top1 = 1.8 % is below chance |"
    )
    assert lines[row + 2] == "| submissions/sae | ✅ ok: scored on demo v1 |"
    assert "**⚠️ 1 score below chance: see the warnings under the package.**" in lines


def test_replacement_message_names_runner_date_and_scores() -> None:
    record = make_record(zsl_top1=0.25, gzsl=(0.5, 0.1, 0.2)).model_copy(update={"runner": "local"})
    replaced = ReplacedRun(
        key=("cub-demo", 1, "ale", "1.0"),
        runner="sandbox",
        created_at=datetime(2026, 11, 20, 10, 5, 59, tzinfo=UTC),
        primary={"zsl": 0.612, "gzsl": 0.4},
        hidden=False,
        package_hash=record.submission.package_hash,
    )
    assert replacement_message(replaced, record) == (
        "this local run replaces the stored run of ale@1.0 on cub-demo v1 (sandbox runner, "
        "2026-11-20 10:05 UTC; zsl top1 61.2 → 25.0, gzsl H 40.0 → 20.0)"
    )
    hidden = replace(replaced, primary={}, hidden=True)
    assert replacement_message(hidden, record) == (
        "this local run replaces the stored run of ale@1.0 on cub-demo v1 (sandbox runner, "
        "2026-11-20 10:05 UTC); it stays hidden "
        "(`zsl results unhide 'ale@1.0 on cub-demo v1'` shows it)"
    )
