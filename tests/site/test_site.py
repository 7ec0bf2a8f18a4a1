"""The static leaderboard: pages, ranking, groups, versions, comparisons, determinism, atomicity."""

from __future__ import annotations

import csv
import json
import random
import re
from hashlib import sha256
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from typer.testing import CliRunner

from harness.audit import ClassAudit, LeakageAudit, Relation, Relative
from harness.cli import board
from harness.core.errors import HarnessError, IntegrityError
from harness.records import Interval, RunRecord
from harness.results.records_io import load_record, record_id, write_records
from harness.site import build_site, builder
from harness.site.model import SiteModel
from harness.site.slugs import slug
from harness.store import open_store, save_run
from tests.site.provenance import with_data
from tests.site_records import XSS_NAME, make_record, sample_records, synthetic_records

# A name unsafe in a file name keeps a cleaned prefix plus "~" and 12 hex digits of its sha256.
XSS_KEY = (
    f"script-alert-1-script~{sha256(XSS_NAME.encode()).hexdigest()[:12]}"
    f"@b-2-b~{sha256(b'<b>2</b>').hexdigest()[:12]}"
)


class Scan(HTMLParser):
    """Attributes, ids, and the cell texts of each table (by table id, else section id)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: set[str] = set()
        self.tables: dict[str, list[list[str]]] = {}
        self.headers: dict[str, list[str]] = {}
        self.row_ids: dict[str, list[str]] = {}
        self.text: list[str] = []
        self._section: str | None = None
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._row_id = ""
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name, value in attrs:
            self.attrs.append((tag, name, value or ""))
            if name == "id" and value:
                self.ids.add(value)
        if tag == "section" and found.get("id"):
            self._section = found["id"]
        if tag == "table":
            self._table = found.get("id") or self._section
        if tag == "thead":
            self._in_head = True
        elif tag == "tr" and self._table:
            self._row, self._row_id = [], found.get("id") or ""
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table:
            if self._in_head:
                self.headers[self._table] = self._row
            else:
                self.tables.setdefault(self._table, []).append(self._row)
                self.row_ids.setdefault(self._table, []).append(self._row_id)
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def scan(path: Path) -> Scan:
    parser = Scan()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def snapshot(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def page(site: Path, relative: str) -> str:
    return (site / relative).read_text(encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    index = build_site(with_data(sample_records()), tmp_path / "site")
    assert index == tmp_path / "site" / "index.html"
    return tmp_path / "site"


# -- layout ---------------------------------------------------------------------------------------


def test_site_layout(site: Path) -> None:
    pairs = [f"{XSS_KEY}--ale@1.0", f"{XSS_KEY}--devise@1.0", "ale@1.0--devise@1.0"]
    subs = [XSS_KEY, "ale@1.0", "devise@1.0", "sje@1.0"]
    assert sorted(snapshot(site)) == sorted(
        [
            ".zsl-leaderboard",
            "across.html",
            "benchmarks/awa2-v1.html",
            "benchmarks/cub-demo-v1.html",
            # every table's CSV beside its page (harness.site.csv_tables)
            "benchmarks/awa2-v1-zsl.csv",
            "benchmarks/cub-demo-v1-gzsl.csv",
            "benchmarks/cub-demo-v1-zsl.csv",
            "compare.html",
            "glossary.html",
            *(f"compare/{p}.html" for p in pairs),  # sje shares no benchmark: no pair page
            *(f"compare/{p}.csv" for p in pairs),
            "cross-gzsl-cub.csv",
            "cross-zsl-awa2.csv",
            "cross-zsl-cub.csv",
            "index-benchmarks.csv",
            "index-ranks-gzsl.csv",
            "index-ranks-zsl.csv",
            "index-submissions.csv",
            "index.html",
            "logs/ale@1.0/cub-demo-v1.txt",
            "logs/devise@1.0/cub-demo-v1.txt",
            "logs/sje@1.0/awa2-v1.txt",
            f"logs/{XSS_KEY}/cub-demo-v1.txt",
            "results.json",
            "static/site.js",
            "static/style.css",
            *(f"submissions/{s}.html" for s in subs),
            *(f"submissions/{s}.csv" for s in subs),
        ]
    )
    index = page(site, "index.html")
    assert "CUB-DEMO demo" in index and "AWA2 demo" in index
    assert "bbbbbbbbbbbb" in index  # short benchmark hash
    hrefs = [v for tag, name, v in scan(site / "index.html").attrs if tag == "a" and name == "href"]
    for href in (
        "benchmarks/cub-demo-v1.html",
        "benchmarks/awa2-v1.html",
        "compare.html",
        "results.json",
        "submissions/ale@1.0.html",
    ):
        assert href in hrefs
    # leaders per setting: ZSL top1 by the escaped name, GZSL H by devise
    assert "62.3%" in index and "49.5%" in index
    assert "Built with zsl-harness" in index


def test_rows_ordered_by_primary_metric_with_percentages(site: Path) -> None:
    bench = scan(site / "benchmarks" / "cub-demo-v1.html")
    assert bench.headers["table-zsl"] == [
        "#",
        "Group",
        "Submission",
        "top1 (%)",
        "top5 (%)",
        "Predictions",
    ]
    assert bench.headers["table-gzsl"][3:6] == ["H (%)", "seen (%)", "unseen (%)"]  # primary first

    zsl = bench.tables["table-zsl"]
    assert [row[2] for row in zsl] == [
        f"{XSS_NAME} <b>2</b> predictions",
        "ale 1.0 model",
        "devise 1.0 model",
    ]
    assert [row[0] for row in zsl] == ["1", "2", "3"]
    assert [row[3] for row in zsl] == ["62.3", "55.1", "40.0"]
    assert [row[1] for row in zsl] == ["—", "—", "—"]  # no class values: no groups
    assert bench.row_ids["table-zsl"] == [f"sub-{XSS_KEY}", "sub-ale@1.0", "sub-devise@1.0"]

    gzsl = bench.tables["table-gzsl"]
    assert [row[2].split()[0] for row in gzsl] == ["devise", "ale", "<script>alert(1)</script>"]
    assert [row[3] for row in gzsl] == ["49.5", "40.0", "31.1"]
    assert bench.row_ids["table-gzsl"] == [
        "sub-devise@1.0-gzsl",
        "sub-ale@1.0-gzsl",
        f"sub-{XSS_KEY}-gzsl",
    ]
    html = page(site, "benchmarks/cub-demo-v1.html")
    assert "No groups of tied submissions: no per-class values" in html
    assert 'data-sort="0.6234"' in html  # the exact value to sort by


def test_lower_is_better_primary_sorts_ascending_and_ties_share_a_rank(tmp_path: Path) -> None:
    records = [
        make_record(
            name,
            zsl={"error": err, "top1": 1 - err},
            primary={"zsl": "error"},
            lower_is_better=frozenset({"error"}),
        )
        for name, err in (("a", 0.3), ("b", 0.1), ("c", 0.3), ("d", 0.5))
    ]
    build_site(records, tmp_path / "site")
    bench = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    zsl = bench.tables["table-zsl"]
    assert [(row[0], row[2].split()[0]) for row in zsl] == [
        ("1", "b"),
        ("2", "a"),
        ("2", "c"),
        ("4", "d"),
    ]
    assert bench.headers["table-zsl"][3] == "error (%) ↓"
    html = page(tmp_path / "site", "benchmarks/cub-demo-v1.html")
    assert (
        'data-sort-first="asc" title="\u2068error_score\u2069 v\u20681\u2069; lower is better; '
        'averaging unit unknown: this harness does not register the metric">'
        "<bdi>error</bdi> (%) ↓"
    ) in html


def test_metric_outside_unit_interval_is_not_a_percentage(tmp_path: Path) -> None:
    records = [
        make_record("a", zsl={"top1": 0.5, "mean_hops": 1.25}),
        make_record("b", zsl={"top1": 0.25, "mean_hops": 0.5}),
    ]
    build_site(records, tmp_path / "site")
    bench = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    assert bench.headers["table-zsl"][3:5] == ["top1 (%)", "mean_hops"]
    assert [row[3:5] for row in bench.tables["table-zsl"]] == [["50.0", "1.25"], ["25.0", "0.50"]]


def test_metric_versions_never_share_a_column(tmp_path: Path) -> None:
    records = [
        make_record("a", zsl={"top1": 0.5, "top5": 0.9}, metric_versions={"top1": "2"}),
        make_record("b", zsl={"top1": 0.7, "top5": 0.8}),  # old top1: version 1
        make_record("c", zsl={"top1": 0.4, "top5": 0.7}, metric_versions={"top1": "10"}),
    ]
    build_site(records, tmp_path / "site")
    bench = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    assert bench.headers["table-zsl"][3:7] == [
        "top1 v10 (%)",
        "top1 v2 (%)",
        "top1 v1 (%)",
        "top5 (%)",
    ]
    rows = bench.tables["table-zsl"]
    # ranked by the newest version only: b's 0.7 is of another version and is not ranked
    assert [(r[0], r[2].split()[0], r[3:6]) for r in rows] == [
        ("1", "c", ["40.0", "—", "—"]),
        ("—", "a", ["—", "50.0", "—"]),
        ("—", "b", ["—", "—", "70.0"]),
    ]
    html = page(tmp_path / "site", "benchmarks/cub-demo-v1.html")
    assert "carry different versions of <bdi>top1</bdi>" in html and "zsl results rescore" in html
    summary = json.loads(page(tmp_path / "site", "results.json"))
    zsl = summary["benchmarks"][0]["settings"][0]
    assert zsl["primary"] == {"metric": "top1", "version": "10"}
    assert [c["version"] for c in zsl["columns"] if c["metric"] == "top1"] == ["10", "2", "1"]


# -- groups and comparisons -----------------------------------------------------------------------


def grouped_records() -> list[RunRecord]:
    """a and b identical on 10 classes; c wrong where they are right; d without class values."""
    right, wrong = [1.0] * 10, [0.0] * 10
    return [
        make_record("a", zsl={"top1": 1.0}, class_means={"top1": right}, interval=0.0),
        make_record("b", zsl={"top1": 1.0}, class_means={"top1": right}, interval=0.0),
        make_record("c", zsl={"top1": 0.0}, class_means={"top1": wrong}, interval=0.0),
        make_record("d", zsl={"top1": 0.5}),
    ]


def test_groups_of_tied_submissions(tmp_path: Path) -> None:
    build_site(grouped_records(), tmp_path / "site")
    bench = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    rows = bench.tables["table-zsl"]
    # a and b: difference 0, p = 1, one group; c: every replicate difference is 1, so
    # p = 2 (0 + 1) / 1001 < 0.05 and it leads group 2; d has no class values: no group.
    assert [(r[0], r[1], r[2].split()[0]) for r in rows] == [
        ("1", "1", "a"),
        ("1", "1", "b"),
        ("3", "—", "d"),
        ("4", "2", "c"),
    ]
    html = page(tmp_path / "site", "benchmarks/cub-demo-v1.html")
    assert "1 run(s) have no per-class values for top1 (%)" in html
    assert "paired bootstrap over classes (1000 replicates" in html
    result = json.loads(page(tmp_path / "site", "results.json"))
    zsl = result["benchmarks"][0]["settings"][0]
    assert zsl["groups"] == [["a@1.0", "b@1.0"], ["c@1.0"]]
    assert [(r["submission"], r["rank"], r["group"]) for r in zsl["ranking"]] == [
        ("a", 1, 1),
        ("b", 1, 1),
        ("d", 3, None),
        ("c", 4, 2),
    ]


def test_pair_pages_show_paired_tests(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(grouped_records(), site)
    pair = scan(site / "compare" / "a@1.0--c@1.0.html")
    table = pair.tables["pair-cub-demo-v1"]
    # setting heading row, then top1: A 100.0, B 0.0, A − B = +100 pp with interval 100 to 100,
    # p = 2/1001 = 0.002, A better (hand-computed: every class draw gives the same difference)
    assert table == [
        ["ZSL"],
        ["top1 (%) ↑", "100.0", "0.0", "+100.0 pp", "+100.0 to +100.0", "0.002", "a 1.0"],
    ]
    tied = scan(site / "compare" / "a@1.0--b@1.0.html")
    assert tied.tables["pair-cub-demo-v1"][1][3:] == ["0.0 pp", "0.0 to 0.0", "1.000", "tied"]
    text = page(site, "compare/a@1.0--c@1.0.html")
    # the two submissions by name, never "A" and "B"
    a, c = "<bdi>a</bdi> <bdi>1.0</bdi>", "<bdi>c</bdi> <bdi>1.0</bdi>"
    assert f"{a} better on <strong>1</strong>, {c} better on <strong>0</strong>" in text
    assert pair.headers["pair-cub-demo-v1"][1:4] == ["a 1.0", "c 1.0", "Differencea − c"]
    assert not re.search(r">\s*[AB]\s*<", text), "a bare A or B names a submission"
    with (site / "compare" / "a@1.0--c@1.0.csv").open(encoding="utf-8") as handle:
        assert [row[-1] for row in csv.reader(handle)] == ["better", "a 1.0"]
    # d has no class values: its pair pages exist (common benchmark) but hold no test
    assert "no paired tests" in page(site, "compare/a@1.0--d@1.0.html")
    compare = page(site, "compare.html")
    assert compare.count('data-a="') == 6 and 'href="compare/a@1.0--c@1.0.html"' in compare
    assert '<select id="compare-a"' in compare and '<select id="compare-b"' in compare


def test_rank_matrix_across_benchmarks(tmp_path: Path) -> None:
    records = [
        make_record("a", zsl={"top1": 0.9}, benchmark="x"),
        make_record("b", zsl={"top1": 0.5}, benchmark="x"),
        make_record("c", zsl={"top1": 0.5}, benchmark="x"),
        make_record("a", zsl={"top1": 0.4}, benchmark="y", benchmark_hash="sha256:" + "9" * 64),
        make_record("b", zsl={"top1": 0.6}, benchmark="y", benchmark_hash="sha256:" + "9" * 64),
    ]
    build_site(with_data(records), tmp_path / "site")
    index = scan(tmp_path / "site" / "index.html")
    assert index.headers["table-ranks-zsl"] == [
        "Submission",
        "Mean rank",
        "Benchmarks",
        "x v1 generated data",
        "y v1 generated data",
    ]
    # x: a 1, b and c tied 2.5; y: b 1, a 2. Means: a 1.5, b 1.75 (both over 2), c 2.5 over 1
    assert index.tables["table-ranks-zsl"] == [
        ["a 1.0", "1.50", "2/2", "1", "2"],
        ["b 1.0", "1.75", "2/2", "2.5", "1"],
        ["c 1.0", "2.50", "1/2", "2.5", "—"],
    ]
    assert "ranks-zsl" in index.ids and any(
        tag == "svg" and name == "class" and "chart-heatmap" in value
        for tag, name, value in index.attrs
    )


# -- submission pages -----------------------------------------------------------------------------


def test_submission_page(site: Path) -> None:
    html = page(site, "submissions/devise@1.0.html")
    for expected in (
        "A. Author",
        "aaaaaaaaaaaa",  # package hash, short; the full one in a title
        "a" * 64,
        "dddddddddddd",  # predictions hash
        "<bdi>class_embedding</bdi>: <code><bdi>attributes</bdi></code>",
        "<bdi>transductive</bdi>: <code><bdi>false</bdi></code>",
        '<a href="http://example.org/devise" rel="nofollow noopener noreferrer">',
        'href="../benchmarks/cub-demo-v1.html#sub-devise@1.0"',
        'href="../logs/devise@1.0/cub-demo-v1.txt"',
        'href="../compare/ale@1.0--devise@1.0.html"',
        "<bdi>top1_score</bdi> v<bdi>1</bdi>",
    ):
        assert expected in html, expected
    rows = scan(site / "submissions" / "devise@1.0.html").tables["bench-cub-demo-v1"]
    assert rows[0] == ["ZSL", "top1 ↑ primary", "40.0%", "—", "3 of 3", "—", "top1_score v1"]
    assert ["GZSL", "H ↑ primary", "49.5%", "—", "1 of 3", "—", "H_score v1"] in rows
    assert 'title="higher is better">↑</span>' in html  # the direction, in words on hover


def test_logs_are_text_files(tmp_path: Path) -> None:
    record = make_record(
        "a",
        zsl={"top1": 0.5},
        logs={"reason": "timeout", "stdout": "<b>épоch 1</b>\n", "stderr": "boom"},
    )
    build_site([record], tmp_path / "site")
    log = (tmp_path / "site" / "logs" / "a@1.0" / "cub-demo-v1.txt").read_bytes()
    assert log.startswith("\ufeff".encode())  # browsers read it as UTF-8 from file:// too
    text = log.decode("utf-8-sig")
    assert text.index("== reason ==\ntimeout") < text.index("== stderr ==\nboom")
    assert "== stdout ==\n<b>épоch 1</b>" in text  # raw: a .txt file is shown, never run
    no_logs = make_record("b", zsl={"top1": 0.5}, logs={})
    build_site([no_logs], tmp_path / "other")
    assert not (tmp_path / "other" / "logs" / "b@1.0").exists()
    assert "none kept" in page(tmp_path / "other", "submissions/b@1.0.html")


# -- charts ---------------------------------------------------------------------------------------


def test_benchmark_page_charts(tmp_path: Path) -> None:
    build_site(synthetic_records(3, 1), tmp_path / "site")
    html = page(tmp_path / "site", "benchmarks/bench-00-v1.html")
    for fig in (
        "zsl-primary",
        "zsl-darts",
        "zsl-hp-at-k",
        "zsl-relations",
        "gzsl-primary",
        "gzsl-seen-unseen",
        "structure-hops-to-train",
    ):
        assert f'id="fig-{fig}"' in html, fig
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart') == 7
    assert "structural ratio" in html and "0.600 over" in html
    # chart legends link the table rows
    assert '<a href="#sub-method-00@1.0">' in html


def test_no_structure_diagnostics_says_so(site: Path) -> None:
    assert "carry no structure diagnostics" in page(site, "benchmarks/cub-demo-v1.html")


# -- results.json ---------------------------------------------------------------------------------


def test_results_json_holds_every_record_and_the_computed_groups(tmp_path: Path) -> None:
    records = with_data(grouped_records())
    build_site(records, tmp_path / "site")
    text = page(tmp_path / "site", "results.json")
    data = json.loads(text)
    assert data["format"] == "zsl-leaderboard-results/3"
    assert data["tests"]["alpha"] == 0.05 and data["tests"]["n_boot"] == 1000
    loaded = [load_record(json.dumps(envelope), "results.json") for envelope in data["records"]]
    assert loaded == sorted(records, key=lambda r: r.submission.name)
    assert [e["id"] for e in data["records"]] == [record_id(r) for r in loaded]
    # one record per line, so diffs of the file stay readable
    lines = text.splitlines()
    assert sum(line.startswith('{"format":"zsl-run-record/2"') for line in lines) == 4
    assert data["rank_matrices"]["zsl"]["submissions"] == ["a@1.0", "b@1.0", "d@1.0", "c@1.0"]


# -- links, determinism, atomicity -----------------------------------------------------------------


def check_links(site: Path) -> int:
    checked = 0
    for path in site.rglob("*.html"):
        for tag, name, value in scan(path).attrs:
            if name not in ("href", "src"):
                continue
            parts = urlsplit(value)
            if tag == "a" and parts.scheme in ("http", "https"):
                continue  # a submitter's paper or code link, never a resource
            if value == "data:,":
                continue  # the empty favicon
            assert not parts.scheme and not parts.netloc and not value.startswith("/"), value
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            assert target.is_file(), (path, value)
            assert site.resolve() in target.parents, (path, value)
            if parts.fragment:
                assert parts.fragment in scan(target).ids, (path, value)
            checked += 1
    return checked


def test_links_are_relative_and_resolve(site: Path) -> None:
    assert check_links(site) > 50


@pytest.mark.slow  # up to 17 s in `make test-fast` on a busy 2-core machine (issue 28)
def test_links_resolve_on_a_realistic_site(tmp_path: Path) -> None:
    build_site(synthetic_records(3, 2), tmp_path / "site")
    assert check_links(tmp_path / "site") > 200


def test_no_external_resources(site: Path) -> None:
    for path in site.rglob("*.html"):
        for tag, name, value in scan(path).attrs:
            if (tag == "a" and name == "href") or (tag == "svg" and name == "xmlns"):
                continue
            assert "://" not in value, (path, tag, name, value)
            if name == "src":
                assert tag == "script" and value.endswith("static/site.js"), (path, tag, value)
    for name in ("style.css", "site.js"):
        text = page(site, f"static/{name}")
        assert "://" not in text and "@import" not in text and "url(" not in text
        assert "fetch(" not in text and "XMLHttpRequest" not in text


def test_unsafe_benchmark_id_stays_inside_the_site(tmp_path: Path) -> None:
    record = make_record("a", benchmark="../../evil id", zsl={"top1": 0.5})
    build_site(with_data([record]), tmp_path / "s")
    table, bench = sorted((tmp_path / "s" / "benchmarks").iterdir(), key=lambda p: p.suffix)
    assert re.fullmatch(r"evil-id-[0-9a-f]{8}-v1-zsl\.csv", table.name)  # its table's data
    assert re.fullmatch(r"evil-id-[0-9a-f]{8}-v1\.html", bench.name)
    assert not (tmp_path / "evil id-v1.html").exists()
    assert [p.name for p in (tmp_path / "s").glob("cross-*.csv")] == [
        f"cross-zsl-{slug('../../evil id')}.csv"  # the family is the whole id: slugged
    ]


def test_rebuild_is_byte_identical(site: Path, tmp_path: Path) -> None:
    first = snapshot(site)
    build_site(with_data(sample_records()), site)  # replaces the earlier build
    assert snapshot(site) == first
    shuffled = with_data(sample_records())
    random.Random(3).shuffle(shuffled)
    build_site(shuffled, tmp_path / "other")
    assert snapshot(tmp_path / "other") == first


def test_empty_store_says_how_to_add_runs(tmp_path: Path) -> None:
    index = build_site([], tmp_path / "site")
    html = index.read_text(encoding="utf-8")
    assert "No runs yet" in html and "zsl demo" in html
    assert list((tmp_path / "site" / "benchmarks").iterdir()) == []
    assert json.loads(page(tmp_path / "site", "results.json"))["records"] == []


def test_failed_build_keeps_the_previous_site(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(site)
    real_render = builder._render

    def render_then_fail(model: SiteModel, work: Path) -> None:
        real_render(model, work)
        (work / "index.html").write_text("half a site")
        raise OSError("disk full")

    monkeypatch.setattr(builder, "_render", render_then_fail)
    with pytest.raises(OSError, match="disk full"):
        build_site(sample_records()[:1], site)
    assert snapshot(site) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no temp dirs left


def test_refuses_to_replace_a_folder_it_did_not_build(tmp_path: Path) -> None:
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "chapter1.tex").write_text("do not delete")
    with pytest.raises(HarnessError, match=r"refusing to replace .*thesis.*\.zsl-leaderboard"):
        build_site(sample_records(), precious)
    assert (precious / "chapter1.tex").read_text() == "do not delete"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert build_site(sample_records(), empty).is_file()


def test_inconsistent_records_are_refused(tmp_path: Path) -> None:
    clash = make_record("other", zsl={"top1": 0.1}, benchmark_hash="sha256:" + "f" * 64)
    with pytest.raises(IntegrityError, match=r"'cub-demo' v1 disagree on its hash"):
        build_site([*sample_records(), clash], tmp_path / "site")
    with pytest.raises(HarnessError, match=r"two runs of ale@1.0 on cub-demo v1"):
        build_site([*sample_records(), sample_records()[0]], tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_intervals_are_shown_under_scores(tmp_path: Path) -> None:
    record = make_record(
        "a", zsl={"top1": 0.5, "hcost": 1.25}, lower_is_better=frozenset({"hcost"})
    )
    ranged = [
        e.model_copy(
            update={
                "interval": Interval(
                    lo=e.value - 0.05, hi=e.value + 0.1, scheme="images_within_class", n_boot=1000
                )
            }
        )
        for e in record.scores
    ]
    build_site([record.model_copy(update={"scores": ranged})], tmp_path / "site")
    html = page(tmp_path / "site", "benchmarks/cub-demo-v1.html")
    assert '50.0<span class="ci">45.0–60.0</span>' in html
    assert '1.25<span class="ci">1.20–1.35</span>' in html
    assert 'title="95% bootstrap interval (images_within_class, 1000 samples)"' in html
    index = page(tmp_path / "site", "index.html")
    assert '<strong>50.0%</strong> <span class="muted">[45.0–60.0]</span>' in index


def test_leakage_and_protocol_badges(tmp_path: Path) -> None:
    lion = Relative(wordnet_id="n02129165", name="lion", relation=Relation.SAME, hops=0)
    audit = LeakageAudit(
        source="ilsvrc2012",
        n_test=10,
        classes=[
            ClassAudit(
                class_id="n02129165",
                name="<b>lion</b>",
                wordnet_id="n02129165",
                mapping="id",
                counts={Relation.SAME: 1},
                relatives=[lion],
            )
        ],
    )
    records = [
        make_record("a", zsl={"top1": 0.5}, leakage=audit),
        make_record("b", zsl={"top1": 0.4}, declarations={"transductive": True}),
        make_record("c", zsl={"top1": 0.3}, declarations={"extra_data": "LAION-400M"}),
    ]
    build_site(records, tmp_path / "site")
    html = page(tmp_path / "site", "benchmarks/cub-demo-v1.html")
    index = page(tmp_path / "site", "index.html")
    badge = "leakage: 1 of 10 test classes seen in pre-training"
    assert badge in html and badge in index
    assert "&lt;b&gt;lion&lt;/b&gt; (n02129165): same lion" in html and "<b>lion" not in html
    # the badge says what is counted and what each relation means
    assert 'title="Leakage counts test classes related to the ilsvrc2012' in html
    assert "hyponym: a pre-training class is a kind of the test class" in html
    assert "backbone pre-trained on <bdi>ilsvrc2012</bdi>" in html
    rows = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    assert [r[2] for r in rows.tables["table-zsl"]] == [
        "a 1.0 model leakage 1/10",
        "c 1.0 model extra data",
    ]
    # a transductive run is listed apart (tests/site/test_site_transductive.py)
    assert [r[2] for r in rows.tables["table-zsl-transductive"]] == ["b 1.0 model transductive"]
    assert 'data-flags="leakage"' in html and 'data-flags="transductive"' in html
    assert 'data-flags="extra-data"' in html
    assert "trained with data beyond the benchmark&#39;s: LAION-400M" in html
    assert "1 transductive" in index and "1 extra data" in index

    sibling = lion.model_copy(update={"relation": Relation.SIBLING, "hops": 2, "via": "n02120997"})
    only_sibling = audit.model_copy(
        update={
            "classes": [
                audit.classes[0].model_copy(
                    update={"counts": {Relation.SIBLING: 1}, "relatives": [sibling]}
                )
            ]
        }
    )
    clean = make_record("a", zsl={"top1": 0.5}, leakage=only_sibling)
    build_site([clean], tmp_path / "clean")
    assert "leakage:" not in page(tmp_path / "clean", "index.html")
    assert "reported, not counted: 1 sibling" in page(
        tmp_path / "clean", "benchmarks/cub-demo-v1.html"
    )
    broken = make_record("a", zsl={"top1": 0.5}, leakage=LeakageAudit(source="x", error="no lists"))
    build_site([broken], tmp_path / "broken")
    assert "leakage audit unavailable" in page(tmp_path / "broken", "index.html")


# -- CLI ------------------------------------------------------------------------------------------


def test_cli_build_from_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'zsl.sqlite3'}"
    engine = open_store(url)
    for record in sample_records():
        save_run(engine, record)
    engine.dispose()
    monkeypatch.setenv("ZSL_DATABASE_URL", url)
    out = tmp_path / "leaderboard" / "site"
    result = CliRunner().invoke(board.app, ["build", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out / "index.html")
    assert snapshot(out) == snapshot(build_site(sample_records(), tmp_path / "direct").parent)


def test_cli_build_from_exported_records(tmp_path: Path) -> None:
    records = synthetic_records(3, 1)
    write_records(records, tmp_path / "results")
    out = tmp_path / "site"
    result = CliRunner().invoke(
        board.app, ["build", "--results", str(tmp_path / "results"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert snapshot(out) == snapshot(build_site(records, tmp_path / "direct").parent)
    bad = CliRunner().invoke(
        board.app, ["build", "--results", str(tmp_path / "nothing"), "--out", str(out)]
    )
    assert bad.exit_code == 1 and "no such folder of run records" in bad.output


def test_cli_build_reports_errors_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("x")
    result = CliRunner().invoke(
        board.app,
        ["build", "--out", str(tmp_path / "notes"), "--database-url", "sqlite://"],
    )
    assert result.exit_code == 1
    assert "error: refusing to replace" in result.output
