"""``zsl data synthetic-xlsa17``: synthetic features for the real split files (issue 14, item 20).

A newcomer gets a ``res101.mat`` in the release's layout beside the real split files, labelled
synthetic, and the xlsa17 specs run on it end to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import scipy.io as sio
from typer.testing import CliRunner

from harness.cli.main import app
from harness.data.xlsa17 import SYNTHETIC_PREFIX
from harness.results.standing import counted_by_default
from harness.store import load_runs, open_store
from tests.conftest import SPECS, SUBMISSIONS
from tests.xlsa17_fixture import XLSA17

runner = CliRunner()
pytestmark = pytest.mark.skipif(
    not (XLSA17 / "AWA2" / "att_splits.mat").is_file(),
    reason="xlsa17 split files not in shared data",
)


def test_synthetic_features_fit_the_split_files_and_say_what_they_are(tmp_path: Path) -> None:
    out = tmp_path / "synthetic"
    argv = ["data", "synthetic-xlsa17", "--source", str(XLSA17), "--out", str(out)]
    result = runner.invoke(app, [*argv, "--dataset", "APY", "--dim", "8"])
    assert result.exit_code == 0, result.output
    assert f"then: export ZSL_XLSA17_DIR={out}" in result.output
    mat = sio.loadmat(out / "APY" / "res101.mat", squeeze_me=True)
    att = sio.loadmat(out / "APY" / "att_splits.mat", squeeze_me=True)
    n = max(int(att[k].max()) for k in att if k.endswith("_loc"))
    assert mat["features"].shape == (8, n) and mat["labels"].shape == (n,)
    assert all(str(f).startswith(f"{SYNTHETIC_PREFIX}/APY/") for f in mat["image_files"])
    assert "SYNTHETIC features" in (out / "SYNTHETIC.txt").read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--dataset", "IMAGENET"],
            "--dataset 'IMAGENET': not an xlsa17 dataset; choose from AWA1, AWA2, CUB, SUN, APY"
            " (in any case)",
        ),
        (["--dataset", "APY", "--source", "{empty}"], "att_splits.mat not found: --source must"),
    ],
)
def test_wrong_inputs_are_named(tmp_path: Path, extra: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    extra = [e.replace("{empty}", str(tmp_path / "empty")) for e in extra]
    argv = ["data", "synthetic-xlsa17", "--source", str(XLSA17), "--out", str(tmp_path / "o")]
    result = runner.invoke(app, [*argv, *extra])
    assert result.exit_code == 1
    assert message in " ".join(result.output.split())


@pytest.mark.slow
def test_an_xlsa17_spec_runs_end_to_end_on_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "synthetic"
    made = runner.invoke(
        app,
        [
            "data",
            "synthetic-xlsa17",
            "--source",
            str(XLSA17),
            "--out",
            str(out),
            "--dataset",
            "APY",
        ],
    )
    assert made.exit_code == 0, made.output
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(out))
    spec = SPECS / "xlsa17" / "apy-ps.yaml"  # as shipped: 2048-d features, the default
    result = runner.invoke(
        app, ["run", str(SUBMISSIONS / "sae"), "--spec", str(spec), "--runner", "local"]
    )
    assert result.exit_code == 0, result.output
    # The score says it is one of synthetic data, wherever it is shown (issue 29, item 1).
    assert "sae on xlsa17-apy-ps [synthetic data]: zsl top1" in result.output
    listed = runner.invoke(app, ["results", "list"])
    assert "sae@1.0 on xlsa17-apy-ps v1" in listed.output
    assert "[synthetic data]" in listed.output
    (record,) = load_runs(open_store(None))
    assert record.benchmark.raw_inputs is not None
    assert (record.benchmark.raw_inputs.origin, record.benchmark.raw_inputs.verified) == (
        "synthetic",
        False,
    )
    assert not counted_by_default(record.benchmark)
