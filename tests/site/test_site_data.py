"""Where a benchmark's data came from, on every page (issue 29, items 1 and 3).

Attack: runs on a synthetic stand-in for a release (or on files nobody checked, on a benchmark
its spec marks experimental, or recorded before the source was kept) that score like real ones.
Rule: every page and table that shows their scores carries the data badge (text, styled apart),
and the tables across benchmarks -- the across page, the index's rank matrices and mean ranks,
the robustness page, results.json's rank matrices -- leave them out unless the reader opts in
(a checkbox that needs no script: the browser half is in tests/site/test_browser.py). Their own
benchmark pages still show them. Also the site details of item 10 that need no browser.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.records import Interval, RawInputs, RunRecord
from harness.results.standing import excluded_why
from harness.site import build_site
from harness.site.figures import setting_figures
from harness.site.model import plan_site
from harness.site.pages.benchmark import column_groups, group_leads
from harness.site.pages.shared import interval_note
from tests.site.provenance import GENERATED, OWN, RELEASE, SYNTHETIC, UNVERIFIED, with_data
from tests.site.test_site import scan
from tests.site.test_site_tables import GZSL_FUNCTIONS, _column
from tests.site_records import make_record

AWA2, CUB = "xlsa17-awa2-ps", "xlsa17-cub-ps"

#: (badge kind, the benchmark's raw inputs, experimental, the badge's text, why left out)
LEFT_OUT = [
    ("synthetic", SYNTHETIC, False, "synthetic data", "synthetic data"),
    ("unverified", UNVERIFIED, False, "unverified source", "unverified source"),
    ("unrecorded", None, False, "source not recorded", "source not recorded"),
    ("experimental", OWN, True, "experimental", "experimental"),
]


def _family(benchmark: str, scores: dict[str, tuple[float, float]]) -> list[RunRecord]:
    """Runs on the two validation variants of ``benchmark`` (a family: the robustness page)."""
    digest = "1" if benchmark == AWA2 else "2"
    return [
        make_record(
            name,
            benchmark=benchmark + suffix,
            benchmark_hash="sha256:" + (digest + str(i)) * 32,
            zsl={"top1": values[i]},
            functions={"top1": "per_class_top_k_accuracy"},
            interval=0.01,
            family=benchmark,
            family_member=f"val{i + 1}",
        )
        for name, values in scores.items()
        for i, suffix in enumerate(("", "-val2"))
    ]


def records(raw: RawInputs | None, experimental: bool) -> list[RunRecord]:
    """a and b on AWA2 (a verified release) and on CUB (``raw``); c on CUB only, best there."""
    counted = _family(AWA2, {"a": (0.6, 0.62), "b": (0.5, 0.52)})
    other = _family(CUB, {"a": (0.4, 0.42), "b": (0.3, 0.32), "c": (0.9, 0.92)})
    return [
        *with_data(counted, RELEASE),
        *with_data(other, raw, experimental=experimental),
    ]


@pytest.fixture(scope="module", params=LEFT_OUT, ids=[kind[0] for kind in LEFT_OUT])
def left_out(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, str, str]:
    """A site whose CUB family is of ``kind``: (site, badge kind, badge text, why)."""
    kind, raw, experimental, text, why = request.param
    site = tmp_path_factory.mktemp(kind) / "site"
    build_site(records(raw, experimental), site)
    return site, kind, text, why


def _html(site: Path, page: str) -> str:
    return (site / page).read_text(encoding="utf-8")


def _badge(kind: str, text: str) -> str:
    return f'<span class="badge badge-data-{kind}" title="'


def test_the_model_leaves_them_out_and_says_why(left_out: tuple[Path, str, str, str]) -> None:
    _, kind, _, why = left_out
    raw, experimental = next((r, e) for k, r, e, _, _ in LEFT_OUT if k == kind)
    model = plan_site(records(raw, experimental))
    cub = next(b for b in model.benchmarks if b.id == CUB)
    assert cub.uncounted == {"a@1.0", "b@1.0", "c@1.0"}
    assert [b.text for b in cub.uncounted_badges] == [why]
    assert [(i.bench.id, i.why, i.keys) for i in model.left_out] == [
        (CUB, f"{CUB} v1: {why}", ("a@1.0", "b@1.0", "c@1.0")),
        (CUB + "-val2", f"{CUB}-val2 v1: {why}", ("a@1.0", "b@1.0", "c@1.0")),
    ]
    assert model.left_out[0].why == excluded_why(cub.latest.benchmark)  # standing's words
    counted = model.ranks.inductive["zsl"]
    assert counted["benchmarks"] == [f"{AWA2} v1", f"{AWA2}-val2 v1"]
    assert counted["submissions"] == ["a@1.0", "b@1.0"]  # c ran on CUB only
    assert model.ranks_with_uncounted is not None
    everyone = model.ranks_with_uncounted.inductive["zsl"]
    assert len(everyone["benchmarks"]) == 4 and "c@1.0" in everyone["submissions"]


def test_index_badges_and_rank_matrices(left_out: tuple[Path, str, str, str]) -> None:
    site, kind, text, why = left_out
    html = _html(site, "index.html")
    assert html.count(_badge(kind, text)) >= 2  # each CUB benchmark row, and opted-in headers
    index = scan(site / "index.html")
    assert [h.split()[0] for h in index.headers["table-ranks-zsl"][3:]] == [AWA2, AWA2 + "-val2"]
    assert [r[0] for r in index.tables["table-ranks-zsl"]] == ["a 1.0", "b 1.0"]
    opted = index.headers["table-ranks-zsl-with-uncounted"][3:]
    assert len(opted) == 4 and any(h.startswith(CUB) and text in h for h in opted), opted
    assert "c 1.0" in [r[0] for r in index.tables["table-ranks-zsl-with-uncounted"]]
    # the reader is told how many runs are left out, of which benchmarks, and why
    notice = "".join(index.text)
    assert "6 runs on 2 benchmarks left out of the rank matrices by default" in notice
    assert f"{CUB} v1: {why}, 3 runs" in notice
    assert '<input type="checkbox" class="uncounted-toggle" id="include-uncounted-ranks">' in html
    with (site / "index-benchmarks.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["benchmark"]: row for row in csv.DictReader(handle)}
    assert (rows[CUB]["data"], rows[CUB]["submissions_counted"]) == (
        why if kind != "experimental" else "own data; experimental",
        "0",
    )
    assert (rows[AWA2]["data"], rows[AWA2]["submissions_counted"]) == ("verified release", "2")


def test_across_page_leaves_them_out_until_opted_in(left_out: tuple[Path, str, str, str]) -> None:
    site, kind, text, _ = left_out
    across = scan(site / "across.html")
    groups = [h.split()[0] for h in across.headers["table-cross-zsl-xlsa17"][3:]]
    assert groups == ["PS", "PS"]  # AWA2's two variants: CUB's are left out
    assert [r[0] for r in across.tables["table-cross-zsl-xlsa17"]] == ["a 1.0", "b 1.0"]
    assert len(across.headers["table-cross-zsl-xlsa17-with-uncounted"][3:]) == 4
    html = _html(site, "across.html")
    assert _badge(kind, text) in html and 'class="num uncounted"' in html
    with (site / "cross-zsl-xlsa17-with-uncounted.csv").open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    counted = [i for i, h in enumerate(rows[0]) if h.endswith("_counted")]
    c_row = next(r for r in rows if r[0] == "c")
    assert sorted(c_row[i] for i in counted) == ["", "", "false", "false"]


def test_robustness_page_leaves_them_out_until_opted_in(
    left_out: tuple[Path, str, str, str],
) -> None:
    site, kind, text, _ = left_out
    page = scan(site / "robustness.html")
    assert [r[0] for r in page.tables["table-robustness-zsl"]] == ["a 1.0", "b 1.0"]
    assert len(page.tables["table-robustness-zsl"][0]) == 1 + 6  # one family: 2 members + 4
    opted = page.tables["table-robustness-zsl-with-uncounted"]
    assert {r[0] for r in opted} == {"a 1.0", "b 1.0", "c 1.0"} and len(opted[0]) == 1 + 12
    assert [r[0] for r in page.tables["table-rank-counts-zsl"]] == ["a 1.0", "b 1.0"]
    assert "c 1.0" in {r[0] for r in page.tables["table-rank-counts-zsl-with-uncounted"]}
    html = _html(site, "robustness.html")
    assert _badge(kind, text) in html and "left out</strong> of these tables" in html


def test_its_own_pages_show_them_with_the_badge(left_out: tuple[Path, str, str, str]) -> None:
    site, kind, text, why = left_out
    bench = _html(site, f"benchmarks/{CUB}-v1.html")
    assert "<h1>" in bench and _badge(kind, text) in bench.split("</h1>")[0]
    assert "All 3 runs on this page are left out of the tables across benchmarks" in bench
    assert ("data-notice data-synthetic" in bench) == (kind == "synthetic")
    table = scan(site / "benchmarks" / f"{CUB}-v1.html").tables["table-zsl"]
    assert [r[2].split()[0] for r in table] == ["c", "a", "b"]  # every run, ranked
    with (site / "benchmarks" / f"{CUB}-v1-zsl.csv").open(encoding="utf-8") as handle:
        data = list(csv.DictReader(handle))
    assert {r["counted_across_benchmarks"] for r in data} == {"false"}
    sub = _html(site, "submissions/c@1.0.html")
    section = sub.split(f'id="bench-{CUB}-v1"')[1].split("</h2>")[0]
    assert _badge(kind, text) in section
    assert f"Left out of the tables across benchmarks by default: <bdi>{CUB} v1: {why}" in sub
    assert _badge(kind, text) in sub.split("</h1>")[0]  # the submission's heading says it too
    with (site / "submissions" / "a@1.0.csv").open(encoding="utf-8") as handle:
        flags = {r["benchmark"]: r["counted_across_benchmarks"] for r in csv.DictReader(handle)}
    assert flags == {AWA2: "true", AWA2 + "-val2": "true", CUB: "false", CUB + "-val2": "false"}
    pair = _html(site, "compare/a@1.0--c@1.0.html")
    heading = pair.split(f'id="bench-{CUB}-v1"')[1].split("</h2>")[0]
    assert _badge(kind, text) in heading


def test_results_json_says_where_the_data_came_from(left_out: tuple[Path, str, str, str]) -> None:
    site, kind, text, why = left_out
    data = json.loads(_html(site, "results.json"))
    cub = next(b for b in data["benchmarks"] if b["id"] == CUB)
    assert cub["data"]["counted"] is False
    assert text in [b["label"] for b in cub["data"]["badges"]]
    assert {r["counted"] for s in cub["settings"] for r in s["ranking"]} == {False}
    assert {tuple(r["data"]) for s in cub["settings"] for r in s["ranking"]} == {
        ("own data", "experimental") if kind == "experimental" else (text,)
    }
    assert data["left_out"][0]["why"] == f"{CUB} v1: {why}"
    assert data["rank_matrices"]["zsl"]["submissions"] == ["a@1.0", "b@1.0"]
    assert "c@1.0" in data["with_uncounted"]["rank_matrices"]["zsl"]["submissions"]
    awa2 = next(b for b in data["benchmarks"] if b["id"] == AWA2)
    assert awa2["data"]["counted"] is True


@pytest.mark.parametrize(
    "raw", [RELEASE, GENERATED, OWN], ids=["verified release", "generated", "own"]
)
def test_counted_data_has_nothing_to_opt_in_to(tmp_path: Path, raw: RawInputs) -> None:
    site = tmp_path / "site"
    build_site(records(raw, False), site)
    for page in ("index.html", "across.html", "robustness.html"):
        assert "uncounted-toggle" not in _html(site, page), page
    assert not list(site.glob("*-with-uncounted.csv"))
    assert "c@1.0" in json.loads(_html(site, "results.json"))["rank_matrices"]["zsl"]["submissions"]
    assert "data-notice" not in _html(site, f"benchmarks/{CUB}-v1.html")


def test_a_benchmark_of_mixed_runs_badges_each_row_and_offers_a_filter(tmp_path: Path) -> None:
    # runs recorded before the source was kept beside newer ones: each row says its data
    old = with_data([make_record("a", zsl={"top1": 0.5})], None)
    new = with_data([make_record("b", zsl={"top1": 0.6}, minutes=5)], RELEASE)
    model = plan_site([*old, *new])
    assert model.benchmarks[0].uncounted == {"a@1.0"}
    build_site([*old, *new], tmp_path / "site")
    html = _html(tmp_path / "site", "benchmarks/cub-demo-v1.html")
    rows = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").tables["table-zsl"]
    assert [r[2] for r in rows] == [
        "b 1.0 model verified release",
        "a 1.0 model source not recorded",
    ]
    assert 'value="uncounted"> hide data not counted across benchmarks' in html
    assert "1 of the 2 runs on this page is left out" in html


# -- item 10: details ---------------------------------------------------------------------------


def test_across_marks_best_only_on_the_primary_never_a_seen_only_baseline(tmp_path: Path) -> None:
    def run(name: str, u: float, s: float, h: float) -> RunRecord:
        return make_record(
            name,
            benchmark=AWA2,
            gzsl={"u": u, "s": s, "H": h},
            functions=GZSL_FUNCTIONS,
            primary={"gzsl": "H"},
        )

    # a seen-only baseline: every seen image right, no unseen one
    runs = with_data([run("seen-only", 0.0, 1.0, 0.0), run("ale", 0.3, 0.7, 0.42)])
    build_site(runs, tmp_path / "site")
    across = scan(tmp_path / "site" / "across.html")
    assert across.tables["table-cross-gzsl-xlsa17"][1] == [
        "seen-only 1.0",
        "1/1",
        "2.00",
        "0.0",
        "100.0",
        "0.0",
    ]
    html = _html(tmp_path / "site", "across.html")
    assert html.count('class="num best"') == 1  # H of ale; not the baseline's s = 100
    assert '<td class="num best" data-sort="0.42"' in html
    assert "GZSL u and s are never marked" in html


def test_an_unchecked_group_keeps_its_lead_column() -> None:
    functions = [
        "per_class_top_k_accuracy",
        "hierarchical_precision_at_k",
        "hierarchical_cost",
        "mistake_severity",
        "hierarchical_precision_at_k",
        "darts_area",
        "darts_reward",
        "per_class_top_k_accuracy",
    ]
    columns = [_column(f, primary=i == 7) for i, f in enumerate(functions)]
    # the primary leads its group wherever it stands; else a group's first column leads
    assert group_leads(columns) == [False, True, False, False, False, True, False, True]
    header, chooser = column_groups(columns)
    hidden = {g.id: (g.span, g.lead, g.shown) for g in chooser}
    assert hidden["hierarchical"] == (4, "hierarchical_precision_at_k", False)
    assert [(g.id, g.span, g.leads) for g in header] == [
        ("flat", 1, 0),  # the run of flat columns without the lead: hidden when unchecked
        ("hierarchical", 4, 1),
        ("darts", 2, 1),
        ("flat", 1, 1),
    ]


@pytest.mark.parametrize(
    ("schemes", "start"),
    [
        (
            ["images_within_class"],
            "Intervals: 95% bootstrap over the test images, resampled within each class",
        ),
        (["classes"], "Intervals: 95% bootstrap over the classes"),
        (
            ["classes", "images_within_class"],
            "Intervals: 95% bootstrap over the classes or the test images",
        ),
        ([], "No intervals in these records"),
    ],
)
def test_the_interval_note_names_what_is_resampled(schemes: list[str], start: str) -> None:
    column = _column("per_class_top_k_accuracy")
    for i, scheme in enumerate(schemes):
        entry = make_record(f"r{i}", zsl={"top1": 0.5}, interval=0.1).scores[0]
        assert entry.interval is not None
        interval = Interval(**{**entry.interval.model_dump(), "scheme": scheme})
        column.entries[f"r{i}"] = entry.model_copy(update={"interval": interval})
    note = interval_note([column], groups=True)
    assert note.startswith(start) and "groups: a paired bootstrap over the classes" in note
    assert "benchmark pages' group" in interval_note([column], groups=False)


def test_relation_chart_drops_empty_parts_and_never_calls_a_sibling_unrelated() -> None:
    def run(name: str, shares: dict[str, float]) -> RunRecord:
        record = make_record(
            name,
            zsl={"semantic": shares["correct"]},
            functions={"semantic": "prediction_relation_share"},
            primary={"zsl": "semantic"},
        )
        entry = record.scores[0].model_copy(update={"details": shares})
        return record.model_copy(update={"scores": [entry]})

    leaves = {"correct": 0.8, "ancestor": 0.0, "descendant": 0.0, "unrelated": 0.2}
    model = plan_site([run("a", leaves), run("b", {**leaves, "correct": 0.6, "unrelated": 0.4})])
    plan = model.benchmarks[0].settings[0]
    (chart,) = [f for f in setting_figures(model.benchmarks[0], plan, str) if "relations" in f.id]
    svg = str(chart.svg)
    assert "other class (sibling or farther)" in svg and ">unrelated<" not in svg
    assert ">ancestor<" not in svg and ">descendant<" not in svg  # no run has one: not drawn
    assert "No run predicted an ancestor or a descendant of the true class" in str(chart.caption)
    with_ancestors = {**leaves, "ancestor": 0.1, "unrelated": 0.1}
    model = plan_site([run("a", with_ancestors), run("b", leaves)])
    plan = model.benchmarks[0].settings[0]
    (chart,) = [f for f in setting_figures(model.benchmarks[0], plan, str) if "relations" in f.id]
    assert ">ancestor<" in str(chart.svg) and ">descendant<" not in str(chart.svg)
    assert "No run predicted a descendant of the true class" in str(chart.caption)


def test_relation_chart_draws_siblings_apart_from_v2_and_v1_records_as_before() -> None:
    # prediction_relation_share v2 records have a "sibling" share; v1 ones (above) do not.
    def run(name: str, shares: dict[str, float], version: str) -> RunRecord:
        record = make_record(
            name,
            zsl={"semantic": shares["correct"]},
            functions={"semantic": "prediction_relation_share"},
            primary={"zsl": "semantic"},
            metric_versions={"semantic": version},
        )
        entry = record.scores[0].model_copy(update={"details": shares})
        return record.model_copy(update={"scores": [entry]})

    def chart(*runs: RunRecord) -> tuple[str, str]:
        model = plan_site(list(runs))
        plan = model.benchmarks[0].settings[0]
        (found,) = [f for f in setting_figures(model.benchmarks[0], plan, str) if "rel" in f.id]
        return str(found.svg), str(found.caption)

    v2 = {"correct": 0.6, "ancestor": 0.0, "descendant": 0.0, "sibling": 0.3, "unrelated": 0.1}
    old = {"correct": 0.5, "ancestor": 0.0, "descendant": 0.0, "unrelated": 0.5}
    # The newest version's column is drawn; the v1 run stays in its own column (not drawn).
    b = {**v2, "sibling": 0.0, "unrelated": 0.4}
    svg, caption = chart(run("a", v2, "2"), run("b", b, "2"), run("c", old, "1"))
    assert ">sibling<" in svg and ">unrelated (farther than a sibling)<" in svg
    assert "· sibling: 30.0%" in svg and "· unrelated (farther than a sibling): 40.0%" in svg
    assert "sibling or farther" not in svg and "50.0%" not in svg  # c's shares are not drawn
    assert "a sibling (sharing a parent with it), or unrelated (farther away" in caption
    assert "No run predicted an ancestor or a descendant of the true class" in caption
    assert "v<bdi>2</bdi>" in caption
    # No run predicted a sibling: its part is left out and named; "unrelated" stays at 0.
    svg, caption = chart(run("a", {**v2, "sibling": 0.0, "unrelated": 0.0, "correct": 1.0}, "2"))
    assert ">sibling<" not in svg and ">unrelated (farther than a sibling)<" in svg
    assert "No run predicted an ancestor or a descendant or a sibling of the true" in caption
    # Only v1 records: their "unrelated" holds the siblings, and the chart says so.
    svg, caption = chart(run("c", old, "1"))
    assert ">other class (sibling or farther)<" in svg and ">sibling<" not in svg
    assert "this version of the metric does not tell them apart" in caption


def test_when_every_run_is_left_out_each_view_says_so(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(with_data(records(RELEASE, False), SYNTHETIC), site)
    assert "No primary scores of runs counted by default to rank." in _html(site, "index.html")
    across = _html(site, "across.html")
    assert "No scores to compare across benchmarks among the runs counted by default." in across
    robustness = _html(site, "robustness.html")
    assert "No scores on the families' members among the runs counted by default." in robustness
    # opted in, everything is there
    assert "table-robustness-zsl-with-uncounted" in robustness
    assert "table-cross-zsl-xlsa17-with-uncounted" in across
