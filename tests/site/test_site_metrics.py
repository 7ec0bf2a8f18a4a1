"""What the site says about each metric: averaging units in the headers, and DARTS rewards with
the test accuracy they reached beside them (table, submission and pair pages, chart).

The records are scored for real: the registered metrics run on the seeded inputs of
``tests/metrics/test_common.py`` through the scorer (:func:`harness.scoring.score_setting`), and
every expectation is derived from the resulting score details, never typed in.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness.metrics import metrics
from harness.records import RunRecord, ScoreEntry
from harness.scoring import score_setting
from harness.site import build_site
from harness.site.model import plan_site
from harness.site.pages.columns import column_title, darts_reached
from harness.spec import MetricSpec, Uncertainty
from tests.html_elements import Elements
from tests.metrics.test_common import make_input, replace
from tests.site_records import make_record

#: The spec entries every test run is scored with (ZSL), keys as in specs/demo.yaml.
ENTRIES = [
    MetricSpec(name="per_class_top_k_accuracy", key="top1", k=1),
    MetricSpec(name="hierarchical_precision_at_k", key="hp@2", k=2),
    MetricSpec(name="per_class_hierarchical_precision_at_k", key="class-hp@2", k=2),
    MetricSpec(name="hierarchical_cost", key="hcost"),
    MetricSpec(name="darts_area", key="darts", posterior="as_is"),
    MetricSpec(name="darts_reward", key="darts@val90", target=0.9, posterior="as_is"),
]


def _posteriors(rng: np.random.Generator, y: np.ndarray, c: int, sharp: float) -> np.ndarray:
    """Dirichlet rows with ``sharp`` extra mass on the true column, normalised."""
    rows = rng.dirichlet(np.ones(c), size=len(y))
    rows[np.arange(len(y)), y] += sharp
    return rows / rows.sum(axis=1, keepdims=True)


def _scored(name: str, seed: int, test_sharp: float) -> RunRecord:
    """A record of ``name`` whose ZSL scores come from the real scorer: validation posteriors
    informative enough for lambda to meet a 90% target there, test posteriors as informative
    (the target holds on test too) or less (the same lambda falls short on test)."""
    rng = np.random.default_rng(seed)
    data = make_input("zsl", seed=0)  # one benchmark: the same test and validation images
    val = data.validation
    assert val is not None
    val_scores = _posteriors(rng, val.y_true, len(val.candidates), 0.5)
    test_scores = _posteriors(rng, data.y_true, len(data.candidates), test_sharp)
    data = replace(data, scores=test_scores, validation=replace(val, scores=val_scores))
    scores = score_setting("zsl", [data], ENTRIES, Uncertainty(n_boot=20))
    record = make_record(name, zsl={}, primary={"zsl": "top1"}, minutes=seed)
    return record.model_copy(update={"scores": scores})


@pytest.fixture(scope="module")
def records() -> list[RunRecord]:
    # Some runs reach the target on test, others fall short of it (checked below).
    return [
        _scored(name, seed, sharp)
        for name, seed, sharp in (
            ("alpha", 0, 0.3),
            ("beta", 1, 0.1),
            ("gamma", 2, 0.1),
            ("delta", 3, 0.2),
            ("epsilon", 4, 0.3),
        )
    ]


@pytest.fixture(scope="module")
def site(records: list[RunRecord], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(records, out)
    return out


def elements(path: Path) -> Elements:
    parser = Elements()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _pct(value: float) -> str:
    """The page's percentage format, written out here independently."""
    text = f"{100 * value:.1f}"
    return (text[:-2] if text.endswith(".0") else text) + "%"


def _reward(record: RunRecord) -> ScoreEntry:
    return next(e for e in record.scores if e.function == "darts_reward")


# -- averaging units ------------------------------------------------------------------------------


def test_every_score_header_names_its_averaging_unit(site: Path, records: list[RunRecord]) -> None:
    page = elements(site / "benchmarks" / "cub-demo-v1.html")
    headers = [a for a, _ in page.select("th", "num") if a.get("data-sort-type") == "num"]
    functions = [e.function for e in records[0].scores]
    assert len(headers) == len(functions)  # one score column per metric of the spec
    for attrs, function in zip(headers, functions, strict=True):
        metric = metrics.get(function)
        unit = "test images" if metric.averaged_over == "images" else "classes with test images"
        assert f"mean over {unit}" in attrs["title"], (function, attrs["title"])
        assert metric.averaging in attrs["title"]
    # hp@k comes in both units, and the headers tell them apart.
    titles = {f: a["title"] for a, f in zip(headers, functions, strict=True)}
    assert "mean over test images" in titles["hierarchical_precision_at_k"]
    assert "mean over classes" in titles["per_class_hierarchical_precision_at_k"]
    # The method section explains the two units.
    text = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert "<strong>Averaging.</strong>" in text


def test_per_class_hp_column_differs_from_the_per_image_one(records: list[RunRecord]) -> None:
    # Real values on class-imbalanced inputs: the two averages are different numbers.
    for record in records:
        by_key = {e.metric: e.value for e in record.scores}
        assert by_key["class-hp@2"] != pytest.approx(by_key["hp@2"], abs=1e-9)


