"""`zsl doctor`, and every missing input named at once (issue 29, item 8).

Doctor prints one line per input and optional component (state, where it looked, how to fix),
found by the functions the commands use, and exits 1 only when a required one is missing. A
command that needs several inputs (a spec's raw data, its standard split's classes, the CUB
taxonomy, the leakage audit's ImageNet lists and WordNet) names every missing one in one error.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.audit import AuditInputsMissing, plan_audit
from harness.cli.main import COMMANDS, app
from harness.core.errors import HarnessError
from harness.hierarchy.class_sets import imagenet_lists_dir
from harness.hierarchy.wordnet import open_wordnet
from harness.spec import load_spec
from tests.conftest import SPECS, WORDNET_DIR

runner = CliRunner()
CUB_SS = SPECS / "xlsa17" / "cub-ss.yaml"


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with an xlsa17 folder holding aPY's split files only, and nothing else: no
    ImageNet lists, no WordNet (its variable names a folder that does not exist), no CUB
    taxonomy, no ImageNet features."""
    release = tmp_path / "xlsa17"
    (release / "APY").mkdir(parents=True)
    (release / "APY" / "att_splits.mat").write_bytes(b"")
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(release))
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(tmp_path / "no-wordnet"))
    for name in ("ZSL_IMAGENET_DIR", "ZSL_CUB_TAXONOMY_DIR", "ZSL_IMAGENET_FEATURES"):
        monkeypatch.delenv(name, raising=False)
    return release


