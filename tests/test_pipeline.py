"""End to end on the demo: run, score, store; idempotent re-runs; failures store nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import PredictionError, RunnerError
from harness.data.prepare import load_benchmark
from harness.pipeline import generate_prediction_files, run_submission
from harness.spec import load_spec
from harness.store import count_runs, create_tables, load_runs, make_engine
from harness.submission.package import load_package
from harness.submission.predictions import write_predictions
from tests.conftest import SPECS, SUBMISSIONS

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite3'}"


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(
        SUBMISSIONS / name, dest, ignore=shutil.ignore_patterns("__pycache__", "predictions")
    )
    return dest


def _value(record, setting: str, metric: str) -> float:  # type: ignore[no-untyped-def]
    entry = record.score(setting, metric)
    assert entry is not None, (setting, metric)
    return float(entry.value)


def test_eszsl_beats_the_baseline_and_reruns_update_one_record(tmp_path: Path, db: str) -> None:
    eszsl = run_submission(SUBMISSIONS / "eszsl", DEMO, database_url=db, quiet=True)
    baseline_dir = _copy("nearest-seen-class-transfer", tmp_path)
    generate_prediction_files(load_package(baseline_dir), load_benchmark(load_spec(DEMO)))
    baseline = run_submission(baseline_dir, DEMO, database_url=db, quiet=True)

    for record in (eszsl, baseline):
        spec = load_spec(DEMO)
        assert [(e.setting, e.metric) for e in record.scores] == [
            (s, m.result_key) for s in spec.settings for m in spec.metrics_for(s)
        ]
        # every scalar carries a bootstrap interval
        assert all(e.interval is not None and e.interval.n_boot == 1000 for e in record.scores)
        assert set(record.predictions_hashes) == {
            *("zsl", "gzsl", "zsl_val", "gzsl_val"),
            *("scale", "scale_val"),
        }
        assert record.benchmark.hash == load_spec(DEMO).data.checksum
    # ESZSL must beat the untuned baseline on unseen classes by far more than noise
    # (20 unseen classes of 40-80 images: a per-class accuracy has a standard error of a few points).
    assert _value(eszsl, "zsl", "top1") > _value(baseline, "zsl", "top1") + 0.10
    assert _value(eszsl, "zsl", "top1") > 3 / 20  # far above chance (1/20)
    assert _value(eszsl, "gzsl", "H") > 0

    engine = make_engine(db)
    create_tables(engine)
    assert count_runs(engine) == 2
    again = run_submission(SUBMISSIONS / "eszsl", DEMO, database_url=db, quiet=True)
    assert count_runs(engine) == 2
    assert again.predictions_hashes == eszsl.predictions_hashes  # seeded, deterministic
    names = sorted(r.submission.name for r in load_runs(engine))
    assert names == ["eszsl", "nearest-seen-class-transfer"]


def test_failing_model_stores_nothing(tmp_path: Path, db: str) -> None:
    package = _copy("eszsl", tmp_path)
    (package / "model.py").write_text(
        "class ESZSL:\n"
        "    def fit(self, task):\n        raise RuntimeError('diverged at epoch 3')\n"
        "    def predict(self, features, candidates):\n        return None\n"
        "    def save(self, directory):\n        pass\n"
        "    @classmethod\n    def load(cls, directory):\n        return cls()\n"
    )
    with pytest.raises(
        RunnerError,
        match=r"exited with code 3; model error: fit\(\) raised RuntimeError: diverged at epoch 3"
        r"\n  at: model\.py:3, in fit\n  log: ",
    ):
        run_submission(package, DEMO, database_url=db, quiet=True)
    engine = make_engine(db)
    create_tables(engine)
    assert count_runs(engine) == 0


def test_wrong_prediction_shape_is_a_protocol_error(tmp_path: Path, db: str) -> None:
    package = _copy("eszsl", tmp_path)
    (package / "model.py").write_text(
        "import numpy as np\n"
        "class ESZSL:\n"
        "    def fit(self, task):\n        pass\n"
        "    def predict(self, features, candidates):\n        return np.zeros((len(features), 2))\n"
        "    def save(self, directory):\n        (directory / 'state.json').write_text('{}')\n"
        "    @classmethod\n    def load(cls, directory):\n        return cls()\n"
    )
    with pytest.raises(RunnerError, match="exited with code 4"):
        run_submission(package, DEMO, database_url=db, quiet=True)


def test_stale_prediction_files_are_refused(tmp_path: Path, db: str) -> None:
    package_dir = _copy("nearest-seen-class-transfer", tmp_path)
    package = load_package(package_dir)
    bench = load_benchmark(load_spec(DEMO))
    for setting in bench.spec.prediction_settings():  # every file there, each made for other data
        shape = (len(bench.rows(setting)), len(bench.columns(setting)))
        write_predictions(
            package.prediction_path("demo", setting),
            np.zeros(shape, "float32"),
            benchmark_hash="sha256:" + "0" * 64,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
        )
    with pytest.raises(PredictionError, match="made for benchmark_hash 'sha256:0000"):
        run_submission(package_dir, DEMO, database_url=db, quiet=True)


ZSL_METRICS = """metrics:
  - name: per_class_top_k_accuracy
    key: top1
    k: 1
  - name: per_class_top_k_accuracy
    key: top5
    k: 5
  - name: hierarchical_precision_at_k
    key: hp@2
    k: 2
  - name: hierarchical_cost
    key: hcost
  - name: prediction_relation_share
    key: semantic
