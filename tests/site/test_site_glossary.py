"""The glossary and readable charts (issue 14, items 4 and 5).

Every registered metric has a glossary entry read from its registration; every header link of
every built page resolves to an element of glossary.html; the hp@k curve is drawn at k in
{1, 2, 5, 10, 20} where the candidates allow; the DARTS accuracy axis never zooms to a sliver
without its label saying so; a column's unit comes from the metric, not from the runs present.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from harness.metrics import metrics
from harness.metrics.base import MetricInput
from harness.metrics.registration import CURVE_KS, curve_ks
from harness.records import RunRecord
from harness.site import build_site, charts
from harness.site.glossary import TERMS, glossary_entries, metric_anchor, term_anchor
from tests.conftest import REPO
from tests.metrics.test_common import make_input, params, to_topk
from tests.site_records import make_record, sample_records, synthetic_records


class _Links(HTMLParser):
    """Element ids, and every glossary link with whether it sits in a table header."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, bool]] = []  # (href, inside <th>)
        self.header_cells = 0
        self.linked_header_cells = 0
        self._th = 0
        self._th_linked = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"] or "")
        if tag == "th":
            self._th += 1
            self._th_linked = False
        href = found.get("href") or ""
        if tag == "a" and "glossary.html" in href:
            self.links.append((href, self._th > 0))
            if self._th:
                self._th_linked = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._th:
            self._th -= 1
            self.header_cells += 1
            self.linked_header_cells += self._th_linked


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _demo_records() -> list[RunRecord]:
    from harness.results.records_io import read_records

    return read_records(REPO / "leaderboard" / "results")


def _check_links(site: Path) -> int:
    """Every glossary link of every page names an element of glossary.html; returns how many."""
    glossary = site / "glossary.html"
    anchors = _parse(glossary).ids
    n = 0
    for page in sorted(site.rglob("*.html")):
        for href, in_header in _parse(page).links:
            parts = urlsplit(href)
            target = (page.parent / unquote(parts.path)).resolve()
            assert target == glossary.resolve(), f"{page}: {href} leaves the glossary"
            if not in_header and not parts.fragment:
                continue  # the nav's link to the page itself
            assert parts.fragment in anchors, f"{page.relative_to(site)}: {href} has no anchor"
            n += 1
    return n


# -- item 5: the glossary -------------------------------------------------------------------


def test_every_registered_metric_has_a_glossary_entry() -> None:
    entries, terms = glossary_entries()
    by_anchor = {e.anchor: e for e in entries}
    for name in metrics:
        metric = metrics.get(name)
        assert metric.formula, f"metric {name!r} is registered without a formula"
        assert metric.reference, f"metric {name!r} is registered without a reference"
        entry = by_anchor[metric_anchor(name)]
        assert entry.summary == metric.description
        assert entry.formula == metric.formula and entry.reference == metric.reference
        assert entry.averaging == metric.averaging and entry.averaging.startswith("mean over")
        assert [p.name for p in entry.parameters] == list(metric.params.model_fields)
    assert len(entries) == len(list(metrics))
    assert [t.anchor for t in terms] == [term_anchor(a) for a, _, _ in TERMS]


def test_opaque_columns_are_defined_with_their_parameters() -> None:
    entries, _ = glossary_entries({"prediction_relation_share": {"semantic"}})
    share = next(e for e in entries if e.term == "prediction_relation_share")
    assert share.columns == ("semantic",)
    assert [(p.name, p.default) for p in share.parameters] == [("relation", "'semantic_upper'")]
    hret = next(e for e in entries if e.term == "hierarchical_retrieval_precision_at_k")
    assert "S(a, b) = 1 − d(a, b) / h(root)" in hret.formula
    assert "by default h(LCA(a, b))" in hret.formula  # Deng's LCA height unless a spec says
    assert [p.name for p in hret.parameters] == ["k", "lca_distance"]
    assert "CVPR 2011" in hret.reference
    ahd = next(e for e in entries if e.term == "average_hierarchical_distance_at_k")
    assert ahd.direction == "lower is better" and "hierarchy levels" in ahd.unit


def test_an_unregistered_metric_of_a_record_gets_an_entry_saying_so() -> None:
    entries, _ = glossary_entries({"error_score": {"error"}})
    entry = next(e for e in entries if e.anchor == metric_anchor("error_score"))
    assert entry.summary.startswith("Not registered in this harness")
    assert entry.columns == ("error",)
    with pytest.raises(KeyError, match="Expected a glossary term"):
        term_anchor("no-such-term")


@pytest.mark.parametrize("records", ["sample", "synthetic", "demo"])
def test_every_header_link_on_every_page_resolves(records: str, tmp_path: Path) -> None:
    chosen = {
        "sample": sample_records,
        "synthetic": lambda: synthetic_records(4, 2),
        "demo": _demo_records,
    }[records]()
    site = tmp_path / "site"
    build_site(chosen, site)
    assert _check_links(site) > 20
    # every metric column of a benchmark table links its definition
    for page in (site / "benchmarks").glob("*.html"):
        html = page.read_text(encoding="utf-8")
        for table in re.findall(r'<table class="scores[^>]*>.*?</thead>', html, re.S):
            metric_headers = re.findall(r'<th scope="col" class="num cg-[^>]*>.*?</th>', table)
            assert metric_headers
            assert all('href="../glossary.html#metric-' in th for th in metric_headers)
    index = _parse(site / "index.html")
    assert ("glossary.html", False) in index.links  # the nav
    assert any(inside for _, inside in index.links)