def test_unregistered_metric_header_says_its_unit_is_unknown() -> None:
    record = make_record("a", zsl={"top1": 0.5})
    column = plan_site([record]).benchmarks[0].settings[0].columns[0]
    assert column.function == "top1_score"  # not a registered metric
    assert "averaging unit unknown" in column_title(column)


# -- DARTS rewards: the accuracy reached on test --------------------------------------------------


def test_records_hold_runs_above_and_below_the_validation_target(
    records: list[RunRecord],
) -> None:
    reached = [_reward(r).details for r in records]
    assert all(d["target_on"] == "validation" and d["val_lower_bound"] >= 0.9 for d in reached)
    assert {d["test_reaches_target"] for d in reached} == {True, False}
    for details in reached:
        assert details["test_reaches_target"] is (details["test_accuracy"] >= details["target"])


def test_every_darts_reward_cell_shows_the_test_accuracy_reached(
    site: Path, records: list[RunRecord]
) -> None:
    page = elements(site / "benchmarks" / "cub-demo-v1.html")
    notes = page.select("span", "reached")
    assert len(notes) == len(records)  # one per reward, none for the other metrics
    expected = sorted(
        (
            f"test acc {_pct(d['test_accuracy'])} < {_pct(d['target'])} val target"
            if d["test_accuracy"] < d["target"]
            else f"test acc {_pct(d['test_accuracy'])}, val target {_pct(d['target'])}"
        )
        for d in (_reward(r).details for r in records)
    )
    assert sorted(text for _, text in notes) == expected
    below = [attrs for attrs, _ in notes if "below" in attrs["class"].split()]
    assert len(below) == sum(not _reward(r).details["test_reaches_target"] for r in records)
    for attrs, text in notes:
        assert "validation classes" in attrs["title"] and "test images" in attrs["title"]
        accuracy = re.search(r"test acc ([\d.]+%)", text)
        assert accuracy is not None and f"reached {accuracy.group(1)} accuracy" in attrs["title"]


def test_darts_reward_header_and_method_say_what_is_guaranteed(site: Path) -> None:
    page = elements(site / "benchmarks" / "cub-demo-v1.html")
    header = next(a for a, text in page.select("th", "num") if "darts@val90" in text)
    assert (
        "validation classes reach 90% accuracy; not guaranteed on the test classes"
        in header["title"]
    )
    text = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert "<strong>DARTS reward.</strong>" in text
    assert "the target is met on validation by construction" in text
    assert "where the target is <em>not</em> guaranteed" in text


def test_darts_chart_rings_the_reward_points_at_the_validation_target(
    site: Path, records: list[RunRecord]
) -> None:
    page = elements(site / "benchmarks" / "cub-demo-v1.html")
    figure = next(a for a, _ in page.select("figure") if a.get("id") == "fig-zsl-darts")
    assert figure is not None
    rings = page.select("circle", "highlight")
    assert len(rings) == len(records)
    tips = sorted(text for _, text in rings)
    for record in records:
        details = _reward(record).details
        wanted = f"test accuracy {_pct(details['test_accuracy'])}"
        assert any(wanted in tip for tip in tips), wanted
    assert sum("(below the target)" in tip for tip in tips) == sum(
        not _reward(r).details["test_reaches_target"] for r in records
    )
    rules = page.select("g", "rule")
    assert [text for _, text in rules] == ["val target 90% (90%)val target 90%"]
    caption = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert "which the target does not guarantee" in caption


def test_submission_and_pair_pages_show_the_reached_accuracy(
    site: Path, records: list[RunRecord]
) -> None:
    short = next(r for r in records if not _reward(r).details["test_reaches_target"])
    details = _reward(short).details
    note = f"test acc {_pct(details['test_accuracy'])} < 90% val target"
    sub = elements(site / "submissions" / f"{short.submission.name}@1.0.html")
    assert [text for _, text in sub.select("span", "reached")] == [note]
    # Every pair page shows both runs' rewards, each with its test accuracy.
    pairs = sorted((site / "compare").glob("*.html"))
    assert len(pairs) == len(records) * (len(records) - 1) // 2
    texts = [t for p in pairs for _, t in elements(p).select("span", "reached")]
    assert len(texts) == 2 * len(pairs)
    assert texts.count(note) == len(records) - 1  # it meets every other run once


def test_old_reward_records_without_the_details_show_no_note() -> None:
    record = make_record("a", zsl={"top1": 0.5})
    entry = ScoreEntry(
        setting="zsl", metric="darts@90", function="darts_reward", version="1", value=0.4
    )
    assert darts_reached(entry) is None
    bad = entry.model_copy(update={"details": {"target": 0.9, "test_accuracy": "high"}})
    assert darts_reached(bad) is None
    record = record.model_copy(update={"scores": [*record.scores, entry]})
    column = plan_site([record]).benchmarks[0].settings[0].columns[1]
    assert "not guaranteed on the test classes" in column_title(column)
