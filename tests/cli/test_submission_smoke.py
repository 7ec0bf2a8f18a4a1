"""`zsl submission validate --spec` runs a smoke fit and predict (issue 29, item 6).

A package whose fit raised, whose model read an attribute the task does not have, or whose
predict returned the wrong shape or NaN used to validate "ok" and fail only at its run. With a
spec, validation now runs it on a small deterministic subsample of the benchmark
(:class:`harness.runners.smoke.SmokeBenchmark`) through the run's own fits and passes, so each
fails there, saying what was smoke-tested. One probe package covers every flaw: ``mode.txt``
in the package (no environment variable reaches a sandbox) picks it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import harness.runners.smoke as smoke
from harness.cli.main import app
from harness.cli.submission import validate_package
from harness.core.errors import RunnerError
from harness.data.artifacts import FrozenBenchmark
from harness.data.prepare import load_benchmark
from harness.runners.smoke import IMAGE_SPLITS, IMAGES_PER_CLASS, TEST_ROWS, SmokeBenchmark
from harness.spec import load_spec
from harness.submission.package import load_package
from tests.conftest import SPECS, needs_bwrap

DEMO = SPECS / "demo.yaml"
MANIFEST = """\
name: smoke-probe
version: "1"
authors: [zsl-harness tests]
kind: model
model:
  entrypoint: model:Probe
resources:
  cpus: 1
  memory_gb: 2
  time_s: 600
