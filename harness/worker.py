"""The one worker entrypoint: ``python -m harness.worker BUNDLE PACKAGE ENTRYPOINT OUT``.

It runs inside whatever isolation a runner sets up: loads the task bundle (no test labels are in
it), imports the model class from the package, fits once, predicts every setting, and writes one
prediction file per setting plus ``worker.json`` (status and timings) into OUT. Exit codes:
0 success, 3 model error, 4 protocol violation.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from harness.submission.predictions import write_predictions
from harness.tasks import Bundle, Model

EXIT_MODEL_ERROR = 3
EXIT_PROTOCOL = 4


def _load_model_class(package: Path, entrypoint: str) -> type:
    module_name, class_name = entrypoint.split(":")
    sys.path.insert(0, str(package))
    module = importlib.import_module(module_name)
    return getattr(module, class_name)


def run(bundle_dir: Path, package: Path, entrypoint: str, out: Path, seed: int) -> int:
    status: dict[str, object] = {"timings": {}}
    timings: dict[str, float] = {}
    status["timings"] = timings
    out.mkdir(parents=True, exist_ok=True)

    def finish(code: int, message: str = "") -> int:
        status.update(exit_code=code, message=message)
        (out / "worker.json").write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")
        return code

    bundle = Bundle(bundle_dir)
    try:
        np.random.seed(seed % (2**32))
        model_class = _load_model_class(package, entrypoint)
        # A fresh model per fit: the calibration fit (training classes only) must not leak into
        # the main fit, and vice versa.
        fits = [("calibration", bundle.validation_settings)] if bundle.validation_settings else []
        fits.append(("main", bundle.settings))
        for fit, settings in fits:
            model = model_class()
            if not isinstance(model, Model):
                return finish(
                    EXIT_PROTOCOL,
                    f"{entrypoint} has no fit(task) and predict(features, candidates)",
                )
            start = time.perf_counter()
            model.fit(bundle.train_task(seed=seed, fit=fit))
            timings[f"fit_{fit}"] = time.perf_counter() - start
            code = _predict_all(model, bundle, settings, out, timings)
            if code is not None:
                return finish(*code)
    except Exception as err:  # the model's failure is data for the run record, not a crash
        traceback.print_exc()
        return finish(EXIT_MODEL_ERROR, f"{type(err).__name__}: {err}")
    return finish(0)


def _predict_all(
    model: Model, bundle: Bundle, settings: list[str], out: Path, timings: dict[str, float]
) -> tuple[int, str] | None:
    """Predict every setting of one fit; a protocol violation is returned as (code, message)."""
    fmt = bundle.info.get("predictions", {"format": "dense"})
    for setting in settings:
        features, candidates = bundle.test(setting)
        # Top-K benchmarks (huge label spaces): predict in row chunks and keep the K best, so
        # the dense [n_test, n_candidates] matrix never exists. Validation settings stay dense.
        keep = int(fmt["k"]) if fmt["format"] == "topk" and not setting.endswith("_val") else None
        step = len(features) if keep is None else max(1, TOPK_CHUNK_CELLS // len(candidates))
        parts: list[tuple[np.ndarray, ...]] = []
        start = time.perf_counter()
        for lo in range(0, max(len(features), 1), step):
            chunk = features[lo : lo + step]
            scores = np.asarray(model.predict(chunk, candidates))
            expected = (len(chunk), len(candidates))
            if scores.shape != expected:
                return (
                    EXIT_PROTOCOL,
                    f"predict returned shape {scores.shape} for setting '{setting}';"
                    f" expected (n_test, n_candidates) = {expected}",
                )
            if scores.dtype.kind != "f":
                scores = scores.astype(np.float32)
            parts.append((scores,) if keep is None else _top_k(scores, keep))
        timings[f"predict_{setting}"] = time.perf_counter() - start
        common = {
            "benchmark_hash": bundle.info["benchmark_hash"],
            "class_order_hash": bundle.info["class_order_hashes"][setting],
            "setting": setting,
        }
        path = out / f"{setting}.safetensors"
        if keep is None:
            write_predictions(path, np.concatenate([p[0] for p in parts]), **common)
        else:
            write_predictions(
                path,
                topk_indices=np.concatenate([p[0] for p in parts]),
                topk_scores=np.concatenate([p[1] for p in parts]),
                **common,
            )
    return None


TOPK_CHUNK_CELLS = 50_000_000


def _top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns per row, best first (ties: smaller column first)."""
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(scores, part, 1)
    order = np.lexsort((part, -top), axis=1)
    return np.take_along_axis(part, order, 1).astype(np.int64), np.take_along_axis(top, order, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.worker", description=__doc__)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("package", type=Path)
    parser.add_argument("entrypoint")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return run(args.bundle, args.package, args.entrypoint, args.out, args.seed)


if __name__ == "__main__":
    sys.exit(main())
