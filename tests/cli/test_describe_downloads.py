"""`zsl spec describe` and downloads (issue 29, item 8).

`--release-only` never downloads: without the release's split files here it says where it
looked and how to provide them. A plain `describe` whose raw data is not here asks before the
download (about 1 GB for the xlsa17 archive); `--yes` answers yes; with no terminal to ask on
and no `--yes` it refuses, saying so. Every test makes the fetch function (and pooch's download
under it) fail if called, unless the test is about the call it makes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pooch
import pytest
from typer.testing import CliRunner

from harness.cli import _common
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.data import download, xlsa17
from harness.data.download import Download, DownloadRefused, approve, download_policy
from harness.describe import describe_release
from harness.spec import load_spec

runner = CliRunner()
URL = "https://datasets.d2.mpi-inf.mpg.de/xian/xlsa17.zip"
OFFLINE = (
    "To work offline, unpack xlsa17.zip and set ZSL_XLSA17_DIR to the folder that holds APY/"
    " (its att_splits.mat and res101.mat), or set data.params.path in the spec;"
    " data.params.mirror names a folder or URL holding a copy of xlsa17.zip."
)

# aPY's proposed split without a leakage audit or hierarchy: the xlsa17 release is all it needs.
SPEC = """\
benchmark: t-apy
version: 1
title: aPY, proposed split
citation: test
data:
  adapter: xlsa17
  params: {dataset: APY, split: proposed}
