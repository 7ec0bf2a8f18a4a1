"""Tables across benchmarks (GBU Table III), CSV files of every table, the ranking rule with
partial coverage, and score-table column groups."""

from __future__ import annotations

import csv
import io
import math
from hashlib import sha256
from pathlib import Path

import pytest

from harness.metrics.comparison import rank_matrix
from harness.records import RunRecord
from harness.site import build_site
from harness.site.cross import placement
from harness.site.csv_tables import CsvTable, csv_bytes, csv_text
from harness.site.model import Column
from harness.site.pages.benchmark import MAX_DEFAULT_COLUMNS, column_groups
from tests.site.provenance import RELEASE, with_data
from tests.site.test_site import check_links, page, scan
from tests.site_records import make_record, synthetic_records

GZSL_FUNCTIONS = {
    "u": "gzsl_unseen_accuracy",
    "s": "gzsl_seen_accuracy",
    "H": "gzsl_harmonic_mean",
}
INJECTION = '=HYPERLINK("http://evil.example","x")'


def read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def xlsa17_records() -> list[RunRecord]:
    """Three xlsa17 benchmarks; ale ran all three, sje two, a formula-named run only SUN PS.

    ZSL top-1 ranks: SUN PS: formula 1, ale 2; CUB SS: ale 1, sje 2; CUB PS: sje 1, ale 2.
    Means: ale 5/3 over 3, sje 1.5 over 2, formula 1.0 over 1 -- coverage first: ale, sje,
    formula (by mean alone it would be the reverse). GZSL H ranks: CUB PS ale 1, sje 2; SUN PS
    ale 1: ale 1.0 over 2, sje 2.0 over 1.
    """

    def bench(name: str, benchmark: str, **scores: dict[str, float]) -> RunRecord:
        return make_record(
            name,
            benchmark=benchmark,
            benchmark_hash="sha256:" + sha256(benchmark.encode()).hexdigest(),
            primary={"zsl": "top1", "gzsl": "H"},
            functions={"top1": "per_class_top_k_accuracy", **GZSL_FUNCTIONS},
            interval=0.01,
            **scores,  # type: ignore[arg-type]
        )

    return [
        bench("ale", "xlsa17-cub-ss", zsl={"top1": 0.549}),
        bench(
            "ale",
            "xlsa17-cub-ps",
            zsl={"top1": 0.499},
            gzsl={"u": 0.237, "s": 0.628, "H": 0.344},
        ),
        bench(
            "ale",
            "xlsa17-sun-ps",
            zsl={"top1": 0.581},
            gzsl={"u": 0.219, "s": 0.333, "H": 0.264},
        ),
        bench("sje", "xlsa17-cub-ss", zsl={"top1": 0.539}),
        bench(
            "sje",
            "xlsa17-cub-ps",
            zsl={"top1": 0.539},
            gzsl={"u": 0.235, "s": 0.592, "H": 0.336},
        ),
        bench(INJECTION, "xlsa17-sun-ps", zsl={"top1": 0.6}),
    ]


@pytest.fixture(scope="module")
def xlsa17_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("xlsa17") / "site"
    build_site(with_data(xlsa17_records(), RELEASE), out)
    return out


# -- the ranking rule ---------------------------------------------------------------------------


def test_rank_matrix_puts_coverage_before_mean_rank() -> None:
    # x: solo and pair tie at 0.8 (1.5 each), c 3. y: c 1, d 2, pair 3.
    # Means: solo 1.5 over 1, pair (1.5 + 3) / 2 = 2.25 over 2, c (3 + 1) / 2 = 2.0, d 2.0 over 1.
    # By mean alone solo (1.5) would lead; coverage first: c, pair (2 each), solo, d (1 each).
    scores = {
        "x": {"solo": 0.8, "pair": 0.8, "c": 0.3},
        "y": {"c": 0.9, "d": 0.8, "pair": 0.2},
    }
    r = rank_matrix(scores)
    assert r.submissions == ("c", "pair", "solo", "d")
    assert r.n_benchmarks.tolist() == [2, 2, 1, 1]
    assert r.mean_rank.tolist() == [2.0, 2.25, 1.5, 2.0]
    assert r.missing == (("solo", "y"), ("d", "x"))