def test_glossary_page_escapes_what_records_name(tmp_path: Path) -> None:
    record = make_record(
        "a", zsl={"top1": 0.5}, functions={"top1": '<img src=x onerror="alert(1)">'}
    )
    build_site([record], tmp_path / "site")
    html = (tmp_path / "site" / "glossary.html").read_text(encoding="utf-8")
    assert "<img src=x" not in html and "&lt;img src=x onerror=" in html
    _check_links(tmp_path / "site")


# -- item 4: chart ks -----------------------------------------------------------------------


def _wide_input(n_candidates: int) -> MetricInput:
    """make_input's hierarchy with more candidates: every hierarchy node may be a candidate."""
    base = make_input("zsl", seed=3, n_images=60)
    hierarchy = base.hierarchy
    assert hierarchy is not None
    nodes = np.arange(min(n_candidates, hierarchy.n_nodes))
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, len(nodes), 60)
    scores = rng.standard_normal((60, len(nodes)))
    scores[np.arange(60), y_true] += 1.0
    return MetricInput(
        setting="zsl",
        y_true=y_true,
        scores=scores,
        candidates=np.asarray([str(n) for n in nodes]),
        seen=np.zeros(len(nodes), dtype=bool),
        hierarchy=hierarchy,
        candidate_nodes=nodes,
    )


def test_hp_curve_ks_are_the_default_ks_the_candidates_allow() -> None:
    hp = metrics.get("hierarchical_precision_at_k")
    assert CURVE_KS == (1, 2, 5, 10, 20)
    small = make_input("zsl", seed=1, n_images=30)  # 8 candidates
    assert small.n_candidates == 8
    result = hp(small, params(hp, k=2))
    assert result.details["curve"]["k"] == [1, 2, 5]
    # each point is the metric at that k, computed on its own
    for k, value in zip(
        result.details["curve"]["k"], result.details["curve"]["value"], strict=True
    ):
        assert value == pytest.approx(hp(small, params(hp, k=k)).value, abs=1e-12)
    assert result.value == hp(small, params(hp, k=2)).value
    assert curve_ks(small, 3) == [1, 2, 3, 5]  # a spec's own k joins the curve
    assert curve_ks(to_topk(small, k=3), 1) == [1, 2]  # K = 3 top-K lists: k <= 3
    wide = _wide_input(40)  # every node of the 21-node hierarchy a candidate
    assert wide.n_candidates == 21
    assert hp(wide, params(hp, k=5)).details["curve"]["k"] == [1, 2, 5, 10, 20]
    # 20 candidates: hp@20 ranks every one of them (1 whatever the scores), so no k = 20
    twenty = _wide_input(20)
    assert twenty.n_candidates == 20
    assert hp(twenty, params(hp, k=5)).details["curve"]["k"] == [1, 2, 5, 10]


def _with_curve(
    record: RunRecord, metric: str, function: str, ks: list[int], values: list[float]
) -> RunRecord:
    """``record`` with score ``metric`` made a v2 ``function`` keeping the curve (ks, values)."""
    k = int(metric.rsplit("@", 1)[-1]) if "@" in metric else int(metric.removeprefix("top"))
    scores = [
        e.model_copy(
            update={
                "function": function,
                "version": "2",
                "details": {"k": k, "curve": {"k": ks, "value": values}},
            }
        )
        if e.metric == metric
        else e
        for e in record.scores
    ]
    return record.model_copy(update={"scores": scores})


def test_hp_chart_draws_the_stored_curve_at_every_k(tmp_path: Path) -> None:
    ks = [1, 2, 5, 10, 20]
    records = [
        _with_curve(
            make_record(name, zsl={"top1": top1, "hp@5": hp5}),
            "hp@5",
            "hierarchical_precision_at_k",
            ks,
            [top1, (top1 + hp5) / 2, hp5, hp5 + 0.05, hp5 + 0.1],
        )
        for name, top1, hp5 in (("a", 0.5, 0.7), ("b", 0.4, 0.6))
    ]
    build_site(records, tmp_path / "site")
    html = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    figure = html[html.index('id="fig-zsl-hp-at-k"') :]
    figure = figure[: figure.index("</figure>")]
    for name in ("a", "b"):
        assert re.search(rf"{name}\u2069? \u2068?1\.0\u2069?: 5 points", figure), name
    assert figure.count("k = 20") == 2  # a marker at k = 20 for each run


