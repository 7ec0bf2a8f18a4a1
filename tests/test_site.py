"""The static leaderboard: pages, ranking, escaping, relative links, determinism, atomic builds."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from harness.cli import board
from harness.errors import HarnessError, IntegrityError
from harness.records import BenchmarkInfo, RunRecord, ScoreEntry, SubmissionInfo
from harness.site import build_site, builder
from harness.store import open_store, save_run

T0 = datetime(2024, 5, 17, 12, 0, tzinfo=UTC)
XSS_NAME = "<script>alert(1)</script>"


def make_record(
    name: str,
    *,
    zsl: dict[str, float] | None = None,
    gzsl: dict[str, float] | None = None,
    version: str = "1.0",
    benchmark: str = "cub-demo",
    benchmark_hash: str = "sha256:" + "b" * 64,
    primary: dict[str, str] | None = None,
    lower_is_better: frozenset[str] = frozenset(),
    kind: str = "model",
    paper: str | None = "https://arxiv.org/abs/1503.08677",
    url: str | None = None,
    description: str = "",
    minutes: int = 0,
) -> RunRecord:
    """A record whose scores are given as {metric: value} per setting."""
    scores = [
        ScoreEntry(
            setting=setting,
            metric=metric,
            function=f"{metric}_score",
            version="1",
            value=value,
            higher_is_better=metric not in lower_is_better,
        )
        for setting, values in (("zsl", zsl or {}), ("gzsl", gzsl or {}))
        for metric, value in values.items()
    ]
    return RunRecord(
        benchmark=BenchmarkInfo(
            id=benchmark,
            version=1,
            title=f"{benchmark.upper()} demo",
            hash=benchmark_hash,
            spec_hash="sha256:" + "c" * 64,
            primary=primary if primary is not None else {"zsl": "top1", "gzsl": "H"},
            n_classes=200,
            n_seen=150,
            n_unseen=50,
        ),
        submission=SubmissionInfo.model_validate(
            {
                "name": name,
                "version": version,
                "kind": kind,
                "package_hash": "sha256:" + "a" * 64,
                "authors": ["A. Author"],
                "paper": paper,
                "url": url,
                "description": description,
                "declarations": {"class_embedding": "attributes", "transductive": False},
            }
        ),
        predictions_hashes={"zsl": "sha256:" + "d" * 64, "gzsl": "sha256:" + "e" * 64},
        harness_version="0.1.0",
        runner="local",
        environment={"python": "3.11.7"},
        timings={"fit": 1.25},
        scores=scores,
        created_at=T0 + timedelta(minutes=minutes),
    )


def sample_records() -> list[RunRecord]:
    return [
        make_record(
            "ale",
            zsl={"top1": 0.5512, "top5": 0.8},
            gzsl={"seen": 0.6, "unseen": 0.3, "H": 0.4},
        ),
        make_record(
            XSS_NAME,
            version="<b>2</b>",
            zsl={"top1": 0.6234, "top5": 0.9},
            gzsl={"seen": 0.7, "unseen": 0.2, "H": 0.311},
            paper="javascript:alert(1)",
            url="JaVaScRiPt:alert(document.cookie)",
            description='<img src=x onerror="alert(2)"> & more',
            kind="predictions",
            minutes=5,
        ),
        make_record(
            "devise",
            zsl={"top1": 0.4, "top5": 0.7},
            gzsl={"seen": 0.55, "unseen": 0.45, "H": 0.495},
            paper=None,
            url="http://example.org/devise",
            minutes=10,
        ),
        make_record("sje", benchmark="awa2", zsl={"top1": 0.611}),
    ]


class _Scan(HTMLParser):
    """Collects attributes, element ids, and the cell texts of each score table by section id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: set[str] = set()
        self.tables: dict[str, list[list[str]]] = {}
        self.headers: dict[str, list[str]] = {}
        self._section: str | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            self.attrs.append((tag, name, value or ""))
            if name == "id" and value:
                self.ids.add(value)
                if tag == "section":
                    self._section = value
        if tag == "thead":
            self._in_head = True
        elif tag == "tr" and self._section:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._section:
            if self._in_head:
                self.headers[self._section] = self._row
            else:
                self.tables.setdefault(self._section, []).append(self._row)
            self._row = None
        elif tag == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def scan(path: Path) -> _Scan:
    parser = _Scan()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def snapshot(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    index = build_site(sample_records(), tmp_path / "site")
    assert index == tmp_path / "site" / "index.html"
    return tmp_path / "site"


# -- pages and tables -----------------------------------------------------------------------------


def test_index_and_benchmark_pages_exist(site: Path) -> None:
    assert sorted(snapshot(site)) == [
        ".zsl-leaderboard",
        "benchmarks/awa2-v1.html",
        "benchmarks/cub-demo-v1.html",
        "index.html",
        "static/style.css",
    ]
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "CUB-DEMO demo" in index and "AWA2 demo" in index
    assert "bbbbbbbbbbbb" in index  # short benchmark hash
    rows = scan(site / "index.html")
    hrefs = [v for tag, name, v in rows.attrs if tag == "a" and name == "href"]
    assert "benchmarks/cub-demo-v1.html" in hrefs and "benchmarks/awa2-v1.html" in hrefs
    # best primary scores per setting: ZSL top1 by the escaped name, GZSL H by devise
    assert "62.3%" in index and "49.5%" in index
    assert "Built with zsl-harness" in index


def test_rows_ordered_by_primary_metric_with_percentages(site: Path) -> None:
    page = scan(site / "benchmarks" / "cub-demo-v1.html")
    assert page.headers["setting-zsl"][:5] == ["#", "Submission", "Kind", "top1 (%)", "top5 (%)"]
    assert page.headers["setting-gzsl"][3:6] == ["seen (%)", "unseen (%)", "H (%)"]

    zsl = page.tables["setting-zsl"]
    assert [row[1] for row in zsl] == [f"{XSS_NAME} <b>2</b>", "ale 1.0", "devise 1.0"]
    assert [row[0] for row in zsl] == ["1", "2", "3"]
    assert [row[3] for row in zsl] == ["62.3", "55.1", "40.0"]

    gzsl = page.tables["setting-gzsl"]
    assert [row[1].split()[0] for row in gzsl] == ["devise", "ale", "<script>alert(1)</script>"]
    assert [row[5] for row in gzsl] == ["49.5", "40.0", "31.1"]


def test_submission_metadata_is_shown(site: Path) -> None:
    html = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    for expected in (
        "A. Author",
        "aaaaaaaaaaaa",  # package hash, short
        "dddddddddddd",  # predictions hash, short
        "local",
        "ZSL top1: top1_score v1",
        "transductive: <code>false</code>",
        '<a href="https://arxiv.org/abs/1503.08677" rel="nofollow noopener noreferrer">',
        '<a href="http://example.org/devise" rel="nofollow noopener noreferrer">',
    ):
        assert expected in html
    assert "a" * 64 in html  # the full hash sits in a title attribute


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
    page = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    zsl = page.tables["setting-zsl"]
    assert [(row[0], row[1].split()[0]) for row in zsl] == [
        ("1", "b"),
        ("2", "a"),
        ("2", "c"),
        ("4", "d"),
    ]
    assert page.headers["setting-zsl"][3] == "error (%) ↓"


def test_metric_outside_unit_interval_is_not_a_percentage(tmp_path: Path) -> None:
    records = [
        make_record("a", zsl={"top1": 0.5, "mean_hops": 1.25}),
        make_record("b", zsl={"top1": 0.25, "mean_hops": 0.5}),
    ]
    build_site(records, tmp_path / "site")
    page = scan(tmp_path / "site" / "benchmarks" / "cub-demo-v1.html")
    assert page.headers["setting-zsl"][3:5] == ["top1 (%)", "mean_hops"]
    assert [row[3:5] for row in page.tables["setting-zsl"]] == [["50.0", "1.25"], ["25.0", "0.50"]]


# -- safety ---------------------------------------------------------------------------------------


def test_submitted_strings_are_escaped(site: Path) -> None:
    page = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;2&lt;/b&gt;" in page
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt; &amp; more" in page
    for path, content in snapshot(site).items():
        text = content.decode("utf-8").lower()
        assert "<script" not in text, path
        assert "<img" not in text, path
        assert "onerror=" not in text.replace("onerror=&#34;", ""), path


def test_javascript_urls_are_never_links(site: Path) -> None:
    for path in site.rglob("*.html"):
        page = scan(path)
        for tag, name, value in page.attrs:
            assert not value.strip().lower().startswith("javascript:"), (path, tag, name)
        assert 'href="javascript' not in path.read_text(encoding="utf-8").lower()
    html = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert (
        '<span class="unlinked" title="shown as text: not an http(s) link">javascript:alert(1)'
        in html
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://arxiv.org/abs/1", "https://arxiv.org/abs/1"),
        ("HTTP://example.org", "HTTP://example.org"),
        ("javascript:alert(1)", None),
        (" javascript:alert(1)", None),
        ("java\tscript:alert(1)", None),
        ("https:alert(1)", None),  # no host
        ("data:text/html,<script>", None),
        ("//evil.example/x", None),
        ("https://example.org/a b", None),
        ("", None),
        (None, None),
    ],
)
def test_safe_href(url: str | None, expected: str | None) -> None:
    assert builder.safe_href(url) == expected


