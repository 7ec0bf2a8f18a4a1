"""CPU against GPU for the torch reference methods at AWA2 size (not a test): ALE, DeViSE, SJE
on both devices, and the generative methods (CADA-VAE, f-CLSWGAN; issue 30) on the GPU against
their target of 2 minutes for the whole fit and prediction (their CPU time, up to 30 min each, is
measured by ``bench/methods.py`` on the same fixture; ``--cpu-too`` runs them on the CPU here
as well).

:func:`measure` returns ``{"status": "not measured", "reason": ...}`` where torch is missing or
sees no GPU (``torch.cuda.is_available()``), or where the real xlsa17 ``att_splits.mat`` of AWA2
is absent (``ZSL_SHARED_DATA``). Otherwise it writes the AWA2 fixture
(``tests/xlsa17_fixture.make_release``: the real ``att_splits.mat`` and class lists with 2048-d
fixture features in the release's ``res101.mat`` layout), freezes ``specs/xlsa17/awa2-ps.yaml``
on it (27 training + 13 validation classes, 23,527 trainval images; 5,882 seen and 7,913 unseen
test images), writes a task bundle, and times each method in a fresh process, once on the CPU
(``CUDA_VISIBLE_DEVICES=""``) and once on the first GPU: ``fit`` (the learning-rate × epochs
search on the validation classes, then the refit on training + validation) and ``predict`` of
every test image over the GZSL candidates (50 classes). The models run as the harness runs them
(``torch.set_num_threads(1)``: one CPU thread, ``resources.cpus: 1``). Besides the times and the
speed-up, each method reports how far the GPU's scores are from the CPU's (largest absolute
difference over the scores' largest magnitude, and the share of images whose top-1 agrees):
deterministic on each device, not bit-identical across them.

Run alone: ``.venv/bin/python bench/gpu_methods.py [--out FILE]`` (prints the dict as JSON).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
METHODS = {
    "ale": "ALE",
    "devise": "DeViSE",
    "sje": "SJE",
    "cada-vae": "CADAVAE",
    "f-clswgan": "FCLSWGAN",
}
#: The generative methods: timed on the GPU only unless ``--cpu-too``, against a target.
GENERATIVE = ("cada-vae", "f-clswgan")
#: Fit + predict on one GPU, seconds (issue 30: "<= 2 min on a GPU").
TARGET_GPU_S = 120.0
DATASET = "AWA2"
DIM = 2048
SETTING = "gzsl"


def _unavailable() -> str | None:
    """Why nothing can be measured here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (the optional extra `.[methods]`)"
    if not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} sees no CUDA GPU here (torch.cuda.is_available() is"
            " False); run on a host with an NVIDIA GPU, its driver and a CUDA build of torch"
        )
    sys.path.insert(0, str(REPO))
    from tests.xlsa17_fixture import XLSA17

    if not (XLSA17 / DATASET / "att_splits.mat").is_file():
        return f"{XLSA17 / DATASET / 'att_splits.mat'} is absent (set ZSL_SHARED_DATA)"
    return None


def _bundle(work: Path, dim: int) -> Path:
    """The AWA2 fixture, frozen under ``work/home``, and its task bundle (``work/bundle``)."""
    sys.path.insert(0, str(REPO))
    import yaml

    from harness.bundles import write_bundle
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec, load_spec_data
    from tests.xlsa17_fixture import make_release

    make_release(work / "xlsa17", DATASET, dim=dim)
    source = REPO / "specs" / "xlsa17" / f"{DATASET.lower()}-ps.yaml"
    data = load_spec_data(source)
    data["data"]["params"]["path"] = str(work / "xlsa17")
    data["data"]["params"]["class_map"] = str(source.parent / data["data"]["params"]["class_map"])
    data["hierarchy"]["file"] = str(source.parent / data["hierarchy"]["file"])
    if data.get("audit", {}).get("wordnet_map"):
        data["audit"]["wordnet_map"] = str(source.parent / data["audit"]["wordnet_map"])
    data["features"]["dim"] = dim
    spec_path = work / source.name
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    before = os.environ.get("ZSL_HOME")
    os.environ["ZSL_HOME"] = str(work / "home")
    try:
        bench = load_benchmark(load_spec(spec_path))
        return write_bundle(bench, work / "bundle")
    finally:
        if before is None:
            del os.environ["ZSL_HOME"]
        else:
            os.environ["ZSL_HOME"] = before