def test_index_shows_coverage_and_states_the_rule(tmp_path: Path) -> None:
    def record(name: str, benchmark: str, value: float) -> RunRecord:
        digit = "1" if benchmark == "x" else "2"
        return make_record(
            name, zsl={"top1": value}, benchmark=benchmark, benchmark_hash="sha256:" + digit * 64
        )

    records = [
        record("solo", "x", 0.8),
        record("pair", "x", 0.8),
        record("c", "x", 0.3),
        record("c", "y", 0.9),
        record("d", "y", 0.8),
        record("pair", "y", 0.2),
    ]
    build_site(with_data(records), tmp_path / "site")
    index = scan(tmp_path / "site" / "index.html")
    assert index.tables["table-ranks-zsl"] == [
        ["c 1.0", "2.00", "2/2", "3", "1"],
        ["pair 1.0", "2.25", "2/2", "1.5", "3"],
        ["solo 1.0", "1.50", "1/2", "1.5", "—"],
        ["d 1.0", "2.00", "1/2", "—", "2"],
    ]
    html = page(tmp_path / "site", "index.html")
    assert "ordered first by how many benchmarks they cover" in html
    rows = read_csv(tmp_path / "site" / "index-ranks-zsl.csv")
    assert rows[0] == [
        "submission",
        "version",
        "transductive",
        "benchmarks_covered",
        "benchmarks",
        "mean_rank",
        "x v1",
        "y v1",
    ]
    assert rows[3] == ["solo", "1.0", "false", "1", "2", "1.5", "1.5", ""]


# -- the cross-benchmark table --------------------------------------------------------------------


def test_placement_of_xlsa17_and_other_benchmarks() -> None:
    assert placement("xlsa17-awa2-ss").split == "SS"
    assert placement("xlsa17-apy-ps").dataset == "aPY"
    assert placement("xlsa17-cub-ps-val3").split == "PS val3"
    assert placement("xlsa17-sun-ps").order < placement("xlsa17-cub-ss").order  # GBU order
    assert placement("xlsa17-cub-ss").order < placement("xlsa17-cub-ps").order
    other = placement("imagenet-literature-2-hops")
    assert (other.family, other.dataset, other.split) == ("imagenet", "", "")
    assert placement("xlsa17-unknown").family == "xlsa17"  # not a split name: its own group


def test_cross_zsl_table_has_datasets_splits_and_the_fair_order(xlsa17_site: Path) -> None:
    across = scan(xlsa17_site / "across.html")
    assert across.headers["table-cross-zsl-xlsa17"] == [
        "Submission",
        "Benchmarks",
        "Mean rank",
        "PS",
        "SS verified release",  # two benchmarks under one group: each column says its data
        "PS verified release",
    ]
    assert across.tables["table-cross-zsl-xlsa17"] == [
        ["ale 1.0", "3/3", "1.67", "58.1", "54.9", "49.9"],
        ["sje 1.0", "2/3", "1.50", "—", "53.9", "53.9"],
        [f"{INJECTION} 1.0", "1/3", "1.00", "60.0", "—", "—"],
    ]
    html = page(xlsa17_site, "across.html")
    # group headers: SUN before CUB (GBU's order), CUB over its two splits
    assert html.index('colspan="1"><bdi>SUN</bdi>') < html.index('colspan="2"><bdi>CUB</bdi>')
    # the best of each column in bold, its interval on hover
    assert (
        '<td class="num best" data-sort="0.6" title="\u2068xlsa17-sun-ps\u2069 v1 \u2068top1\u2069;'
        ' 95% interval 59.0–61.0; best of the column (inductive submissions)"><strong>60.0</strong>'
    ) in html
    # one per ZSL column, and per GZSL group only H's: the primary (never u or s)
    assert html.count('class="num best"') == 3 + 2
    # the name is text, never markup, and the CSV link resolves
    assert "&#34;http://evil.example&#34;" in html and 'href="cross-zsl-xlsa17.csv"' in html
    assert check_links(xlsa17_site) > 20


