"""The robustness page: scores on each validation split of a benchmark family (GBU Fig. 3) and
the rank matrix over every family member (GBU Fig. 4), checked against hand-computed numbers."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from harness.records import RunRecord
from harness.results.records_io import read_records
from harness.site.builder import build_site
from harness.site.model import plan_site
from harness.site.robustness import (
    PAGE,
    families,
    rank_counts,
    robustness_tables,
    spread,
)
from tests.conftest import REPO
from tests.site.provenance import with_data
from tests.site.test_site import check_links, page, scan
from tests.site_records import XSS_NAME, hostile_copy, make_record

AWA2 = "xlsa17-awa2-ps"
CUB = "xlsa17-cub-ps"
MEMBERS = {"val1": "", "val2": "-val2", "val3": "-val3"}

#: ZSL top-1 per submission, family and member; None: no run there.
ZSL: dict[str, dict[str, tuple[float | None, float | None, float | None]]] = {
    # sje ranks best, ale second, conse (two members missing) last: names sort otherwise
    "sje": {AWA2: (0.60, 0.50, 0.55), CUB: (0.30, 0.35, 0.20)},
    "ale": {AWA2: (0.50, 0.50, 0.52), CUB: (0.30, 0.25, 0.40)},
    "conse": {AWA2: (0.40, None, 0.46), CUB: (0.10, 0.45, None)},
    "evil": {AWA2: (0.90, 0.80, 0.85), CUB: (None, None, None)},  # hostile and transductive
}
#: GZSL H on the AWA2 family's first two members only.
GZSL = {"sje": (0.40, 0.35), "ale": (0.30, 0.45)}


def family_records() -> list[RunRecord]:
    records = []
    for name, by_family in ZSL.items():
        for family, values in by_family.items():
            for (member, suffix), value in zip(MEMBERS.items(), values, strict=True):
                if value is None:
                    continue
                gzsl = None
                if family == AWA2 and name in GZSL and member != "val3":
                    gzsl = {"H": GZSL[name][int(member[-1]) - 1]}
                record = make_record(
                    name,
                    benchmark=family + suffix,
                    zsl={"top1": value},
                    gzsl=gzsl,
                    interval=0.02,
                    family=family,
                    family_member=member,
                )
                records.append(hostile_copy(record) if name == "evil" else record)
    # a family with one member in the records is no family to compare: left out
    records.append(
        make_record(
            "sje",
            benchmark="xlsa17-sun-ps",
            zsl={"top1": 0.6},
            family="xlsa17-sun-ps",
            family_member="val1",
        )
    )
    return with_data(records)


def keyed(name: str) -> str:
    return f"{name}@1.0"


def test_families_come_from_the_records_with_two_members_at_least() -> None:
    found = families(plan_site(family_records()))
    assert [f.id for f in found] == [CUB, AWA2]  # GBU's dataset order (CUB before AWA2)
    awa2 = found[1]
    assert [(m.label, m.bench.id, m.main) for m in awa2.members] == [
        ("val1", AWA2, True),
        ("val2", AWA2 + "-val2", False),
        ("val3", AWA2 + "-val3", False),
    ]
    assert families(plan_site([make_record("a", zsl={"top1": 0.5})])) == []


def test_spread_is_the_range() -> None:
    assert spread([0.5, 0.56, 0.53]) == pytest.approx(0.06)
    assert spread([0.5]) is None and spread([]) is None


def test_table_values_by_hand() -> None:
    model = plan_site(family_records())
    zsl, gzsl = robustness_tables(model)
    assert (zsl.setting, gzsl.setting) == ("zsl", "gzsl")
    assert [g.family.id for g in zsl.groups] == [CUB, AWA2]
    # rows: the inductive runs by the rank matrix (sje, ale, conse), then the transductive one
    assert [r.sub.name for r in zsl.rows] == ["sje", "ale", "conse", XSS_NAME]
    assert [r.transductive for r in zsl.rows] == [False, False, False, True]
    sje, ale, conse, evil = (r.cells[1] for r in zsl.rows)  # the AWA2 group
    assert sje.mean == pytest.approx(0.55) and sje.spread == pytest.approx(0.10)
    assert (sje.main_text, sje.main_interval, sje.coverage) == ("60.0", "58.0–62.0", "3/3")
    assert ale.mean == pytest.approx(1.52 / 3) and ale.spread == pytest.approx(0.02)
    assert (ale.mean_text, ale.spread_text) == ("50.7", "2.0")
    # conse has no val2 run: "—", left out of the mean and spread, counted 2 of 3
    assert [c.text for c in conse.members] == ["40.0", "—", "46.0"]
    assert conse.mean == pytest.approx(0.43) and conse.spread == pytest.approx(0.06)
    assert conse.coverage == "2/3" and conse.main is not None and conse.main.value == 0.40
    assert evil.mean == pytest.approx(0.85) and evil.spread == pytest.approx(0.10)
    conse_cub = zsl.rows[2].cells[0]  # val3 missing; main (val1) present
    assert [c.text for c in conse_cub.members] == ["10.0", "45.0", "—"]
    assert conse_cub.spread == pytest.approx(0.35) and conse_cub.coverage == "2/3"
    evil_cub = zsl.rows[3].cells[0]  # no run on the family at all
    assert (evil_cub.coverage, evil_cub.mean_text, evil_cub.spread_text) == ("0/3", "—", "—")
    assert (evil_cub.main_text, evil_cub.main_interval) == ("—", "")
    # GZSL: only the AWA2 family's val1 and val2 have H; val3 (no GZSL runs) is no column
    assert [g.family.id for g in gzsl.groups] == [AWA2]
    assert [m.label for m in gzsl.groups[0].members] == ["val1", "val2"]
    assert [r.sub.name for r in gzsl.rows] == ["ale", "sje"]  # mean ranks tie: by name
    ale_h = gzsl.rows[0].cells[0]
    assert ale_h.mean == pytest.approx(0.375) and ale_h.spread == pytest.approx(0.15)
    assert ale_h.coverage == "2/2"


def test_rank_matrix_counts_by_hand() -> None:
    # ranks (ties averaged) on AWA2 val1..3 and CUB val1..3, inductive runs only:
    #   sje   1, 1.5, 1 | 1.5, 2, 2    -> counts rank1 = 1+.5+1+.5 = 3, rank2 = 3, rank3 = 0
    #   ale   2, 1.5, 2 | 1.5, 3, 1    -> rank1 = .5+.5+1 = 2, rank2 = 1+.5+1+.5 = 3, rank3 = 1
    #   conse 3,  -,  3 |  3,  1, -    -> rank1 = 1, rank3 = 3, over 4 benchmarks
    model = plan_site(family_records())
    zsl, gzsl = rank_counts(model)
    assert (zsl.setting, zsl.transductive) == ("zsl", False)  # one transductive run: no matrix
    assert len(zsl.benchmarks) == 6  # xlsa17-sun-ps (a one-member family) is not counted
    assert [r.sub.name for r in zsl.rows] == ["sje", "ale", "conse"]
    assert [r.counts for r in zsl.rows] == [(3.0, 3.0, 0.0), (2.0, 3.0, 1.0), (1.0, 0.0, 3.0)]
    assert [r.n_covered for r in zsl.rows] == [6, 6, 4]
    assert [r.mean_rank for r in zsl.rows] == pytest.approx([9 / 6, 11 / 6, 10 / 4])
    assert [r.shades for r in zsl.rows] == [(6, 6, 0), (4, 6, 2), (2, 0, 6)]  # of 3, the peak
    assert [r.counts for r in gzsl.rows] == [(1.0, 1.0), (1.0, 1.0)]
    assert len(gzsl.benchmarks) == 2


def test_a_tie_splits_its_count() -> None:
    records = [
        make_record(
            name, benchmark=f"fam{suffix}", zsl={"top1": value}, family="fam", family_member=member
        )
        for suffix, member, values in (
            ("", "val1", (0.5, 0.5, 0.4)),
            ("-b", "val2", (0.6, 0.3, 0.3)),
        )
        for name, value in zip(("a", "b", "c"), values, strict=True)
    ]
    (matrix,) = rank_counts(plan_site(with_data(records)))
    # val1: a, b tied for 1-2 (1.5 each), c 3; val2: a 1, b and c tied for 2-3 (2.5 each)
    assert [(r.sub.name, r.counts) for r in matrix.rows] == [
        ("a", (1.5, 0.5, 0.0)),
        ("b", (0.5, 1.0, 0.5)),
        ("c", (0.0, 0.5, 1.5)),
    ]


@pytest.fixture(scope="module")
def family_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("robustness") / "site"
    build_site(family_records(), site)
    return site


def test_page_renders_tables_and_escapes_hostile_names(family_site: Path) -> None:
    html = page(family_site, PAGE)
    assert XSS_NAME not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<svg onload" not in html
    assert "Counted over 6 benchmarks" in html
    assert "highest minus lowest member score" in html
    tables = scan(family_site / PAGE).tables
    rows = tables["table-robustness-zsl"]
    sje = next(r for r in rows if r and r[0].startswith("sje"))
    # CUB group: val1..3, mean, spread, main (its interval in a span after it), members; then
    # the AWA2 group
    assert sje[1:8] == ["30.0", "35.0", "20.0", "28.3", "15.0", "30.028.0–32.0", "3/3"]
    assert sje[8:] == ["60.0", "50.0", "55.0", "55.0", "10.0", "60.058.0–62.0", "3/3"]
    counts = tables["table-rank-counts-zsl"]
    assert [r[1:] for r in counts] == [
        ["6/6", "1.50", "3", "3", "0"],
        ["6/6", "1.83", "2", "3", "1"],
        ["4/6", "2.50", "1", "0", "3"],
    ]
    assert 'class="num count heat-6"' in html and "style=" not in html


def scan_row_cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_files_hold_the_numbers(family_site: Path) -> None:
    rows = scan_row_cells((family_site / "robustness-zsl.csv").read_text(encoding="utf-8"))
    header = rows[0]
    conse = next(r for r in rows if r[0] == "conse")
    cell = dict(zip(header, conse, strict=True))
    assert cell[f"{AWA2} val2"] == "" and cell[f"{AWA2} val3"] == "0.46"
    assert cell[f"{AWA2} members_scored"] == "2" and cell[f"{AWA2} members"] == "3"
    assert float(cell[f"{AWA2} mean"]) == pytest.approx(0.43)
    assert float(cell[f"{AWA2} spread"]) == pytest.approx(0.06)
    assert (cell[f"{AWA2} main"], cell[f"{AWA2} main_lo"]) == ("0.4", "0.38")
    evil = next(r for r in rows if r[0].startswith("'<script") or r[0] == XSS_NAME)
    assert dict(zip(header, evil, strict=True))["transductive"] == "true"
    ranks = scan_row_cells((family_site / "rank-counts-zsl.csv").read_text(encoding="utf-8"))
    assert ranks[0][-3:] == ["rank_1", "rank_2", "rank_3"]
    assert [r[0] for r in ranks[1:]] == ["sje", "ale", "conse"]
    assert ranks[2][3:] == ["6", "6", str(11 / 6), "2.0", "3.0", "1.0"]
    assert (family_site / "robustness-gzsl.csv").is_file()
    assert (family_site / "rank-counts-gzsl.csv").is_file()


@pytest.mark.slow  # up to 9 s in `make test-fast` on a busy 2-core machine (issue 28)
def test_links_from_nav_across_and_member_pages_resolve(family_site: Path) -> None:
    assert check_links(family_site) > 100
    assert 'href="robustness.html"' in page(family_site, "index.html")  # the nav
    assert 'href="../robustness.html"' in page(family_site, "submissions/sje@1.0.html")
    assert "robustness across validation splits</a>" in page(family_site, "across.html")
    member = page(family_site, f"benchmarks/{AWA2}-val2-v1.html")
    assert f'href="../robustness.html#family-{AWA2}"' in member
    assert "<code><bdi>val2</bdi></code>, one of the 3 validation variants" in member
    # a one-member family's benchmark links nowhere
    assert "robustness.html#" not in page(family_site, "benchmarks/xlsa17-sun-ps-v1.html")


def test_demo_site_has_no_robustness_page(tmp_path: Path) -> None:
    records = read_records(REPO / "leaderboard" / "results")
    assert records and all(r.benchmark.family is None for r in records)
    site = tmp_path / "site"
    build_site(records, site)
    assert not (site / PAGE).exists()
    assert not list(site.glob("robustness-*.csv")) and not list(site.glob("rank-counts-*.csv"))
    for path in site.rglob("*.html"):
        assert "robustness.html" not in path.read_text(encoding="utf-8"), path
