"""Reported values beside the runs (issue 29, item 9): the number a paper reports, its source,
and the difference only where the run used the verified release; never in a ranking."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.records import RunRecord
from harness.results.reported import ReportedValue, load_reported
from harness.site import build_site
from harness.site.model import plan_site
from harness.site.reported import reported_beside
from tests.site.provenance import RELEASE, SYNTHETIC, with_data
from tests.site.test_site import scan
from tests.site_records import make_record

PAPER = """format: zsl-reported/1
paper: "Doe, Roe. A Paper. Venue 2020"
short: Doe 2020
url: https://example.org/paper
values:
  - {submission: ale, method: ALE, benchmark: cub-demo, setting: zsl, metric: top1,
     percent: 50.0, table: Table 3, transcribed_from: the PDF}
  - {submission: ale, method: ALE, benchmark: cub-demo, setting: gzsl, metric: H,
     percent: 30.0, table: Table 4, transcribed_from: the PDF}
  - {submission: ale, method: ALE, benchmark: awa2, setting: zsl, metric: top1,
     percent: 60.0, table: Table 3, transcribed_from: the PDF}
  - {submission: sje, method: SJE, benchmark: cub-demo, setting: zsl, metric: top1,
     percent: 70.0, table: Table 3, transcribed_from: the PDF}
"""


def runs() -> list[RunRecord]:
    """ale and devise on cub-demo (a verified release), ale on awa2 (synthetic data)."""
    return [
        *with_data(
            [
                make_record("ale", zsl={"top1": 0.5512}, gzsl={"H": 0.4}, interval=0.01),
                make_record("devise", zsl={"top1": 0.6}, gzsl={"H": 0.5}, minutes=1),
            ],
            RELEASE,
        ),
        *with_data(
            [
                make_record(
                    "ale", benchmark="awa2", zsl={"top1": 0.7}, benchmark_hash="sha256:" + "9" * 64
                )
            ],
            SYNTHETIC,
        ),
    ]


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> list[ReportedValue]:
    folder = tmp_path_factory.mktemp("reported")
    (folder / "doe.yaml").write_text(PAPER, encoding="utf-8")
    return load_reported(folder)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, reported: list[ReportedValue]) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(runs(), out, reported=reported)
    return out


def test_the_difference_only_where_the_run_used_the_verified_release(
    reported: list[ReportedValue],
) -> None:
    model = plan_site(runs(), reported)
    cub, awa2 = (next(b for b in model.benchmarks if b.id == i) for i in ("cub-demo", "awa2"))
    beside = reported_beside(cub, model.reported)
    # sje reported, but no sje run: nothing to stand beside; devise: nothing reported
    assert [(b.key, b.column.setting, b.column.metric) for b in beside] == [
        ("ale@1.0", "zsl", "top1"),
        ("ale@1.0", "gzsl", "H"),
    ]
    assert beside[0].difference == pytest.approx(5.12)
    assert (beside[0].difference_text, beside[1].difference_text) == ("+5.1 pp", "+10.0 pp")
    assert beside[0].reported_text == "50.0%" and beside[0].reproduced_text == "55.1%"
    (synthetic,) = reported_beside(awa2, model.reported)
    assert synthetic.difference is None and synthetic.difference_text == ""
    assert synthetic.why_not == (
        "not compared: the run did not use the verified release (synthetic data)"
    )
    assert reported_beside(cub, model.reported, key="devise@1.0") == []
    unrecorded = plan_site(with_data(runs()[:1], None), reported)
    (item, _) = reported_beside(unrecorded.benchmarks[0], unrecorded.reported)
    assert item.why_not.endswith("(source not recorded)")


def test_the_benchmark_page_shows_them_apart_from_the_ranking(site: Path) -> None:
    page = scan(site / "benchmarks" / "cub-demo-v1.html")
    assert page.tables["table-reported-zsl"] == [
        [
            "ale 1.0",
            "top1 ↑",
            "50.0%",
            "55.1%",
            "+5.1 pp",
            "Doe 2020, Table 3 (ALE) papertranscribed from the PDF",
        ]
    ]
    assert page.tables["table-reported-gzsl"][0][2:5] == ["30.0%", "40.0%", "+10.0 pp"]
    # the score table and its ranking hold the runs only
    assert [r[2].split()[0] for r in page.tables["table-zsl"]] == ["devise", "ale"]
    html = (site / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    assert '<a href="https://example.org/paper" rel="nofollow noopener noreferrer">' in html
    with (site / "benchmarks" / "cub-demo-v1-zsl-reported.csv").open(encoding="utf-8") as handle:
        (row,) = csv.DictReader(handle)
    assert (row["reported_percent"], row["paper"], row["table"]) == (
        "50.0",
        "Doe, Roe. A Paper. Venue 2020",
        "Table 3",
    )
    assert float(row["reproduced"]) == pytest.approx(55.12)
    assert float(row["difference_pp"]) == pytest.approx(5.12) and row["not_compared"] == ""
    awa2 = scan(site / "benchmarks" / "awa2-v1.html").tables["table-reported-zsl"]
    assert awa2[0][4].startswith("not compared: the run did not use the verified release")


def test_the_submission_page_and_results_json_carry_them(site: Path) -> None:
    rows = scan(site / "submissions" / "ale@1.0.html").tables["bench-cub-demo-v1"]
    assert rows[0][-1] == "50.0%this run +5.1 ppDoe 2020, Table 3"
    assert rows[1][-1] == "30.0%this run +10.0 ppDoe 2020, Table 4"
    awa2 = scan(site / "submissions" / "ale@1.0.html").tables["bench-awa2-v1"]
    assert awa2[0][-1] == "60.0%not comparedDoe 2020, Table 3"
    with (site / "submissions" / "ale@1.0.csv").open(encoding="utf-8") as handle:
        data = {(r["benchmark"], r["metric"]): r for r in csv.DictReader(handle)}
    assert data["cub-demo", "top1"]["reported_in"] == "Doe 2020, Table 3"
    assert float(data["cub-demo", "top1"]["difference_pp"]) == pytest.approx(5.12)
    assert (
        data["awa2", "top1"]["difference_pp"] == ""
        and data["awa2", "top1"]["reported_percent"] == "60.0"
    )
    results = json.loads((site / "results.json").read_text(encoding="utf-8"))
    (cub,) = [b for b in results["benchmarks"] if b["id"] == "cub-demo"]
    assert [(r["submission"], r["metric"], r["reported_percent"]) for r in cub["reported"]] == [
        ("ale", "top1", 50.0),
        ("ale", "H", 30.0),
    ]
    assert cub["reported"][0]["difference_pp"] == pytest.approx(5.12)
    # reported values rank nothing: the ranking lists the two runs
    (zsl, _) = cub["settings"]
    assert [r["submission"] for r in zsl["ranking"]] == ["devise", "ale"]


def test_without_reported_values_there_is_no_column(tmp_path: Path) -> None:
    build_site(runs(), tmp_path / "site")
    html = (tmp_path / "site" / "submissions" / "ale@1.0.html").read_text(encoding="utf-8")
    assert "reported-cell" not in html and "Reported" not in html
    assert not list((tmp_path / "site" / "benchmarks").glob("*-reported.csv"))