def test_cross_gzsl_table_has_u_s_h_per_dataset_split(xlsa17_site: Path) -> None:
    across = scan(xlsa17_site / "across.html")
    assert across.headers["table-cross-gzsl-xlsa17"] == [
        "Submission",
        "Benchmarks",
        "Mean rank",
        *("u", "s", "H") * 2,
    ]
    assert across.tables["table-cross-gzsl-xlsa17"] == [
        ["ale 1.0", "2/2", "1.00", "21.9", "33.3", "26.4", "23.7", "62.8", "34.4"],
        ["sje 1.0", "1/2", "2.00", "—", "—", "—", "23.5", "59.2", "33.6"],
    ]
    html = page(xlsa17_site, "across.html")
    assert html.index("<bdi>SUN PS</bdi>") < html.index("<bdi>CUB PS</bdi>")


def test_cross_csv_holds_plain_numbers_and_inert_names(xlsa17_site: Path) -> None:
    rows = read_csv(xlsa17_site / "cross-zsl-xlsa17.csv")
    columns = ["xlsa17-sun-ps v1 top1", "xlsa17-cub-ss v1 top1", "xlsa17-cub-ps v1 top1"]
    assert rows[0] == [
        "submission",
        "version",
        "transductive",
        "benchmarks_covered",
        "benchmarks",
        "mean_rank",
        *(f"{c}{part}" for c in columns for part in ("", "_lo", "_hi", "_data", "_counted")),
    ]
    assert [row[:5] for row in rows[1:]] == [
        ["ale", "1.0", "false", "3", "3"],
        ["sje", "1.0", "false", "2", "3"],
        ["'" + INJECTION, "1.0", "false", "1", "3"],  # a formula made inert
    ]
    mean, *cells = rows[1][5:]
    numbers = [float(v) for i, v in enumerate(cells) if i % 5 < 3]
    assert [float(mean), *numbers] == pytest.approx(
        [5 / 3, 0.581, 0.571, 0.591, 0.549, 0.539, 0.559, 0.499, 0.489, 0.509]
    )
    assert cells[3:5] == ["verified release", "true"]  # the run's data, and that it counts
    assert rows[2][6:11] == ["", "", "", "", ""]  # sje has no SUN PS score: empty cells
    raw = (xlsa17_site / "cross-zsl-xlsa17.csv").read_bytes()
    assert b"\r\n" in raw and b'"\'=HYPERLINK(""http://evil.example"",""x"")"' in raw


def test_cross_table_of_other_families_and_transductive_runs(tmp_path: Path) -> None:
    build_site(with_data(synthetic_records(4, 2)), tmp_path / "site")
    across = scan(tmp_path / "site" / "across.html")
    rows = across.tables["table-cross-zsl-bench"]
    # method-03 declares transductive: listed last, badged, never the best of a column
    assert rows[-1][0] == "method-03 1.0 transductive"
    assert [r[1] for r in rows] == ["2/2"] * 4
    html = page(tmp_path / "site", "across.html")
    assert "<bdi>bench-00 v1</bdi>" in html and "<bdi>bench-01 v2</bdi>" in html
    data = read_csv(tmp_path / "site" / "cross-zsl-bench.csv")
    assert [r[0] for r in data[1:]] == [r[0].split()[0] for r in rows]
    assert data[-1][2] == "true"


# -- CSV files ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("=SUM(A1:A9)", "'=SUM(A1:A9)"),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("@cmd", "'@cmd"),
        ("\t=x", "'\t=x"),
        ("ale", "ale"),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_csv_text_neutralises_formulas(text: str, expected: str) -> None:
    assert csv_text(text) == expected


