"""Reported values (leaderboard/reported/*.yaml): the repository's files, and every way a file
can be wrong, each refused with the file, the line and the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.results.reported import ReportedError, check_reported, load_reported
from harness.spec import Spec, load_spec
from tests.conftest import REPO

REPORTED = REPO / "leaderboard" / "reported"
XLSA17 = REPO / "specs" / "xlsa17"
HEAD = "format: zsl-reported/1\npaper: A. Author. A Paper. Venue 2020\nshort: Author 2020\n"
ENTRY = (
    "  - {submission: eszsl, method: ESZSL, benchmark: xlsa17-awa2-ps, setting: zsl,"
    " metric: top1, percent: 58.6, table: Table III, transcribed_from: the PDF}\n"
)


def _submissions() -> set[str]:
    names = set()
    for manifest in sorted((REPO / "submissions").glob("*/submission.yaml")):
        line = next(
            x for x in manifest.read_text(encoding="utf-8").splitlines() if x.startswith("name:")
        )
        names.add(line.split(":", 1)[1].strip())
    return names


@pytest.fixture(scope="module")
def ps_specs() -> list[Spec]:
    return [load_spec(XLSA17 / f"{d}-ps.yaml") for d in ("apy", "awa1", "awa2", "cub", "sun")]


def _write(folder: Path, text: str, name: str = "paper.yaml") -> Path:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_the_repository_values_are_gbus_and_check_against_the_specs(ps_specs: list[Spec]) -> None:
    values = load_reported(REPORTED)
    check_reported(values, specs=ps_specs, submissions=_submissions())
    # GBU (TPAMI 2019) Table III: ZSL top-1 on the proposed split; Table IV: GZSL u / s / H;
    # seven methods with a submission here, five datasets
    assert len(values) == 7 * 5 * 4
    by_key = {v.key: v for v in values}
    eszsl = by_key["eszsl", "xlsa17-awa1-ps", "zsl", "top1"]
    assert (eszsl.percent, eszsl.table, eszsl.method) == (58.2, "Table III", "ESZSL")
    assert eszsl.transcribed_from.startswith("mvp18/Popular-ZSL-Algorithms")
    assert "Good, the Bad and the Ugly" in eszsl.paper and eszsl.short
    dap = by_key["dap", "xlsa17-sun-ps", "gzsl", "H"]
    assert (dap.percent, dap.table) == (7.2, "Table IV")
    assert by_key["conse", "xlsa17-apy-ps", "gzsl", "seen"].percent == 91.2
    assert {v.submission for v in values} == {
        "ale",
        "conse",
        "dap",
        "devise",
        "eszsl",
        "sae",
        "sje",
    }
    # each value knows its place: the file and the line of its entry
    path, line, _ = eszsl.where.rsplit(":", 2)
    entry = Path(path).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    assert path == str(REPORTED / "gbu-ps.yaml") and "xlsa17-awa1-ps, setting: zsl" in entry
    assert "submission: eszsl" in entry and "percent: 58.2" in entry


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            HEAD + "values:\n  - {submission: eszsl\n",
            ":6: not valid YAML",
        ),
        (
            HEAD + "values:\n" + ENTRY.replace("58.6", "120"),
            ":5: values[0].percent: Input should be less than or equal to 100; got 120",
        ),
        (
            HEAD + "values:\n" + ENTRY.replace("58.6", "-1"),
            ":5: values[0].percent: Input should be greater than or equal to 0; got -1",
        ),
        (
            HEAD + "values:\n" + ENTRY.replace("table:", "tabel:"),
            ":5: values[0].tabel: unknown key 'tabel'. Did you mean 'table'?",
        ),
        (
            HEAD + "values:\n" + ENTRY.replace("setting: zsl", "setting: gzls"),
            ":5: values[0].setting: must be one of",
        ),
        (
            HEAD.replace("zsl-reported/1", "zsl-reported/9") + "values:\n" + ENTRY,
            ":1: format: must be one of 'zsl-reported/1'; got 'zsl-reported/9'",
        ),
        (HEAD + "values: []\n", ":4: values: List should have at least 1 item"),
        (HEAD.replace("short: Author 2020\n", "") + "values:\n" + ENTRY, "short: required key"),
    ],
    ids=["bad YAML", "above 100", "below 0", "unknown key", "setting", "format", "empty", "short"],
)
def test_a_malformed_file_is_refused_naming_file_line_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    folder = _write(tmp_path / "reported", text)
    with pytest.raises(ReportedError) as caught:
        load_reported(folder)
    assert f"{folder / 'paper.yaml'}" in str(caught.value)
    assert message in str(caught.value), str(caught.value)


def test_a_value_reported_twice_is_refused_naming_both_places(tmp_path: Path) -> None:
    folder = _write(tmp_path / "reported", HEAD + "values:\n" + ENTRY + ENTRY.replace("58.6", "60"))
    _write(folder, HEAD + "values:\n" + ENTRY, "other.yaml")
    with pytest.raises(ReportedError) as caught:
        load_reported(folder)
    first, again, other = (
        f"{folder / 'other.yaml'}:5: values[0]",
        f"{folder / 'paper.yaml'}:5: values[0]",
        f"{folder / 'paper.yaml'}:6: values[1]",
    )
    assert str(caught.value) == (
        "2 problems in the reported values:\n"
        f"  {again}: reports eszsl on xlsa17-awa2-ps zsl top1 again (first at {first}); keep one"
        " entry per submission, benchmark, setting and metric\n"
        f"  {other}: reports eszsl on xlsa17-awa2-ps zsl top1 again (first at {first}); keep one"
        " entry per submission, benchmark, setting and metric"
    )


def test_names_the_specs_do_not_know_are_refused(tmp_path: Path, ps_specs: list[Spec]) -> None:
    entries = [
        ENTRY.replace("metric: top1", "metric: top-1"),  # no such key in the spec
        ENTRY.replace("metric: top1", "metric: hcost"),  # a key, but not a proportion
        ENTRY.replace("xlsa17-awa2-ps", "xlsa17-awa3-ps"),
        ENTRY.replace("submission: eszsl", "submission: eszls"),
        ENTRY.replace("xlsa17-awa2-ps, setting: zsl", "zsl-only, setting: gzsl"),
    ]
    folder = _write(tmp_path / "reported", HEAD + "values:\n" + "".join(entries))
    values = load_reported(folder)
    zsl_only = ps_specs[0].model_copy(update={"benchmark": "zsl-only", "settings": ["zsl"]})
    with pytest.raises(ReportedError) as caught:
        check_reported(values, specs=[*ps_specs, zsl_only], submissions={"eszsl", "sae"})
    where = [f"{folder / 'paper.yaml'}:{5 + i}: values[{i}]" for i in range(5)]
    lines = str(caught.value).splitlines()
    assert lines[0] == "5 problems in the reported values:"
    assert lines[1].startswith(
        f"  {where[0]}.metric: xlsa17-awa2-ps (zsl) has no metric 'top-1' (its metrics: top1,"
    )
    assert lines[2] == (
        f"  {where[1]}.metric: 'hcost' (hierarchical_cost) is not a proportion; reported values"
        " are percentages"
    )
    assert lines[3] == f"  {where[2]}.benchmark: no spec declares benchmark 'xlsa17-awa3-ps'"
    assert (
        lines[4]
        == f"  {where[3]}.submission: no submission named 'eszls' (submissions: eszsl, sae)"
    )
    assert lines[5] == (f"  {where[4]}.setting: zsl-only has no setting 'gzsl' (its settings: zsl)")


def test_a_missing_folder_or_a_link_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReportedError, match=r"not a folder of reported values \(\*\.yaml\)$"):
        load_reported(tmp_path / "absent")
    folder = _write(tmp_path / "reported", HEAD + "values:\n" + ENTRY)
    os.symlink(folder / "paper.yaml", folder / "link.yaml")
    with pytest.raises(
        ReportedError, match=r"link\.yaml: a symbolic link; commit the file itself$"
    ):
        load_reported(folder)
