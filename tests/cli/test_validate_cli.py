"""`zsl submission validate`: one clear line and a non-zero exit for each broken or hostile
package; exit 0 for every shipped package."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from tests import hostile
from tests.conftest import SUBMISSIONS

runner = CliRunner()
MANIFEST = b"name: x\nversion: '1'\nauthors: [a]\nkind: predictions\n"


def _manifest_edit(old: str, new: str) -> Callable[[Path], Path]:
    def build(tmp_path: Path) -> Path:
        root = hostile.copy_eszsl(tmp_path)
        manifest = root / "submission.yaml"
        manifest.write_text(manifest.read_text().replace(old, new))
        return root

    return build


def _no_manifest(tmp_path: Path) -> Path:
    root = hostile.copy_eszsl(tmp_path)
    (root / "submission.yaml").unlink()
    return root


BROKEN: dict[str, tuple[Callable[[Path], Path], str]] = {
    "traversal-zip": (
        lambda t: hostile.zip_of(t / "a.zip", {"submission.yaml": MANIFEST, "../x": b"1"}),
        "leaves the package",
    ),
    "symlink-tar": (
        lambda t: hostile.tar_of(
            t / "a.tar.gz",
            [
                hostile.tar_file("submission.yaml", MANIFEST),
                hostile.tar_special("l", b"2", "/etc/passwd"),
            ],
        ),
        "link",
    ),
    "zip-bomb": (lambda t: hostile.zip_bomb(t / "bomb.zip", 120), "refused"),
    "too-many-members": (lambda t: hostile.many_members_zip(t / "m.zip", 10_001), "members"),
    "no-manifest": (_no_manifest, "no submission.yaml"),
    "unknown-key": (
        _manifest_edit("kind: model", "kind: model\ncolour: red"),
        "colour: unknown key",
    ),
    "missing-module": (
        _manifest_edit("model:ESZSL", "missing:ESZSL"),
        "module 'missing' not found",
    ),
    "bad-kind": (
        _manifest_edit("kind: model", "kind: modle"),
        "kind: must be one of 'predictions', 'model'; got 'modle'. Did you mean 'model'?",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_package_gets_one_clear_line(case: str, tmp_path: Path) -> None:
    build, fragment = BROKEN[case]
    result = runner.invoke(app, ["submission", "validate", str(build(tmp_path))])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and fragment in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow  # a second or more (make test-fast leaves it out)
@pytest.mark.parametrize(
    "name", sorted(p.parent.name for p in SUBMISSIONS.glob("*/submission.yaml"))
)
def test_shipped_package_validates(name: str) -> None:
    result = runner.invoke(app, ["submission", "validate", str(SUBMISSIONS / name)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"ok {SUBMISSIONS / name}")


@pytest.mark.slow
def test_validate_with_spec_checks_prediction_files(tmp_path: Path) -> None:
    import shutil

    import numpy as np

    from harness.data.prepare import load_benchmark
    from harness.pipeline import generate_prediction_files
    from harness.spec import load_spec
    from harness.submission.package import load_package
    from harness.submission.predictions import read_predictions, write_predictions
    from tests.conftest import SPECS

    root = tmp_path / "baseline"
    shutil.copytree(SUBMISSIONS / "nearest-seen-class-transfer", root)
    spec = SPECS / "demo.yaml"
    bench = load_benchmark(load_spec(spec))
    package = load_package(root)
    generate_prediction_files(package, bench)
    ok = runner.invoke(app, ["submission", "validate", str(root), "--spec", str(spec)])
    assert ok.exit_code == 0, ok.output
    path = package.prediction_path("demo", "zsl")
    meta = {
        "benchmark_hash": bench.hash,
        "class_order_hash": bench.class_order_hash("zsl"),
        "setting": "zsl",
    }
    scores = read_predictions(path, **meta, shape=(len(bench.rows("zsl")), 20)).scores
    assert scores is not None
    bad = np.array(scores, copy=True)
    bad[7, 3] = np.nan
    write_predictions(path, bad, **meta)
    result = runner.invoke(app, ["submission", "validate", str(root), "--spec", str(spec)])
    assert result.exit_code == 1
    # The file by its path in the package, the setting, the row and the column.
    assert (
        "error: predictions/demo.zsl.safetensors: setting zsl, row 7, column 3: score nan is"
        " not finite (1 row(s) hold NaN or inf)"
    ) in result.output, result.output
    # Not generated yet: the message names the command that writes the files.
    for made in (root / "predictions").iterdir():
        made.unlink()
    result = runner.invoke(app, ["submission", "validate", str(root), "--spec", str(spec)])
    assert result.exit_code == 1
    assert result.output == (
        f"error: {root.resolve()}: 6 prediction file(s) for benchmark 'demo' not found:"
        " predictions/demo.zsl.safetensors, predictions/demo.gzsl.safetensors,"
        " predictions/demo.scale.safetensors, predictions/demo.zsl_val.safetensors,"
        " predictions/demo.gzsl_val.safetensors, predictions/demo.scale_val.safetensors; write"
        " them with its generator (make_predictions.py): `zsl submission generate"
        f" {root.resolve()} --spec {spec}`\n"
    )