def _child(bundle: Path, method: str, scores_out: Path) -> dict[str, Any]:
    """In a fresh process: fit and predict ``method`` on ``bundle``, timed; scores to a file."""
    import torch

    from harness.bundles import Bundle

    sys.dont_write_bytecode = True  # no __pycache__ in a package folder (it would change its hash)
    path = REPO / "submissions" / method / "model.py"
    spec = importlib.util.spec_from_file_location(f"gpu_bench_{method}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tasks = Bundle(bundle)
    task = tasks.train_task(seed=0)
    features, candidates = tasks.test(SETTING)
    features = np.ascontiguousarray(features)
    model = getattr(module, METHODS[method])()
    start = time.perf_counter()
    model.fit(task)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    scores = model.predict(features, candidates)
    predict_s = time.perf_counter() - start
    np.save(scores_out, scores)
    cuda = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "fit_seconds": round(fit_s, 3),
        "predict_seconds": round(predict_s, 3),
        "chosen": model.hyperparameters_,
    }


def _run_child(
    work: Path, bundle: Path, method: str, device: str
) -> tuple[dict[str, Any], np.ndarray]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    scores = work / f"{method}-{device}.npy"
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(bundle), method, str(scores)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{method} on {device} failed: {done.stderr.strip()[-2000:]}")
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if device == "gpu" and info["device"] == "cpu":
        raise RuntimeError(f"{method}: the GPU run found no GPU (CUDA_VISIBLE_DEVICES?)")
    return info, np.load(scores)


def time_methods(
    work: Path,
    *,
    dim: int = DIM,
    devices: tuple[str, ...] = ("cpu", "gpu"),
    methods: tuple[str, ...] = tuple(METHODS),
    cpu_too: bool = False,
) -> dict[str, Any]:
    """Times of ``methods`` on ``devices`` at AWA2 size (``dim``-d features), in ``work``; the
    generative methods on the GPU only unless ``cpu_too``."""
    work.mkdir(parents=True, exist_ok=True)
    bundle = _bundle(work, dim)
    out: dict[str, Any] = {}
    for method in methods:
        on = (
            devices
            if cpu_too or method not in GENERATIVE
            else tuple(d for d in devices if d != "cpu")
        )
        runs = {d: _run_child(work, bundle, method, d) for d in on}
        entry: dict[str, Any] = {d: info for d, (info, _) in runs.items()}
        if method in GENERATIVE and "gpu" in runs:
            gpu_s = runs["gpu"][0]["fit_seconds"] + runs["gpu"][0]["predict_seconds"]
            entry["target_gpu_seconds"] = TARGET_GPU_S
            entry["gpu_target"] = "pass" if gpu_s <= TARGET_GPU_S else "fail"
        if "cpu" in runs and "gpu" in runs:
            cpu, gpu = runs["cpu"][1].astype(np.float64), runs["gpu"][1].astype(np.float64)
            entry["speedup_fit"] = round(
                runs["cpu"][0]["fit_seconds"] / max(runs["gpu"][0]["fit_seconds"], 1e-9), 2
            )
            scale = max(float(np.abs(cpu).max()), 1e-12)
            entry["gpu_vs_cpu"] = {
                "max_abs_diff_over_scale": float(np.abs(cpu - gpu).max()) / scale,
                "top1_agreement": float((cpu.argmax(1) == gpu.argmax(1)).mean()),
            }
        out[method] = entry
    return out


def measure(work: Path, *, cpu_too: bool = False) -> dict[str, Any]:
    """CPU and GPU times of the torch reference methods at AWA2 size, or why they were not
    measured."""
    reason = _unavailable()
    if reason is not None:
        return {"status": "not measured", "reason": reason}
    start = time.perf_counter()
    methods = time_methods(Path(work) / "gpu-methods", cpu_too=cpu_too)
    return {
        "status": "measured",
        "data": f"xlsa17 {DATASET} proposed split, fixture features, dim {DIM}",
        "setting_predicted": SETTING,
        "cpu_threads": 1,
        "methods": methods,
        "wall_seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs=3, metavar=("BUNDLE", "METHOD", "SCORES"))
    parser.add_argument(
        "--cpu-too", action="store_true", help="time the generative methods on the CPU as well"
    )
    args = parser.parse_args()
    if args.child:
        bundle, method, scores = args.child
        print(json.dumps(_child(Path(bundle), method, Path(scores))))
        return
    import tempfile

    result = measure(Path(tempfile.mkdtemp(prefix="zsl-gpu-bench-")), cpu_too=args.cpu_too)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