def test_csv_quotes_commas_quotes_and_newlines_and_keeps_numbers_numbers() -> None:
    table = CsvTable(
        "t.csv",
        ("name", "value", "note"),
        [
            ('say "hi", then', -0.5, "line one\nline two"),
            ("=1+1", math.nan, None),
            ("-x", 3, True),
        ],
    )
    raw = csv_bytes(table).decode("utf-8")
    assert raw.splitlines()[0] == "name,value,note"
    assert raw.split("\r\n")[1] == '"say ""hi"", then",-0.5,"line one\nline two"'
    assert list(csv.reader(io.StringIO(raw, newline=""))) == [
        ["name", "value", "note"],
        ['say "hi", then', "-0.5", "line one\nline two"],  # a negative number stays a number
        ["'=1+1", "", ""],  # NaN and None: empty cells
        ["'-x", "3", "true"],
    ]
    with pytest.raises(ValueError, match=r"Expected rows of 3 cells in t\.csv, but got 1"):
        csv_bytes(CsvTable("t.csv", ("a", "b", "c"), [("x",)]))


def test_every_table_links_a_csv_beside_its_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(with_data(synthetic_records(3, 2)), site)
    for path in [site / "index.html", site / "across.html", *site.glob("benchmarks/*.html")]:
        html = path.read_text(encoding="utf-8")
        assert html.count('<table class="') == html.count('download type="text/csv"'), path
    bench = read_csv(site / "benchmarks" / "bench-00-v1-zsl.csv")
    assert bench[0][:10] == [
        "rank",
        "group",
        "submission",
        "version",
        "transductive",
        "data",
        "counted_across_benchmarks",
        "top1",
        "top1_lo",
        "top1_hi",
    ]
    table = scan(site / "benchmarks" / "bench-00-v1.html").tables["table-zsl"]
    assert [r[2] for r in bench[1:]] == [r[2].split()[0] for r in table]
    assert [r[0] for r in bench[1:]] == [r[0] for r in table]
    sub = read_csv(site / "submissions" / "method-00@1.0.csv")
    assert sub[0][:4] == ["benchmark", "benchmark_version", "setting", "metric"]
    assert len(sub) == 1 + 2 * (11 + 6)  # every score on both benchmarks
    pair = read_csv(site / "compare" / "method-00@1.0--method-01@1.0.csv")
    assert pair[0] == [
        "benchmark",
        "benchmark_version",
        "setting",
        "metric",
        "a",
        "b",
        "a_minus_b",
        "lo",
        "hi",
        "p",
        "better",
    ]
    assert {r[-1] for r in pair[1:]} <= {"method-00 1.0", "method-01 1.0", "tied"}
    assert len(pair) > 10


# -- column groups --------------------------------------------------------------------------------


def _column(function: str, *, primary: bool = False) -> Column:
    return Column(
        setting="zsl",
        metric=function,
        version="1",
        function=function,
        higher_is_better=True,
        percent=True,
        primary=primary,
        versioned=False,
        entries={},
    )


def test_column_groups_hide_hierarchical_first_on_wide_tables() -> None:
    functions = [
        "per_class_top_k_accuracy",
        "per_class_top_k_accuracy",
        *["hierarchical_precision_at_k"] * 4,
        "mistake_severity",
        "darts_area",
        "darts_reward",
    ]
    columns = [_column(f, primary=i == 0) for i, f in enumerate(functions)]
    header, chooser = column_groups(columns)
    assert [(g.id, g.span, g.shown) for g in header] == [
        ("flat", 2, True),
        ("hierarchical", 5, False),
        ("darts", 2, True),
    ]
    assert [(g.id, g.span, g.shown) for g in chooser] == [
        ("flat", 2, True),
        ("hierarchical", 5, False),
        ("darts", 2, True),
    ]
    # a narrow table shows everything; the primary's group is never hidden
    few = [_column("hierarchical_cost", primary=True), _column("per_class_top_k_accuracy")]
    assert all(g.shown for g in column_groups(few)[1])
    many = [_column("hierarchical_cost", primary=True)] * (MAX_DEFAULT_COLUMNS + 2)
    assert all(g.shown for g in column_groups(many)[1])