def test_links_are_relative_and_resolve(site: Path) -> None:
    checked = 0
    for path in site.rglob("*.html"):
        for tag, name, value in scan(path).attrs:
            if name not in ("href", "src"):
                continue
            parts = urlsplit(value)
            if tag == "a" and parts.scheme in ("http", "https"):
                continue  # a submitter's paper or code link, never a resource
            assert not parts.scheme and not parts.netloc and not value.startswith("/"), value
            target = (path.parent / parts.path).resolve() if parts.path else path
            assert target.is_file(), (path, value)
            assert site.resolve() in target.parents, (path, value)
            if parts.fragment:
                assert parts.fragment in scan(target).ids, (path, value)
            checked += 1
    assert checked > 10


def test_no_external_resources(site: Path) -> None:
    for path in site.rglob("*.html"):
        for tag, name, value in scan(path).attrs:
            if tag == "a" and name == "href":
                continue
            assert "://" not in value, (path, tag, name, value)
            assert name != "src", (path, tag)
    css = (site / "static" / "style.css").read_text(encoding="utf-8")
    assert "://" not in css and "@import" not in css and "url(" not in css


def test_unsafe_benchmark_id_stays_inside_the_site(tmp_path: Path) -> None:
    build_site([make_record("a", benchmark="../../evil id", zsl={"top1": 0.5})], tmp_path / "s")
    (page,) = (tmp_path / "s" / "benchmarks").iterdir()
    assert re.fullmatch(r"evil-id-[0-9a-f]{8}-v1\.html", page.name)
    assert not (tmp_path / "evil id-v1.html").exists()


