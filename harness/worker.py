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
        model = model_class()
        if not isinstance(model, Model):
            return finish(
                EXIT_PROTOCOL, f"{entrypoint} has no fit(task) and predict(features, candidates)"
            )
        start = time.perf_counter()
        model.fit(bundle.train_task(seed=seed))
        timings["fit"] = time.perf_counter() - start
        for setting in bundle.settings:
            features, candidates = bundle.test(setting)
            start = time.perf_counter()
            scores = np.asarray(model.predict(features, candidates))
            timings[f"predict_{setting}"] = time.perf_counter() - start
            expected = (len(features), len(candidates))
            if scores.shape != expected:
                return finish(
                    EXIT_PROTOCOL,
                    f"predict returned shape {scores.shape} for setting '{setting}';"
                    f" expected (n_test, n_candidates) = {expected}",
                )
            if scores.dtype.kind != "f":
                scores = scores.astype(np.float32)
            write_predictions(
                out / f"{setting}.safetensors",
                scores,
                benchmark_hash=bundle.info["benchmark_hash"],
                class_order_hash=bundle.info["class_order_hashes"][setting],
                setting=setting,
            )
    except Exception as err:  # the model's failure is data for the run record, not a crash
        traceback.print_exc()
        return finish(EXIT_MODEL_ERROR, f"{type(err).__name__}: {err}")
    return finish(0)


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
