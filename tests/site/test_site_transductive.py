"""Transductive submissions are marked everywhere and ranked apart unless the reader opts in.

Attack: a submission that declares ``transductive: true`` (it used the unlabelled test images)
and scores best. Rule: it never takes rank 1 (nor leads group 1, nor leads the index) among the
inductive submissions; it has its own table, ranks and groups; a "transductive" badge (text, not
colour) marks it on the index, benchmark, submission, comparison and pair pages; a combined
ranking exists only on request (an anchor without the script, a checkbox with it: the browser
half is in tests/site/test_browser.py); results.json carries the flag and every ranking.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.site import build_site
from tests.site.provenance import with_data
from tests.site.test_site import scan
from tests.site_records import make_record

TRANSDUCTIVE = {"class_embedding": "attributes", "transductive": True}


def records() -> list:  # type: ignore[type-arg]
    """t is transductive and right on 10 classes; a and b right on the same 5 (tied), c on none.

    Each gap is 5 classes, so p = 2 * (1 + 1000 * 0.5 ** 10) / 1001 < 0.05: a separate group.
    """
    half = [1.0] * 5 + [0.0] * 5
    return [
        make_record("a", zsl={"top1": 0.5}, class_means={"top1": half}),
        make_record("b", zsl={"top1": 0.5}, class_means={"top1": half}),
        make_record("c", zsl={"top1": 0.0}, class_means={"top1": [0.0] * 10}),
        make_record(
            "t", zsl={"top1": 1.0}, class_means={"top1": [1.0] * 10}, declarations=TRANSDUCTIVE
        ),
        make_record("a", benchmark="awa2", zsl={"top1": 0.3}, benchmark_hash="sha256:" + "9" * 64),
        make_record(
            "t",
            benchmark="awa2",
            zsl={"top1": 0.9},
            benchmark_hash="sha256:" + "9" * 64,
            declarations=TRANSDUCTIVE,
        ),
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("transductive") / "site"
    build_site(with_data(records()), out)
    return out


def texts(site: Path, page: str) -> str:
    return " ".join("".join(scan(site / page).text).split())


def test_the_best_transductive_run_is_not_rank_1_among_inductive_ones(site: Path) -> None:
    bench = scan(site / "benchmarks" / "cub-demo-v1.html")
    # columns: rank, group, submission, top1
    assert [(r[0], r[1], r[2], r[3]) for r in bench.tables["table-zsl"]] == [
        ("1", "1", "a 1.0 model", "50.0"),
        ("1", "1", "b 1.0 model", "50.0"),
        ("3", "2", "c 1.0 model", "0.0"),
    ]
    assert [(r[0], r[1], r[2]) for r in bench.tables["table-zsl-transductive"]] == [
        ("1", "1", "t 1.0 model transductive"),
    ]
    # opted in: one ranking, t first and in a group of its own
    assert [(r[0], r[1], r[2].split()[0]) for r in bench.tables["table-zsl-combined"]] == [
        ("1", "1", "t"),
        ("2", "2", "a"),
        ("2", "2", "b"),
        ("4", "3", "c"),
    ]
    assert bench.row_ids["table-zsl"][0] == "sub-a@1.0"
    assert bench.row_ids["table-zsl-transductive"] == ["sub-t@1.0"]
    assert bench.row_ids["table-zsl-combined"][0] == "sub-t@1.0-all"  # ids stay unique


def test_the_combined_ranking_is_opt_in_without_the_script(site: Path) -> None:
    html = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    page = scan(site / "benchmarks" / "cub-demo-v1.html")
    assert {"combined-zsl", "apart-zsl", "transductive-zsl"} <= page.ids
    assert '<div class="combined-ranking" id="combined-zsl">' in html
    assert 'class="no-js-only" href="#combined-zsl"' in html  # the way in, without the script
    assert 'href="#setting-zsl"> ← Transductive submissions apart' in html
    css = (site / "static" / "style.css").read_text(encoding="utf-8")
    assert "html:not(.js) .combined-ranking:not(:target) { display: none; }" in css
    # with the script: a checkbox that swaps the two views
    assert 'class="combine-toggle" data-combined="combined-zsl" data-apart="apart-zsl"' in html
    js = (site / "static" / "site.js").read_text(encoding="utf-8")
    assert 'querySelectorAll("input.combine-toggle")' in js


def test_without_transductive_runs_there_is_nothing_to_opt_in_to(tmp_path: Path) -> None:
    build_site(records()[:3], tmp_path / "site")
    html = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert "combined-zsl" not in html and "table-zsl-transductive" not in html
    assert "combine-toggle" not in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


def test_the_index_leads_with_inductive_runs(site: Path) -> None:
    index = scan(site / "index.html")
    (cub,) = [r for r in index.tables["table-benchmarks"] if r[0].startswith("CUB-DEMO")]
    leaders = cub[4]
    assert leaders.startswith("ZSL top1 50.0% a 1.0 tied with 1 other")
    assert "ZSL top1 100.0% t 1.0 transductive" in leaders
    # rank matrix (ties share their average rank): inductive runs only by default; t apart;
    # everyone on request
    # (coverage first: "2/2" before "1/2"; b and c cover one benchmark each)
    assert index.tables["table-ranks-zsl"] == [
        ["a 1.0", "1.25", "2/2", "1", "1.5"],
        ["b 1.0", "1.50", "1/2", "—", "1.5"],
        ["c 1.0", "3.00", "1/2", "—", "3"],
    ]
    assert index.tables["table-ranks-zsl-transductive"] == [
        ["t 1.0 transductive", "1.00", "2/2", "1", "1"],
    ]
    assert index.tables["table-ranks-zsl-combined"][0] == [
        "t 1.0 transductive",
        "1.00",
        "2/2",
        "1",
        "1",
    ]
    assert {"ranks-zsl-combined", "ranks-zsl-apart"} <= index.ids


@pytest.mark.parametrize(
    ("page", "shown"),
    [
        ("index.html", "t 1.0 transductive"),  # leaders and rank matrices
        ("benchmarks/cub-demo-v1.html", "t 1.0 model transductive"),
        ("submissions/t@1.0.html", "t 1.0 model transductive"),
        ("compare.html", "t 1.0 transductive"),
        ("compare/a@1.0--t@1.0.html", "vs t 1.0 Firsta 1.0 Secondt 1.0 transductive"),
    ],
)
def test_the_badge_is_on_every_page_that_shows_it(site: Path, page: str, shown: str) -> None:
    parsed = scan(site / page)
    badges = [v for tag, name, v in parsed.attrs if tag == "span" and name == "class"]
    assert "badge badge-info" in badges
    assert shown in texts(site, page)
    if page == "index.html":
        assert parsed.tables["table-submissions"][-1] == [
            "t 1.0",
            "model",
            "A. Author",
            "2",
            "transductive",
        ]


def test_the_picker_says_so_in_words(site: Path) -> None:
    compare = (site / "compare.html").read_text(encoding="utf-8")
    # an <option> holds text only: the mark is words
    assert '<option value="t@1.0">\u2068t\u2069 \u20681.0\u2069 (transductive)</option>' in compare
    assert "t 1.0 transductive" in texts(site, "compare.html")


def test_the_submission_page_ranks_it_among_its_kind(site: Path) -> None:
    page = scan(site / "submissions" / "t@1.0.html")
    (primary,) = [r for r in page.tables["bench-cub-demo-v1"] if r[1] == "top1 ↑ primary"]
    assert primary[4] == "1 of 1 transductive1 of 4 all together"  # two lines
    assert "Transductive: this submission used the unlabelled test images" in texts(
        site, "submissions/t@1.0.html"
    )
    inductive = scan(site / "submissions" / "a@1.0.html")
    (row,) = [r for r in inductive.tables["bench-cub-demo-v1"] if r[1] == "top1 ↑ primary"]
    assert row[4] == "1 of 32 of 4 all together" and row[5] == "1 of 2"


def test_results_json_carries_the_flag_and_every_ranking(site: Path) -> None:
    data = json.loads((site / "results.json").read_text(encoding="utf-8"))
    assert data["format"] == "zsl-leaderboard-results/3"
    (cub,) = [b for b in data["benchmarks"] if b["id"] == "cub-demo"]
    (zsl,) = cub["settings"]
    assert [
        (r["submission"], r["transductive"], r["rank"], r["group"], r["rank_combined"])
        for r in zsl["ranking"]
    ] == [
        ("a", False, 1, 1, 2),
        ("b", False, 1, 1, 2),
        ("c", False, 3, 2, 4),
        ("t", True, 1, 1, 1),
    ]
    assert zsl["groups"] == [["a@1.0", "b@1.0"], ["c@1.0"]]
    assert zsl["transductive_groups"] == [["t@1.0"]]
    assert zsl["combined_groups"][0] == ["t@1.0"]
    assert data["rank_matrices"]["zsl"]["submissions"] == ["a@1.0", "b@1.0", "c@1.0"]
    assert data["rank_matrices_transductive"]["zsl"]["submissions"] == ["t@1.0"]
    assert data["rank_matrices_combined"]["zsl"]["submissions"][0] == "t@1.0"
    flags = {s["slug"]: s["transductive"] for s in data["submissions"]}
    assert flags == {"a@1.0": False, "b@1.0": False, "c@1.0": False, "t@1.0": True}


def test_charts_mark_transductive_runs_in_words(site: Path) -> None:
    html = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert ">[T] \u2068t\u2069 \u20681.0\u2069</text>" in html
    assert "[T]: transductive (used the unlabelled test images" in html


@pytest.mark.parametrize("declared", [True, "yes", "true", 1])
def test_any_yes_counts_and_a_no_does_not(tmp_path: Path, declared: object) -> None:
    runs = [
        make_record("a", zsl={"top1": 0.5}),
        make_record("t", zsl={"top1": 0.9}, declarations={"transductive": declared}),
        make_record("n", zsl={"top1": 0.95}, declarations={"transductive": "no"}),
    ]
    build_site(runs, tmp_path / "site")
    bench = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    assert [r[2].split()[0] for r in bench.tables["table-zsl"]] == ["n", "a"]
    assert [r[2].split()[0] for r in bench.tables["table-zsl-transductive"]] == ["t"]