# -- determinism and atomicity --------------------------------------------------------------------


def test_rebuild_is_byte_identical(site: Path, tmp_path: Path) -> None:
    first = snapshot(site)
    build_site(sample_records(), site)  # replaces the earlier build
    assert snapshot(site) == first
    shuffled = sample_records()
    random.Random(3).shuffle(shuffled)
    build_site(shuffled, tmp_path / "other")
    assert snapshot(tmp_path / "other") == first


def test_empty_store_says_how_to_add_runs(tmp_path: Path) -> None:
    index = build_site([], tmp_path / "site")
    html = index.read_text(encoding="utf-8")
    assert "No runs yet" in html and "zsl demo" in html
    assert list((tmp_path / "site" / "benchmarks").iterdir()) == []


def test_failed_build_keeps_the_previous_site(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(site)
    real_render = builder._render

    def render_then_fail(pages: list[builder.BenchmarkPage], work: Path) -> None:
        real_render(pages, work)
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


# -- store → site through the CLI -----------------------------------------------------------------


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


def test_cli_build_reports_errors_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("x")
    result = CliRunner().invoke(
        board.app,
        ["build", "--out", str(tmp_path / "notes"), "--database-url", "sqlite://"],
    )
    assert result.exit_code == 1
    assert "error: refusing to replace" in result.output


def test_intervals_are_shown_under_scores(tmp_path: Path) -> None:
    from harness.records import Interval

    record = make_record(
        "a", zsl={"top1": 0.5, "hcost": 1.25}, lower_is_better=frozenset({"hcost"})
    )
    ranged = [
        e.model_copy(
            update={
                "interval": Interval(
                    lo=e.value - 0.05,
                    hi=e.value + 0.1,
                    level=0.95,
                    scheme="images_within_class",
                    n_boot=1000,
                )
            }
        )
        for e in record.scores
    ]
    build_site([record.model_copy(update={"scores": ranged})], tmp_path / "site")
    html = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text()
    assert '50.0<span class="ci">45.0–60.0</span>' in html
    assert '1.25<span class="ci">1.20–1.35</span>' in html
    assert 'title="95% bootstrap interval (images_within_class, 1000 samples)"' in html


def test_leakage_badge_lists_overlapping_test_classes(tmp_path: Path) -> None:
    audit = {
        "overlap": [{"class": "n02129165", "name": "<b>lion</b>", "via": ["n02129165"]}],
        "n_overlap": 1,
        "n_test": 10,
        "n_not_wordnet": 0,
        "match": "exact",
        "source": "ilsvrc2012",
    }
    record = make_record("a", zsl={"top1": 0.5}).model_copy(update={"leakage": audit})
    build_site([record], tmp_path / "site")
    page = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text()
    index = (tmp_path / "site" / "index.html").read_text()
    badge = "leakage: 1 of 10 test classes seen in pre-training"
    assert badge in page and badge in index
    assert "&lt;b&gt;lion&lt;/b&gt; (n02129165)" in page and "<b>lion" not in page
    assert "backbone pre-trained on ilsvrc2012" in page
    clean = make_record("a", zsl={"top1": 0.5}).model_copy(
        update={"leakage": {**audit, "overlap": [], "n_overlap": 0}}
    )
    build_site([clean], tmp_path / "clean")
    assert "leakage" not in (tmp_path / "clean" / "index.html").read_text()
    broken = make_record("a", zsl={"top1": 0.5}).model_copy(
        update={"leakage": {"error": "no lists", "source": "ilsvrc2012"}}
    )
    build_site([broken], tmp_path / "broken")
    assert "leakage audit unavailable" in (tmp_path / "broken" / "index.html").read_text()
