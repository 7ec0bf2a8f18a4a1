"""Where a frozen benchmark's raw inputs came from, and refusing a frozen copy whose sources
changed (issue 29, items 1 and 2).

The xlsa17 fixture release (real split files, a synthetic ``res101.mat``) is frozen, then its
``res101.mat`` is rewritten as a release would hold it (no synthetic image file names), or with
other features, or moved: each case says what the harness records and whether it refuses.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import scipy.io as sio
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.hashing import file_sha256
from harness.data.artifacts import FrozenBenchmark, benchmark_dir
from harness.data.prepare import prepare
from harness.data.sources import SourcesChangedError, raw_inputs
from harness.data.xlsa17 import ENV_DIR
from harness.records import BenchmarkInfo, RawInputs
from harness.results.standing import counted_by_default, data_badges
from harness.spec import Spec, load_spec, load_spec_data
from tests.conftest import REPO, SUBMISSIONS

DIM = 16
#: The spec's metrics that need no hierarchy.
KEPT_METRICS = (
    "per_class_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
)


@pytest.fixture
def release(tmp_path: Path, xlsa17_release: Callable[..., Path]) -> Path:
    """A folder holding ``APY/``: the real split files and a synthetic res101.mat."""
    xlsa17_release(tmp_path / "xlsa17", "APY", dim=DIM)
    return tmp_path / "xlsa17"


def _spec(tmp_path: Path, **data: Any) -> Spec:
    """specs/xlsa17/apy-ps.yaml without hierarchy, reading from ``$ZSL_XLSA17_DIR``."""
    spec = load_spec_data(REPO / "specs" / "xlsa17" / "apy-ps.yaml")
    spec.pop("hierarchy", None)
    spec.pop("audit", None)
    spec["data"]["params"].pop("class_map", None)
    spec["data"]["params"].pop("hierarchy", None)
    spec["features"]["dim"] = DIM
    spec["metrics"] = [m for m in spec["metrics"] if m["name"] in KEPT_METRICS]
    spec["data"].update(data)
    path = tmp_path / "apy-ps.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_spec(path)


def _rewrite_res101(dataset_dir: Path, *, scale: float = 1.0) -> None:
    """res101.mat as the release holds it (no synthetic image file names), features scaled."""
    path = dataset_dir / "res101.mat"
    mat = sio.loadmat(path)
    sio.savemat(path, {"features": mat["features"] * scale, "labels": mat["labels"]})


def _cli(*argv: str) -> Any:
    return CliRunner().invoke(app, list(argv))


@pytest.mark.slow  # a release copied and frozen
def test_a_synthetic_release_is_frozen_and_recorded_as_synthetic(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DIR, str(release))
    spec = _spec(tmp_path)
    frozen = prepare(spec, no_audit="a test")
    section = frozen.raw_inputs
    assert section["origin"] == "synthetic"
    assert section["files"]["APY/res101.mat"]["path"] == str(release / "APY" / "res101.mat")
    assert sorted(section["files"]) == [
        "APY/allclasses.txt",
        "APY/att_splits.mat",
        "APY/res101.mat",
        "APY/testclasses.txt",
        "APY/trainclasses1.txt",
        "APY/trainvalclasses.txt",
        "APY/valclasses1.txt",
    ]
    recorded = raw_inputs(section, frozen.hash, spec.data.checksum)
    assert recorded.origin == "synthetic" and not recorded.verified
    assert recorded.how.startswith("a synthetic stand-in for the xlsa17 APY release")
    assert recorded.files["APY/res101.mat"] == section["files"]["APY/res101.mat"]["sha256"]
    result = _cli("data", "prepare", str(spec.path))
    assert result.exit_code == 0, result.output
    assert "  raw inputs: [synthetic data] a synthetic stand-in" in result.output
    assert "stay out of the cross-benchmark tables" in result.output


@pytest.mark.slow  # a release copied and frozen
def test_a_release_is_verified_only_against_a_pinned_checksum(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _rewrite_res101(release / "APY")
    monkeypatch.setenv(ENV_DIR, str(release))
    spec = _spec(tmp_path)
    frozen = prepare(spec, no_audit="a test")
    recorded = raw_inputs(frozen.raw_inputs, frozen.hash, spec.data.checksum)
    assert (recorded.origin, recorded.verified) == ("release", False)
    assert recorded.how == (
        "the xlsa17 APY release, read from $ZSL_XLSA17_DIR; not checked against a pinned checksum"
    )
    pinned = _spec(tmp_path, checksum=frozen.hash)
    recorded = raw_inputs(prepare(pinned).raw_inputs, frozen.hash, pinned.data.checksum)
    assert (recorded.origin, recorded.verified) == ("release", True)
    assert recorded.how.endswith(
        "; verified: the frozen benchmark's hash matches data.checksum pinned in the spec"
    )


def _changed_message(root: Path, spec: Spec, *problems: str) -> str:
    listed = "\n  ".join(problems)
    return (
        f"{root} no longer matches the files it was frozen from:\n  {listed}\n"
        f"Freeze it again from the current files with `zsl data prepare {spec.path} --refresh`"
        " (its hash changes: prediction files made for the old hash must be made again), or"
        " point the spec back at the files it was frozen from."
    )


@pytest.mark.slow  # a release copied and frozen
def test_changed_sources_are_refused_until_frozen_again(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DIR, str(release))
    spec = _spec(tmp_path)
    frozen = prepare(spec, no_audit="a test")
    root, first = frozen.root, frozen.hash
    res101 = release / "APY" / "res101.mat"
    old = frozen.raw_inputs["files"]["APY/res101.mat"]["sha256"]

    # The same bytes elsewhere, and the sources deleted: the frozen copy stands.
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    monkeypatch.setenv(ENV_DIR, str(copy))
    assert prepare(spec).hash == first
    shutil.rmtree(copy)
    assert prepare(spec).hash == first

    # Other features at another place the spec now reads.
    other = tmp_path / "other"
    shutil.copytree(release, other)
    _rewrite_res101(other / "APY", scale=2.0)
    monkeypatch.setenv(ENV_DIR, str(other))
    new = f"sha256 {file_sha256(other / 'APY' / 'res101.mat')[7:19]}…"
    moved = (
        f"APY/res101.mat: frozen from {res101} (sha256 {old[7:19]}…), but the spec now reads"
        f" {other / 'APY' / 'res101.mat'} ({new})"
    )
    with pytest.raises(SourcesChangedError) as caught:
        prepare(spec)
    assert str(caught.value) == _changed_message(root, spec, moved)

    # The file it was frozen from, changed in place (size or time changed: hashed again).
    monkeypatch.setenv(ENV_DIR, str(release))
    shutil.copyfile(other / "APY" / "res101.mat", res101)
    in_place = (
        f"APY/res101.mat: {res101} changed since it was frozen (sha256 {old[7:19]}… → {new[7:]})"
    )
    expected = _changed_message(root, spec, in_place)
    with pytest.raises(SourcesChangedError) as caught:
        prepare(spec)
    assert str(caught.value) == expected
    # Every command that reads the frozen copy says so, and writes nothing.
    for argv in (
        ("data", "prepare", str(spec.path)),
        ("data", "verify", str(spec.path)),
        ("run", str(SUBMISSIONS / "eszsl"), "--spec", str(spec.path), "--dry-run"),
    ):
        result = _cli(*argv)
        assert result.exit_code == 2, (argv, result.output)
        assert " ".join(expected.split()) in " ".join(result.output.split()), argv
    assert FrozenBenchmark(root).hash == first

    # --refresh freezes it again from the current files.
    result = _cli("data", "prepare", str(spec.path), "--refresh")
    assert result.exit_code == 0, result.output
    refreshed = FrozenBenchmark(root)
    assert refreshed.hash != first
    assert refreshed.raw_inputs["files"]["APY/res101.mat"]["sha256"] == file_sha256(res101)
    assert prepare(spec).hash == refreshed.hash
    assert not [p for p in root.parent.iterdir() if p.name.startswith(".")]  # nothing left


@pytest.mark.slow  # a release copied and frozen
def test_a_refresh_that_fails_keeps_the_frozen_copy(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DIR, str(release))
    spec = _spec(tmp_path)
    first = prepare(spec, no_audit="a test").hash
    (release / "APY" / "res101.mat").write_bytes(b"not a MATLAB file")
    result = _cli("data", "prepare", str(spec.path), "--refresh")
    assert result.exit_code == 1
    assert "res101.mat" in result.output
    root = benchmark_dir(spec.benchmark, spec.version)
    assert FrozenBenchmark(root).hash == first
    assert [p.name for p in root.parent.iterdir()] == ["v1"]


def test_the_badges_and_what_counts_across_benchmarks() -> None:
    def info(raw: RawInputs | None, experimental: bool = False) -> BenchmarkInfo:
        return BenchmarkInfo(
            id="b",
            version=1,
            title="t",
            hash="h",
            spec_hash="s",
            raw_inputs=raw,
            experimental=experimental,
        )

    def raw(origin: Any, verified: bool) -> RawInputs:
        return RawInputs(origin=origin, verified=verified, how="how")

    cases = [
        (info(raw("release", True)), ["verified release"], True),
        (info(raw("release", False)), ["unverified source"], False),
        (info(raw("synthetic", True)), ["synthetic data"], False),
        (info(raw("generated", False)), ["generated data"], True),
        (info(raw("own", False)), ["own data"], True),
        (info(raw("own", True), experimental=True), ["own data", "experimental"], False),
        (info(None), ["source not recorded"], False),
    ]
    for benchmark, labels, counted in cases:
        assert [b.label for b in data_badges(benchmark)] == labels
        assert counted_by_default(benchmark) is counted


@pytest.mark.slow  # a release copied and frozen
def test_a_file_swapped_under_the_same_name_size_and_times_is_hashed_again(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cp -p` or `touch -r` puts the size and modification time back; the change time and the
    # inode they cannot, so the stat shortcut does not take the swapped file for the old one.
    monkeypatch.setenv(ENV_DIR, str(release))
    spec = _spec(tmp_path)
    frozen = prepare(spec, no_audit="a test")
    res101 = release / "APY" / "res101.mat"
    before = res101.stat()
    data = bytearray(res101.read_bytes())
    data[-1] ^= 0xFF  # the last byte of the features: same size, other content
    swapped = res101.with_name("swapped.mat")
    swapped.write_bytes(bytes(data))
    os.utime(swapped, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(swapped, res101)
    assert (res101.stat().st_size, res101.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )
    with pytest.raises(SourcesChangedError, match=r"APY/res101\.mat: .* changed since it was"):
        prepare(spec)
    assert FrozenBenchmark(frozen.root).hash == frozen.hash