"""
PROBE = '''\
"""A working model but for the one flaw mode.txt names."""

from pathlib import Path

import numpy as np

MODE = (Path(__file__).parent / "mode.txt").read_text().strip()


class Probe:
    def fit(self, task):
        if MODE == "fit-raises":
            raise ValueError("probe: fit failed on purpose")
        if MODE == "bad-attribute":
            print(task.train_images.shape)  # a TrainTask holds train_features
        if MODE == "sleeps":
            import time

            time.sleep(60)
        rng = np.random.default_rng(task.seed)
        self.w_ = rng.standard_normal((task.train_features.shape[1], task.embedding.shape[1]))
        self.emb_ = np.asarray(task.embedding, dtype=np.float64)

    def save(self, directory):
        np.savez(directory / "state.npz", w_=self.w_, emb_=self.emb_)

    @classmethod
    def load(cls, directory):
        model = cls()
        model.__dict__.update(np.load(directory / "state.npz"))
        return model

    def predict(self, features, candidates):
        scores = features @ self.w_ @ self.emb_[candidates].T
        if MODE == "wrong-shape":
            return scores[:, :-1]
        if MODE == "nan":
            scores[0, 0] = np.nan
        return scores
'''
#: What the smoke run on the demo is, as validation says it.
SAMPLE = (
    "demo v1 cut down: the validation fit, then the main fit, on at most 5 training images per"
    " class (the main fit: 400 images of 80 seen classes), predicting at most 16 rows of each"
    " setting (zsl, gzsl, scale, zsl_val, gzsl_val, scale_val); no test label read"
)


def _probe(tmp_path: Path, mode: str) -> Path:
    root = tmp_path / "smoke-probe"
    root.mkdir()
    (root / "submission.yaml").write_text(MANIFEST)
    (root / "model.py").write_text(PROBE)
    (root / "mode.txt").write_text(mode + "\n")
    return root


def _line(text: str) -> int:
    """The line of ``model.py`` holding ``text``."""
    return next(i for i, line in enumerate(PROBE.splitlines(), 1) if text in line)


def test_the_subsample_is_deterministic_and_reads_no_test_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = load_benchmark(load_spec(DEMO))
    cut, again = SmokeBenchmark(bench), SmokeBenchmark(bench)
    labels = bench.array("labels")
    for name in IMAGE_SPLITS:
        full, kept = bench.array(name), cut.array(name)
        assert np.array_equal(kept, again.array(name))
        assert np.isin(kept, full).all() and np.all(np.diff(kept) > 0)
        classes, counts = np.unique(labels[kept], return_counts=True)
        # Every class of the split keeps images (a seen candidate always has some), few each.
        assert np.array_equal(classes, np.unique(labels[full]))
        assert counts.max() == IMAGES_PER_CLASS and len(kept) < len(full)
    # Test rows are chosen by position: reading a setting's rows reads its order, no label.
    read: list[str] = []
    original = type(bench.frozen).array

    def spied(frozen: FrozenBenchmark, name: str) -> np.ndarray:
        read.append(name)
        return original(frozen, name)

    monkeypatch.setattr(type(bench.frozen), "array", spied)
    for test_setting in bench.spec.settings:
        rows = SmokeBenchmark(bench).rows(test_setting)
        assert len(rows) == TEST_ROWS and np.isin(rows, bench.rows(test_setting)).all()
        assert np.array_equal(rows, cut.rows(test_setting))
    assert read and all(name.startswith("order/") for name in read), read
    # Candidates, classes and embeddings are the benchmark's own.
    for setting in bench.spec.prediction_settings():
        assert np.array_equal(cut.columns(setting), bench.columns(setting))
    assert cut.hash == bench.hash


@pytest.mark.slow
@needs_bwrap
def test_a_good_model_passes_saying_what_was_smoke_tested(tmp_path: Path) -> None:
    root = _probe(tmp_path, "ok")
    result = CliRunner().invoke(app, ["submission", "validate", str(root), "--spec", str(DEMO)])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if "smoke run" in line]
    assert re.fullmatch(
        r"  smoke run passed in runner 'sandbox' \([0-9.]+ s of at most 120 s\): "
        + re.escape(SAMPLE + "; state saved and loaded, scores of the right shape and finite,")
        + " and the same in two passes",
        line,
    ), line


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize(
    ("mode", "said", "where"),
    [
        (
            "fit-raises",
            "model error: fit() raised ValueError: probe: fit failed on purpose",
            f"model.py:{_line('fit failed on purpose')}, in fit",
        ),
        (
            "bad-attribute",
            "model error: fit() raised AttributeError: 'TrainTask' object has no attribute"
            " 'train_images'",
            f"model.py:{_line('train_images')}, in fit",
        ),
        (
            "wrong-shape",
            "protocol violation: predict returned shape (11, 15) for setting 'zsl_val'; expected"
            " (n_test, n_candidates) = (11, 16)",
            f"model.py:{_line('def predict')}",
        ),
        (
            "nan",
            "model error: predict(), setting zsl_val, row 0, column 0: score nan is not finite",
            f"model.py:{_line('def predict')}",
        ),
    ],
)
def test_a_broken_model_fails_validation(tmp_path: Path, mode: str, said: str, where: str) -> None:
    root = _probe(tmp_path, mode)
    with pytest.raises(RunnerError) as err:
        validate_package(root, DEMO)
    lines = str(err.value).splitlines()
    assert lines[0] == f"{root}: the smoke run failed, as a run would:"
    assert lines[1].startswith("  smoke-probe on runner 'sandbox': exited with code ")
    assert said in lines[1], lines
    assert any(where in line for line in lines[2:]), lines
    assert lines[-1] == f"  smoke run: runner 'sandbox', at most 120 s; {SAMPLE}"


@pytest.mark.slow
@needs_bwrap
def test_a_smoke_run_past_its_limit_says_it_was_the_smoke_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smoke, "SMOKE_TIME_S", 1.0)
    root = _probe(tmp_path, "sleeps")
    with pytest.raises(RunnerError) as err:  # the smoke run alone: its entrypoint is fine
        smoke.smoke_run(load_package(root), load_benchmark(load_spec(DEMO)), "sandbox")
    lines = str(err.value).splitlines()
    assert lines[1:3] == [
        "  smoke-probe on runner 'sandbox': timed out in fit_validation after 1 s, the smoke"
        " run's limit (at most 1 s, or resources.time_s where lower)",
        "  to pass: fit and predict on this subsample within 1 s, or validate without --spec (no"
        " smoke run)",
    ]
    assert not any("resources.time_s in the package" in line for line in lines)