def test_top_k_chart_draws_the_stored_curve_and_old_records_get_none(tmp_path: Path) -> None:
    ks = [1, 2, 5, 10, 20]
    records = [
        _with_curve(
            make_record(name, zsl={"top1": top1}),
            "top1",
            "per_class_top_k_accuracy",
            ks,
            [top1, top1 + 0.1, 0.8, 0.9, 0.95],
        )
        for name, top1 in (("a", 0.5), ("b", 0.4))
    ]
    build_site(records, tmp_path / "site")
    html = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    figure = html[html.index('id="fig-zsl-top-k"') :]
    figure = figure[: figure.index("</figure>")]
    for name in ("a", "b"):
        assert re.search(rf"{name}\u2069? \u2068?1\.0\u2069?: 5 points", figure), name
    assert figure.count("k = 20") == 2
    assert "per_class_top_k_accuracy v<bdi>2</bdi>" in figure
    # Records of v1 (no curve): no top-k chart, rather than a line through top-1 and top-5.
    build_site([make_record("c", zsl={"top1": 0.5})], tmp_path / "old")
    old = (tmp_path / "old" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert 'id="fig-zsl-top-k"' not in old


# -- item 4: the DARTS accuracy axis --------------------------------------------------------


def test_a_sliver_of_accuracy_is_widened_and_the_axis_says_so() -> None:
    series = [charts.Series("a", [0.996, 0.998, 1.0], [0.5, 0.3, 0.0])]
    before = charts.line_chart(
        series, title="t", x_label="test accuracy", y_label="g", x_percent=True
    )
    assert "99.6%" in before and "zoomed" not in before  # the sliver the axis showed before
    after = charts.line_chart(
        series,
        title="t",
        x_label="test accuracy",
        y_label="g",
        x_percent=True,
        x_limits=(0.0, 1.0),
        x_min_span=0.2,
    )
    assert "test accuracy (axis from 80% to 100%, zoomed)" in after
    assert ">80%<" in after and ">100%<" in after and "99.6%<" not in after
    full = charts.line_chart(
        [charts.Series("a", [0.0, 0.5, 1.0], [1.0, 0.5, 0.0])],
        title="t",
        x_label="test accuracy",
        y_label="g",
        x_percent=True,
        x_limits=(0.0, 1.0),
        x_min_span=0.2,
    )
    assert "zoomed" not in full  # the whole range needs no note


def test_darts_chart_of_a_site_names_its_zoom(tmp_path: Path) -> None:
    records = []
    for name, acc in (("a", [0.996, 0.998, 1.0]), ("b", [0.997, 0.999, 1.0])):
        record = make_record(name, zsl={"top1": 0.5, "darts": 0.3})
        curve = [
            {"target": t, "accuracy": a, "info_gain": 1 - a * 0.9}
            for t, a in zip((0.5, 0.9, 0.99), acc, strict=True)
        ]
        scores = [
            e.model_copy(update={"function": "darts_area", "details": {"curve": curve}})
            if e.metric == "darts"
            else e
            for e in record.scores
        ]
        records.append(record.model_copy(update={"scores": scores}))
    build_site(records, tmp_path / "site")
    html = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert "test accuracy (axis from 80% to 100%, zoomed)" in html


# -- item 4: the hcost unit -----------------------------------------------------------------


def _hcost_header(records: list[RunRecord], out: Path) -> str:
    build_site(records, out)
    html = (out / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    return re.findall(r'<bdi>hcost</bdi>[^<]*(?=<a class="gloss")', html)[0]  # its header


def test_hcost_unit_does_not_change_when_a_run_is_added(tmp_path: Path) -> None:
    def run(name: str, cost: float) -> RunRecord:
        return make_record(
            name,
            zsl={"top1": 0.5, "hcost": cost},
            functions={"top1": "per_class_top_k_accuracy", "hcost": "hierarchical_cost"},
            lower_is_better=frozenset({"hcost"}),
        )

    below_one = [run("a", 0.83), run("b", 0.74)]  # every cost happens to lie in [0, 1]
    first = _hcost_header(below_one, tmp_path / "one")
    second = _hcost_header([*below_one, run("c", 2.64)], tmp_path / "two")
    assert first == second == "<bdi>hcost</bdi> ↓"  # levels, never "(%)"
    html = (tmp_path / "one" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert ">0.83<" in html and "83.0" not in html


def test_the_unit_comes_from_the_registered_bounds() -> None:
    assert metrics.get("per_class_top_k_accuracy").percent
    assert not metrics.get("hierarchical_cost").percent
    assert not metrics.get("mistake_severity").percent


def test_metrics_describe_prints_the_glossary_entry() -> None:
    from typer.testing import CliRunner

    from harness.cli.main import app

    result = CliRunner().invoke(app, ["metrics", "describe", "average_hierarchical_distance_at_k"])
    assert result.exit_code == 0, result.output
    metric = metrics.get("average_hierarchical_distance_at_k")
    text = " ".join(result.output.split())
    assert " ".join(metric.formula.split()) in text
    assert "averaged over: mean over test images" in text
    assert "k (default 1): Number of top predictions considered." in text
    assert f"source: {metric.reference}" in text
    bad = CliRunner().invoke(app, ["metrics", "describe", "hret"])
    assert bad.exit_code == 1
    assert "unknown metric 'hret'" in bad.output