class_embeddings: [{name: att, dim: 64, default: true}]
features: {name: f, dim: 2048, backbone: ResNet-101, pretrained_on: {class_set: none}}
settings: [zsl]
metrics: [{name: per_class_top_k_accuracy, key: top1, k: 1}]
primary: {zsl: top1}
"""


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("ZSL_XLSA17_DIR", raising=False)
    path = tmp_path / "t-apy.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def no_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calling the fetch function, or pooch's download under it, fails the test."""

    def fetched(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a download was attempted: {args} {kwargs}")

    monkeypatch.setattr(xlsa17, "fetch", fetched)
    monkeypatch.setattr(download, "fetch", fetched)
    monkeypatch.setattr(pooch, "retrieve", fetched)


@pytest.fixture
def fetch_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The calls of the fetch function, each ending the command (no network in tests)."""
    calls: list[dict[str, Any]] = []

    def fetched(source: str, **kwargs: Any) -> Any:
        calls.append({"source": source, **kwargs})
        raise HarnessError("stopped at the fetch by the test")

    monkeypatch.setattr(xlsa17, "fetch", fetched)
    return calls


def _looked(home: Path) -> str:
    return (
        "  looked in: data.params.path and $ZSL_XLSA17_DIR (neither is set), the download cache"
        f" {home / 'downloads' / 'xlsa17.zip'} (not there)\n"
        f"  {OFFLINE}\n"
    )


def test_release_only_never_downloads_and_says_where_it_looked(
    spec: Path, isolated_home: Path, no_fetch: None
) -> None:
    result = runner.invoke(app, ["spec", "describe", str(spec), "--release-only", "--yes"])
    assert result.exit_code == 1
    assert result.output == (
        f"error: {spec}: t-apy v1 needs 1 input this machine lacks:\n"
        "  - xlsa17 APY release (data.params.path and $ZSL_XLSA17_DIR are not set;"
        f" {isolated_home / 'downloads' / 'xlsa17.zip'} is not there, and --release-only never"
        f" downloads): {OFFLINE} For --release-only, APY/att_splits.mat and the class lists"
        " suffice (a few MB).\n"
    )
    assert not (isolated_home / "downloads").exists()


def test_release_only_refuses_a_remote_mirror_too(
    spec: Path, isolated_home: Path, no_fetch: None
) -> None:
    spec.write_text(
        SPEC.replace("split: proposed}", "split: proposed, mirror: 'https://m.invalid'}")
    )
    result = runner.invoke(app, ["spec", "describe", str(spec), "--release-only"])
    assert result.exit_code == 1
    assert "is not there, and --release-only never downloads" in result.output


def test_the_adapter_refuses_under_a_refusing_policy_before_fetching(
    spec: Path, isolated_home: Path, no_fetch: None
) -> None:
    """What describe --release-only runs under: the refusal comes before any fetch."""
    with (
        download_policy(lambda planned: "--release-only never downloads"),
        pytest.raises(HarnessError) as refused,
    ):
        describe_release(load_spec(spec))
    assert f"{refused.value}\n" == (
        f"not downloaded: the xlsa17 release archive xlsa17.zip ({URL}, about 1 GB):"
        " --release-only never downloads\n" + _looked(isolated_home)
    )


def test_describe_without_a_terminal_refuses_to_download(
    spec: Path, isolated_home: Path, no_fetch: None
) -> None:
    result = runner.invoke(app, ["spec", "describe", str(spec)])
    assert result.exit_code == 1
    assert result.output == (
        f"error: not downloaded: the xlsa17 release archive xlsa17.zip ({URL}, about 1 GB):"
        " downloading it needs a yes, and there is no terminal to ask on: pass --yes to"
        " download it\n" + _looked(isolated_home)
    )


def test_describe_asks_first_and_no_downloads_nothing(
    spec: Path, isolated_home: Path, no_fetch: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_common, "interactive", lambda: True)
    result = runner.invoke(app, ["spec", "describe", str(spec)], input="n\n")
    assert result.exit_code == 1
    assert result.output == (
        f"Download the xlsa17 release archive xlsa17.zip (about 1 GB) from {URL} into"
        f" {isolated_home / 'downloads'}? [y/N]: n\n"
        f"error: not downloaded: the xlsa17 release archive xlsa17.zip ({URL}, about 1 GB):"
        " you answered no\n" + _looked(isolated_home)
    )


@pytest.mark.parametrize(
    ("options", "answer"), [(["--yes"], None), ([], "y\n")], ids=["--yes", "answered yes"]
)
def test_a_yes_goes_on_to_fetch_the_archive(
    spec: Path,
    fetch_calls: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    answer: str | None,
) -> None:
    monkeypatch.setattr(_common, "interactive", lambda: answer is not None)
    result = runner.invoke(app, ["spec", "describe", str(spec), *options], input=answer)
    assert result.exit_code == 1
    assert "stopped at the fetch by the test" in result.output
    assert [(c["source"], c["fname"], c["what"], c["size"]) for c in fetch_calls] == [
        (URL, "xlsa17.zip", "the xlsa17 release archive xlsa17.zip", "about 1 GB")
    ]


def test_fetch_itself_puts_a_remote_download_to_the_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last gate: fetch asks the policy before pooch downloads; a local copy is no
    download; the policy is asked once per file."""

    def retrieved(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pooch was asked to download")

    monkeypatch.setattr(pooch, "retrieve", retrieved)
    asked: list[Download] = []

    def refuse(planned: Download) -> str:
        asked.append(planned)
        return "not in this test"

    with download_policy(refuse), pytest.raises(DownloadRefused) as refused:
        download.fetch(
            "https://example.invalid/x.zip", fname="x.zip", known_hash=None, directory=tmp_path
        )
    assert str(refused.value) == (
        "not downloaded: x.zip (https://example.invalid/x.zip): not in this test"
    )
    assert asked == [Download("https://example.invalid/x.zip", tmp_path / "x.zip", "x.zip")]
    assert download.pending_download(
        str(tmp_path / "copy.zip"), fname="x.zip", known_hash=None, what="x", directory=tmp_path
    ) is None  # fmt: skip
    decided: list[Download] = []
    planned = Download("https://example.invalid/y.zip", tmp_path / "y.zip", "y", "1 kB")
    with download_policy(lambda d: decided.append(d)):
        approve(planned)
        approve(planned)
    assert decided == [planned]
