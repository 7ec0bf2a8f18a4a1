"""The smoke run of ``zsl submission validate --spec``: a model fitted and asked to predict on a
small subsample of the benchmark, through the run's own machinery, so that what would fail the
run (an exception in ``fit``, an attribute the task does not have, scores of the wrong shape or
not finite, a broken save/load, a pass that depends on its batches) fails validation instead.

The subsample (:class:`SmokeBenchmark`) is deterministic (drawn from the benchmark hash) and
made only of what a model may see: at most :data:`IMAGES_PER_CLASS` training images of every
class of each fit (every class is kept, so each candidate a setting names that the model was
told is seen has images), and at most :data:`TEST_ROWS` test rows of each setting, chosen by
position, never by label. The fits and passes are :func:`harness.runners.judge.run_model`'s,
with the worker's and the judge's checks unchanged; nothing is scored or stored.

See docs/runners.md.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.errors import RunnerError
from harness.core.tempdirs import run_directory
from harness.data.prepare import PreparedBenchmark
from harness.runners.base import RunJob
from harness.runners.judge import run_model
from harness.submission.package import Package
from harness.submission.resources import cap_resources, effective_caps
from harness.submission.unpack import snapshot_package

__all__ = [
    "IMAGES_PER_CLASS",
    "SMOKE_TIME_S",
    "TEST_ROWS",
    "SmokeBenchmark",
    "SmokeRun",
    "smoke_run",
]

#: Training images kept of each class (a class with fewer keeps all of them).
IMAGES_PER_CLASS = 5
#: Test rows kept of each prediction setting.
TEST_ROWS = 16
#: The smoke run's wall clock at most (every phase together; ``resources.time_s`` if lower).
SMOKE_TIME_S = 120.0
#: The image splits a fit trains on, each cut to :data:`IMAGES_PER_CLASS` per class.
IMAGE_SPLITS = ("splits/train_images", "splits/val_images", "splits/cal_fit_images")


def _seed(bench_hash: str, what: str) -> int:
    digest = hashlib.sha256(f"{bench_hash}/smoke/{what}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def per_class(images: np.ndarray, labels: np.ndarray, keep: int, seed: int) -> np.ndarray:
    """At most ``keep`` of ``images`` of each class (``labels``: their classes), drawn with
    ``seed``, in their original order."""
    key = np.random.default_rng(seed).random(len(images))
    order = np.lexsort((key, labels))
    sorted_labels = labels[order]
    rank = np.arange(len(order)) - np.searchsorted(sorted_labels, sorted_labels, side="left")
    return np.asarray(images)[np.sort(order[rank < keep])]


class SmokeBenchmark(PreparedBenchmark):
    """``bench`` cut down for a smoke run (see the module docstring): the same spec, classes,
    embeddings, candidates and hash; fewer training images and test rows."""

    def __init__(self, bench: PreparedBenchmark) -> None:
        super().__init__(bench.spec, bench.frozen)
        self._cut: dict[str, np.ndarray] = {}

    def array(self, name: str) -> np.ndarray:
        if name not in IMAGE_SPLITS:
            return super().array(name)
        if name not in self._cut:
            images = super().array(name)
            labels = np.asarray(super().array("labels"))[images]
            self._cut[name] = per_class(images, labels, IMAGES_PER_CLASS, _seed(self.hash, name))
        return self._cut[name]

    def rows(self, setting: str) -> np.ndarray:
        key = f"rows/{setting}"
        if key not in self._cut:
            rows = super().rows(setting)
            rng = np.random.default_rng(_seed(self.hash, key))
            chosen = rng.choice(len(rows), size=min(TEST_ROWS, len(rows)), replace=False)
            self._cut[key] = rows[np.sort(chosen)]
        return self._cut[key]

    def describe(self) -> str:
        """What the subsample holds, in words (the main fit's data; every setting's rows)."""
        train, val = self.array("splits/train_images"), self.array("splits/val_images")
        labels = np.asarray(self.array("labels"))
        classes = len(np.unique(labels[np.concatenate([train, val])]))
        settings = self.spec.prediction_settings()
        fits = "the validation fit, then the main fit" if self.spec.validation_settings() else "fit"
        return (
            f"{self.spec.benchmark} v{self.spec.version} cut down: {fits}, on at most"
            f" {IMAGES_PER_CLASS} training images per class (the main fit: {len(train) + len(val)}"
            f" images of {classes} seen classes), predicting at most {TEST_ROWS} rows of each"
            f" setting ({', '.join(settings)}); no test label read"
        )


_TIMED_OUT = re.compile(r"timed out(?: in (\S+))? after .*")


def _smoke_timeout(message: str, limit: float) -> str:
    """A run's error whose wall clock was the smoke run's own limit (below ``resources.time_s``):
    a timeout says so, and what to do, instead of asking for more ``resources.time_s``."""
    first, *rest = message.splitlines() or [""]
    found = _TIMED_OUT.search(first)
    if found is None:
        return message
    phase = f" in {found[1]}" if found[1] else ""
    head = (
        f"{first[: found.start()]}timed out{phase} after {limit:g} s, the smoke run's limit (at"
        f" most {SMOKE_TIME_S:g} s, or resources.time_s where lower)"
    )
    more = (
        f"  to pass: fit and predict on this subsample within {limit:g} s, or validate without"
        " --spec (no smoke run)"
    )
    kept = [line for line in rest if not line.strip().startswith("to give it more time")]
    return "\n".join([head, more, *kept])


@dataclass(frozen=True)
class SmokeRun:
    """A smoke run that passed (or ``skipped``: why it could not run here)."""

    runner: str
    sample: str
    wall_s: float
    limit_s: float
    skipped: str | None = None
    transductive: bool = False

    def describe(self) -> str:
        """One line for ``zsl submission validate``."""
        if self.skipped is not None:
            return f"smoke run skipped: {self.skipped}"
        # A transductive package's passes are not checked against each other (as in a run).
        same = "" if self.transductive else ", and the same in two passes"
        return (
            f"smoke run passed in runner '{self.runner}' ({self.wall_s:.1f} s of at most"
            f" {self.limit_s:g} s): {self.sample}; state saved and loaded, scores of the right"
            f" shape and finite{same}"
        )


def smoke_run(
    package: Package, bench: PreparedBenchmark, runner: str, *, shown: str | Path | None = None
) -> SmokeRun:
    """Fit ``package``'s model and predict with it on :class:`SmokeBenchmark` of ``bench`` in
    ``runner``, as a run does (from a snapshot of the package, with its capped resources and a
    wall clock of at most :data:`SMOKE_TIME_S`). Skipped (said so) for a package asking for
    more GPUs than this machine has; ``shown``: the package as the user named it.

    Raises :class:`RunnerError` with what the run would have said, headed by what was run.
    """
    model = package.manifest.model
    if model is None:
        raise ValueError(f"{package.root}: a predictions package has no model to run")
    cut = SmokeBenchmark(bench)
    sample = cut.describe()
    capped = cap_resources(package.manifest.resources, effective_caps())
    if capped.refused:
        return SmokeRun(runner, sample, 0.0, 0.0, skipped=str(capped.refused[0]))
    resources = capped.resources
    limit = min(SMOKE_TIME_S, float(resources.time_s))
    began = time.perf_counter()
    with run_directory("zsl-smoke-") as work:
        # Named as the package: failed runs' logs under ZSL_HOME/logs are named after it.
        snapshot = snapshot_package(package, work / "snapshot" / package.name)
        base = RunJob(
            bundle=work,
            package=snapshot.root,
            entrypoint=model.entrypoint,
            out=work,
            seed=package.manifest.seed,
            timeout_s=limit,
            memory_gb=resources.memory_gb,
            cpus=resources.cpus,
            gpus=resources.gpus,
        )
        (work / "run").mkdir()
        try:
            run_model(
                cut,
                base,
                runner,
                work / "run",
                name=package.name,
                transductive=package.manifest.declarations.transductive,
                class_embedding=package.manifest.declarations.class_embedding,
            )
        except RunnerError as err:
            said = str(err) if limit >= resources.time_s else _smoke_timeout(str(err), limit)
            raise RunnerError(
                f"{shown if shown is not None else package.root}: the smoke run failed, as a run"
                f" would:\n  {said}\n  smoke run: runner '{runner}', at most {limit:g} s;"
                f" {sample}"
            ) from None
    transductive = package.manifest.declarations.transductive
    return SmokeRun(runner, sample, time.perf_counter() - began, limit, transductive=transductive)
