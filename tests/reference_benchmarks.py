"""What the reference methods' equivalence tests share (a faster method against its previous
code): the benchmarks they run on, each frozen once per module, the packages' model modules, and
the check that two methods' scores give the same results.

``demo`` is the built-in demo; ``awa2-64d`` is AWA2's real split files (from the shared xlsa17
data), one image in :data:`IMAGES_KEPT` kept, with 64-d synthetic features: small enough to fit
every method and its previous code many times.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml

from harness.bundles import Bundle, write_bundle
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.metrics.flat import per_class_top_k_accuracy
from harness.metrics.gzsl import gzsl_accuracies
from harness.spec import load_spec
from tests.conftest import SHARED_DATA, SPECS, SUBMISSIONS, set_audit_inputs
from tests.test_xlsa17_methods import _spec as xlsa17_fixture_spec
from tests.xlsa17_fixture import make_release

NAMES = ("demo", "awa2-64d")
#: ``awa2-64d`` keeps one image in this many of the release (the same classes in the same roles):
#: the previous code the equivalence tests run is slow, and its cost grows with the images.
IMAGES_KEPT = 4


@dataclass(frozen=True)
class FrozenBenchmark:
    bench: PreparedBenchmark
    bundle: Bundle


def freeze_reference_benchmark(name: str, root: Path) -> FrozenBenchmark:
    """Freeze benchmark ``name`` (one of :data:`NAMES`) and write its bundle under ``root``.

    Made for module-scoped fixtures: those run before the autouse ``isolated_home`` and
    ``audit_inputs`` fixtures, so the environment they set is set here, for the freeze only.
    Skips when the shared xlsa17 files are absent.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZSL_HOME", str(root / "home"))
        set_audit_inputs(mp)
        if name == "demo":
            spec = SPECS / "demo.yaml"
        elif name == "awa2-64d":
            if not (SHARED_DATA / "xlsa17" / "AWA2" / "att_splits.mat").is_file():
                pytest.skip("shared xlsa17 files absent")
            make_release(root / "release", "AWA2", dim=64, one_image_in=IMAGES_KEPT)
            spec = xlsa17_fixture_spec(root, "AWA2", root / "release")
            data = yaml.safe_load(spec.read_text())
            del data["splits"]["expect"]  # the release's image counts, not those kept here
            spec.write_text(yaml.safe_dump(data, sort_keys=False))
        else:
            raise ValueError(f"unknown reference benchmark {name!r}; expected one of {NAMES}")
        bench = load_benchmark(load_spec(spec))
        return FrozenBenchmark(bench, Bundle(write_bundle(bench, root / "bundle")))


def package_module(name: str) -> ModuleType:
    """The ``model.py`` of reference package ``name`` (``submissions/<name>``), imported anew."""
    path = SUBMISSIONS / name / "model.py"
    spec = importlib.util.spec_from_file_location(f"reference_{name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_same_results(
    benchmark: FrozenBenchmark,
    setting: str,
    candidates: np.ndarray,
    scores: np.ndarray,
    expected: np.ndarray,
    *,
    atol: float,
    where: str,
) -> None:
    """``scores`` of ``setting`` are ``expected`` within ``atol``, rank the same class first on
    every image, and so give exactly the same per-class top-1 (ZSL) or GZSL accuracies and H."""
    scores, expected = scores.astype(np.float64), expected.astype(np.float64)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=atol, err_msg=where)
    np.testing.assert_array_equal(scores.argmax(axis=1), expected.argmax(axis=1), where)
    bench = benchmark.bench
    labels = bench.array("labels")[bench.rows(setting)]
    order = np.argsort(candidates)
    y = order[np.searchsorted(candidates[order], labels)]  # labels as columns of the scores
    if "gzsl" in setting:
        seen = np.isin(candidates, bench.seen_for(setting))
        assert gzsl_accuracies(y, scores, seen=seen) == gzsl_accuracies(y, expected, seen=seen), (
            where
        )
    else:
        classes = np.unique(y)
        got = per_class_top_k_accuracy(y, scores, classes=classes)
        assert got == per_class_top_k_accuracy(y, expected, classes=classes), where