primary:
  zsl: top1
"""


def _zsl_spec(tmp_path: Path, predictions: str) -> Path:
    text = DEMO.read_text()
    text = text[: text.index("metrics:\n")] + ZSL_METRICS + predictions
    text = text.replace("settings: [zsl, gzsl]", "settings: [zsl]")
    shutil.copytree(SPECS / "demo", tmp_path / "demo", dirs_exist_ok=True)
    path = tmp_path / f"demo-{abs(hash(predictions))}.yaml"
    path.write_text(text)
    return path


def test_topk_predictions_streamed_in_chunks_score_like_dense(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dense_spec = _zsl_spec(tmp_path, "predictions:\n  format: dense\n")
    topk_spec = _zsl_spec(tmp_path, "predictions:\n  format: topk\n  k: 10\n")
    dense = run_submission(SUBMISSIONS / "eszsl", dense_spec, store=False, quiet=True)
    whole = run_submission(SUBMISSIONS / "eszsl", topk_spec, store=False, quiet=True)
    import harness.scoring

    monkeypatch.setattr(harness.scoring, "CHUNK_ROWS", 97)  # many chunks, a ragged last one
    streamed = run_submission(SUBMISSIONS / "eszsl", topk_spec, store=False, quiet=True)
    assert streamed.predictions_hashes == whole.predictions_hashes
    for metric in ("top1", "top5", "hp@2", "hcost", "semantic"):
        d, w, s = (r.score("zsl", metric) for r in (dense, whole, streamed))
        assert d is not None and w is not None and s is not None
        assert d.value == pytest.approx(w.value, abs=1e-12) == pytest.approx(s.value, abs=1e-12)
        assert w.interval is not None and s.interval is not None
        assert (w.interval.lo, w.interval.hi) == pytest.approx((s.interval.lo, s.interval.hi))
    assert any(e.details.get("streamed") for e in streamed.scores)


def test_dense_only_metric_is_refused_for_topk_specs(tmp_path: Path) -> None:
    from harness.core.errors import SpecError

    path = _zsl_spec(tmp_path, "predictions:\n  format: topk\n  k: 10\n")
    path.write_text(
        path.read_text()
        .replace("settings: [zsl]", "settings: [zsl, gzsl]")
        .replace(
            "primary:\n  zsl: top1\n",
            "  - name: gzsl_harmonic_mean\n    key: H\nprimary:\n  zsl: top1\n  gzsl: H\n",
        )
    )
    with pytest.raises(
        SpecError,
        match=r"metric 'gzsl_harmonic_mean' needs dense predictions, but predictions\.format is 'topk'",
    ):
        load_spec(path)


def test_archived_package_runs_like_the_folder(tmp_path: Path, db: str) -> None:
    import zipfile

    archive = tmp_path / "eszsl.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((SUBMISSIONS / "eszsl").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, f"eszsl/{path.relative_to(SUBMISSIONS / 'eszsl')}")
    folder = run_submission(SUBMISSIONS / "eszsl", DEMO, store=False, quiet=True)
    zipped = run_submission(archive, DEMO, database_url=db, quiet=True)
    assert zipped.predictions_hashes == folder.predictions_hashes
    assert zipped.submission.package_hash == folder.submission.package_hash
    engine = make_engine(db)
    create_tables(engine)
    assert count_runs(engine) == 1


def test_runner_logs_are_kept_with_the_run(tmp_path: Path, db: str) -> None:
    package = _copy("eszsl", tmp_path)
    model = package / "model.py"
    model.write_text(model.read_text() + "\nprint('hello from the model')\n")
    run_submission(package, DEMO, database_url=db, quiet=True)
    engine = make_engine(db)
    create_tables(engine)
    (record,) = load_runs(engine)
    assert record.logs["reason"] == "ok"
    assert "hello from the model" in record.logs["stdout"]