def _error(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except HarnessError as err:
        return str(err)
    raise AssertionError("no error")


def test_doctor_is_a_command_with_one_line_of_help() -> None:
    assert COMMANDS["doctor"].target == "harness.cli.doctor:doctor"
    assert "\n" not in COMMANDS["doctor"].help


def test_doctor_prints_every_input_and_exits_0_when_the_required_ones_are_here(
    bare: Path, isolated_home: Path, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    lists = _error(imagenet_lists_dir)
    wordnet = _error(open_wordnet)
    assert lines[1:4] == [
        "required",
        f"  ok       ZSL_HOME: $ZSL_HOME={isolated_home}, writable",
        f"  ok       store: SQLite file {isolated_home / 'zsl.sqlite3'} ($ZSL_DATABASE_URL is not"
        " set): needs ZSL_HOME",
    ]
    assert lines[4] == "optional"
    assert lines[5:11] == [
        f"  ok       xlsa17 release: $ZSL_XLSA17_DIR={bare}: APY (att_splits.mat)",
        "  missing  CUB taxonomy: $ZSL_CUB_TAXONOMY_DIR is not set (used by the CUB specs'"
        " hierarchy); fix: set ZSL_CUB_TAXONOMY_DIR to the Wikispecies CUB taxonomy folder"
        " (specs/xlsa17/README.md)",
        "  missing  ImageNet lists: $ZSL_IMAGENET_DIR is not set (used by the leakage audit and"
        f" the ImageNet specs); fix: {lists}",
        "  missing  ImageNet features: $ZSL_IMAGENET_FEATURES is not set (used by the ImageNet"
        " specs); fix: set ZSL_IMAGENET_FEATURES to your feature folder (features.npy,"
        " labels.npy, ...; see specs/imagenet/README.md), or data.params.features_dir in the spec",
        f"  missing  WordNet 3.0: $ZSL_WORDNET_DIR={tmp_path / 'no-wordnet'}; fix: {wordnet}",
        "  missing  WordNet lexnames: not looked for: no WordNet found",
    ]
    names = [re.sub(r"^  \S+ +([^:]+):.*", r"\1", line) for line in lines[11:-1]]
    assert names == [
        "bubblewrap (runner 'sandbox')",
        "container engine",
        "worker image",
        "GPUs",
        "extra 'methods'",
        "extra 'features'",
        "extra 'postgres'",
        "extra 'ray'",
        "chromium (browser test)",
    ]
    assert re.fullmatch(r"every required input is here \(\d+ optional missing\)", lines[-1])


def test_doctor_exits_1_naming_each_missing_required_input(
    bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ZSL_HOME", str(blocker / "home"))
    monkeypatch.setenv("ZSL_DATABASE_URL", "postgresql://zsl:s3cret@127.0.0.1:1/leaderboard")
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[2] == (
        f"  missing  ZSL_HOME: $ZSL_HOME={blocker / 'home'}: {blocker} is not a writable folder;"
        " fix: set ZSL_HOME to a writable folder (benchmarks, downloads and logs go there)"
    )
    assert lines[3].startswith(
        "  missing  store: $ZSL_DATABASE_URL=postgresql://zsl:***@127.0.0.1:1/leaderboard:"
        " cannot connect ("
    )
    assert lines[3].endswith(
        "; fix: start the database server, or fix ZSL_DATABASE_URL (server, user, password,"
        " database)"
    )
    assert "s3cret" not in result.output
    assert lines[-1] == "missing required: ZSL_HOME, store"


def _cub_ss_missing(bare: Path) -> str:
    """The one error naming all four inputs cub-ss needs and the bare machine lacks."""
    spec = load_spec(CUB_SS)
    with pytest.raises(AuditInputsMissing) as audit:
        plan_audit(spec)
    lists, wordnet = _error(imagenet_lists_dir), _error(open_wordnet)
    assert f"2 inputs are missing: (1) {lists}; (2) {wordnet}." in str(audit.value)
    return (
        f"{CUB_SS}: xlsa17-cub-ss v1 needs 4 inputs this machine lacks:\n"
        f"  - xlsa17 CUB release ($ZSL_XLSA17_DIR is {bare}; {bare / 'CUB'} lacks"
        " att_splits.mat, res101.mat): To work offline, unpack xlsa17.zip and set"
        " ZSL_XLSA17_DIR to the folder that holds CUB/ (its att_splits.mat and res101.mat), or"
        " set data.params.path in the spec; data.params.mirror names a folder or URL holding a"
        " copy of xlsa17.zip.\n"
        f"  - standard split classes (data.params.test_classes): {CUB_SS}: the standard split"
        " of CUB needs data.params.test_classes, its unseen classes (xlsa17 names), which the"
        " xlsa17 release does not ship and its files cannot give. CUB's standard split holds"
        " out the 50 test classes of Akata et al. (ALE, TPAMI 2016; SJE, CVPR 2015), the split"
        " GBU Table I reports (150 seen + 50 unseen); its testclasses.txt is published with"
        " Reed et al.'s CUB data (CVPR 2016, cvpr2016_cub), in the xlsa17 spelling"
        " ('001.Black_footed_Albatross'): list them there.\n"
        "  - CUB taxonomy ($ZSL_CUB_TAXONOMY_DIR is not set): set ZSL_CUB_TAXONOMY_DIR (or"
        " data.params.taxonomy_path) to the Wikispecies CUB taxonomy folder\n"
        f"  - leakage audit inputs (ilsvrc2012 and WordNet): {audit.value}\n"
    )


@pytest.mark.parametrize(
    "command", [["data", "prepare"], ["spec", "describe"]], ids=["data prepare", "spec describe"]
)
def test_a_command_names_every_missing_input_at_once(bare: Path, command: list[str]) -> None:
    result = runner.invoke(app, [*command, str(CUB_SS)])
    assert result.exit_code == 1
    assert result.output == f"error: {_cub_ss_missing(bare)}"


def test_doctor_spec_lists_what_the_spec_needs(bare: Path) -> None:
    result = runner.invoke(app, ["doctor", "--spec", str(CUB_SS)])
    assert result.exit_code == 1
    at = result.output.splitlines().index(f"required by {CUB_SS}")
    shown = result.output.splitlines()[at + 1 : at + 5]
    assert [re.sub(r"^  (\S+) +([^:(]+?)[:(].*", r"\1 \2", line) for line in shown] == [
        "missing xlsa17 CUB release",
        "missing standard split classes",
        "missing CUB taxonomy",
        "missing leakage audit inputs",
    ]
    assert result.output.splitlines()[-1] == (
        "missing required: xlsa17 CUB release, standard split classes, CUB taxonomy, leakage"
        " audit inputs"
    )


@pytest.mark.skipif(not (WORDNET_DIR / "data.noun").is_file(), reason="no WordNet dict directory")
def test_doctor_tells_a_wordnet_without_lexnames_from_no_wordnet(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debian's wordnet-base lacks the lexnames file NLTK needs: WordNet is found, its lexnames
    not, and the fix names the variable that points at one."""
    if (WORDNET_DIR / "lexnames").is_file():
        pytest.skip("this WordNet dict directory has its lexnames file")
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(WORDNET_DIR))
    monkeypatch.delenv("ZSL_WORDNET_LEXNAMES", raising=False)
    lines = runner.invoke(app, ["doctor"]).output.splitlines()
    assert f"  ok       WordNet 3.0: $ZSL_WORDNET_DIR={WORDNET_DIR}" in lines
    assert (
        f"  missing  WordNet lexnames: none in {WORDNET_DIR}, $ZSL_WORDNET_LEXNAMES is not set;"
        f" fix: {_error(open_wordnet)}"
    ) in lines
