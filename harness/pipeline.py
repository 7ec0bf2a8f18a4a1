"""``zsl run``: prepare → validate → run → score → store, one submission on one benchmark.

Each step is a call into the module that owns it; this module only composes them, times them,
shows progress, and assembles the :class:`RunRecord`. Nothing is stored unless every step
succeeded, and the store writes the record in one transaction.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.text import Text

import harness
from harness.audit import benchmark_audit
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.describe import structure_summary
from harness.errors import RunnerError, SubmissionError
from harness.records import BenchmarkInfo, RunRecord, SubmissionInfo
from harness.registry import freeze_all
from harness.results.prediction_archive import archive_predictions
from harness.runners import RunJob, RunOutcome, default_runner, runners
from harness.runners.outputs import (
    WORKER_JSON,
    OutputDir,
    collect_predictions,
    read_worker_status,
)
from harness.scoring import score
from harness.spec import Spec, load_spec
from harness.submission.package import Package
from harness.submission.predictions import Predictions, read_predictions
from harness.submission.unpack import open_package
from harness.tasks import write_bundle, write_model_bundle

_console = Console(stderr=True, highlight=False, emoji=False, markup=False)


class Steps:
    """Times named steps and shows a spinner on a terminal while each runs."""

    def __init__(self, quiet: bool = False) -> None:
        self.timings: dict[str, float] = {}
        self.quiet = quiet

    @contextmanager
    def __call__(self, name: str, label: str) -> Iterator[None]:
        start = time.perf_counter()
        if self.quiet:
            yield
        else:
            with _console.status(f"{label}…"):
                yield
        self.timings[name] = round(time.perf_counter() - start, 4)
        if not self.quiet:
            _console.print(
                Text.assemble("  ", ("✓", "green"), f" {label} ({self.timings[name]:.1f} s)")
            )


def environment() -> dict[str, str]:
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    for dist in ("numpy", "scipy", "scikit-learn", "safetensors"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return env


def _run_model(
    bench: PreparedBenchmark,
    package: Package,
    runner: str,
    work: Path,
    logs: dict[str, str],
    env: dict[str, str],
) -> dict[str, Path]:
    """Run the model in ``runner``; return the prediction files the harness made of its outputs.

    A container run adds the image it ran in to ``env`` (``image``: ``reference@sha256:…``, the
    run record's ``environment``; other runners run on the harness's own environment).

    The model sees a model bundle (every setting the same shuffled test images); the row map
    stays here, and the worker's all-row outputs are read without trust (no link followed,
    sizes bounded) and mapped into each setting's frozen row order under ``work/predictions``.
    """
    model = package.manifest.model
    assert model is not None
    # The main fit's test images stay outside the bundle (never bound into a sandbox): the runner
    # hands them to the worker, which serves them to predict only (see harness.tasks).
    secret = work / "secret"
    secret.mkdir(mode=0o700)
    rowmap = write_model_bundle(bench, work / "bundle", test_features=secret / "test-features.npy")
    out = work / "out"
    out.mkdir()
    job = replace(
        _package_job(package, work / "bundle", out, package.manifest.resources.time_s),
        entrypoint=model.entrypoint,
        transductive=package.manifest.declarations.transductive,
        test_features=secret / "test-features.npy",
    )
    outcome = runners.get(runner).run(job)
    logs.update(reason=outcome.reason, stdout=outcome.stdout, stderr=outcome.stderr)
    logs["test_features"] = str(outcome.details.get("test_features", "not reported"))
    if "image" in outcome.details:
        env["image"] = str(outcome.details["image"])
    _check_ran(outcome, package.name, runner)
    status = read_worker_status(out)
    if status.get("exit_code") != 0:
        raise RunnerError(
            f"{out / WORKER_JSON}: the worker exited 0 but reports {status.get('exit_code')!r}"
            f" ({str(status.get('message', ''))[:500]})"
        )
    logs["inductive_check"] = str(status.get("inductive_check", "not reported"))
    logs["worker_timings"] = json.dumps(status.get("timings", {}), sort_keys=True)
    return collect_predictions(
        out, rowmap, bench, work / "predictions", prediction_settings(bench.spec)
    )


def _package_job(package: Package, bundle: Path, out: Path, time_s: float) -> RunJob:
    """A job running code of ``package`` on ``bundle`` into ``out``, with its declared seed and
    resources and a wall clock of ``time_s`` seconds."""
    resources = package.manifest.resources
    return RunJob(
        bundle=bundle,
        package=package.root,
        entrypoint="",
        out=out,
        seed=package.manifest.seed,
        timeout_s=float(time_s),
        memory_gb=resources.memory_gb,
        cpus=resources.cpus,
        gpus=resources.gpus,
    )


def _check_ran(outcome: RunOutcome, what: str, runner: str) -> None:
    """Raise a :class:`RunnerError` naming ``what`` ran on ``runner`` (with the last lines of
    its stderr) unless the run succeeded."""
    if outcome.ok:
        return
    tail = outcome.stderr.strip().splitlines()[-3:]
    raise RunnerError(
        f"{what} on runner '{runner}': {outcome.reason}"
        + (f"; stderr ends: {' | '.join(tail)}" if tail else "")
    )


#: Bytes a generated prediction file may hold beyond its float64 cells (header, metadata).
GENERATED_HEADROOM = 1 << 20


def generate_prediction_files(
    package: Package,
    bench: PreparedBenchmark,
    *,
    timeout_s: float | None = None,
    runner: str | None = None,
) -> None:
    """Run a predictions package's generator to write its prediction files.

    The generator is code from the package like any model's: it runs as ``python GEN BUNDLE
    OUT`` in a runner (default: the strongest this machine offers), with the package's
    resources (``timeout_s`` overrides ``resources.time_s``), and sees the task bundle only.
    """
    files = package.manifest.prediction_files
    if files.generator is None:
        raise SubmissionError(f"{package.root}: predictions.generator is not set")
    runner = runner or default_runner(package)
    with tempfile.TemporaryDirectory(prefix="zsl-gen-") as tmp:
        work = Path(tmp)
        bundle = write_bundle(bench, work / "bundle")
        out = work / "out"
        out.mkdir()
        time_s = timeout_s if timeout_s is not None else package.manifest.resources.time_s
        job = replace(_package_job(package, bundle, out, time_s), script=files.generator)
        outcome = runners.get(runner).run(job)
        _check_ran(outcome, f"{package.name} generator", runner)
        # The generator is untrusted: its files are copied through OutputDir, which follows no
        # link, takes regular files only and bounds their size by the dense contract's.
        made = OutputDir(out)
        for setting in prediction_settings(bench.spec):
            cells = len(bench.rows(setting)) * len(bench.columns(setting))
            target = package.prediction_path(bench.spec.benchmark, setting)
            made.copy_to(f"{setting}.safetensors", target, limit=8 * cells + GENERATED_HEADROOM)


def prediction_settings(spec: Spec) -> list[str]:
    """Every prediction file a run needs: test settings, then validation settings."""
    return [*spec.settings, *spec.validation_settings()]


def read_all(bench: PreparedBenchmark, paths: dict[str, Path]) -> dict[str, Predictions]:
    """Read and check the prediction file of every setting (validation ones are dense)."""
    fmt = bench.spec.predictions
    return {
        setting: read_predictions(
            path,
            benchmark_hash=bench.hash,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
            shape=(len(bench.rows(setting)), len(bench.columns(setting))),
            topk=fmt.k if fmt.format == "topk" and not setting.endswith("_val") else None,
        )
        for setting, path in paths.items()
    }


def benchmark_info(spec: Spec, bench: PreparedBenchmark) -> BenchmarkInfo:
    return BenchmarkInfo(
        id=spec.benchmark,
        version=spec.version,
        title=spec.title,
        hash=bench.hash,
        spec_hash=spec.spec_hash(),
        primary=dict(spec.primary),
        n_classes=len(bench.class_ids),
        n_seen=len(bench.seen_classes),
        n_unseen=len(bench.array("splits/unseen_classes")),
        structure=structure_summary(bench),
    )


def submission_info(package: Package) -> SubmissionInfo:
    m = package.manifest
    return SubmissionInfo(
        name=m.name,
        version=m.version,
        kind=m.kind,
        package_hash=package.hash(),
        authors=list(m.authors),
        paper=m.paper,
        url=m.url,
        description=m.description,
        declarations=m.declarations.model_dump(mode="json"),
    )


def run_submission(
    package_path: str | Path,
    spec_path: str | Path,
    *,
    runner: str | None = None,
    database_url: str | None = None,
    store: bool = True,
    quiet: bool = False,
    archive_to: Path | None = None,
) -> RunRecord:
    """Score one package on one benchmark and store the record (one transaction).

    ``runner`` runs model code; None picks the strongest this machine offers
    (``harness.runners.default_runner``: sandbox, else container, else local with a warning).
    ``archive_to``: with ``store=False``, archive the scored prediction files under this root
    all the same (the executors' workers, whose driver stores the record; see
    :mod:`harness.executors`).
    """
    freeze_all()
    steps = Steps(quiet)
    spec = load_spec(spec_path)
    with steps("prepare", f"prepare {spec.benchmark} v{spec.version}"):
        bench = load_benchmark(spec)
    with tempfile.TemporaryDirectory(prefix="zsl-run-") as tmp:
        with steps("validate", f"validate {package_path}"):
            # A folder is used in place; a .zip/.tar.gz is unpacked safely into the run's tmp.
            package = open_package(Path(package_path), Path(tmp) / "package")
            if package.manifest.kind == "model" and runner is not None:
                runners.get(runner)  # unknown runner names fail before any work
        if package.manifest.kind == "model" and runner is None:
            runner = default_runner(package)  # outside the step: its warning is not a spinner's
        logs: dict[str, str] = {}
        env = environment()
        if package.manifest.kind == "model":
            assert runner is not None
            with steps("run", f"run {package.name} ({runner} runner)"):
                paths = _run_model(bench, package, runner, Path(tmp), logs, env)
        else:
            paths = {
                s: package.prediction_path(spec.benchmark, s) for s in prediction_settings(spec)
            }
        with steps("score", "score"):
            predictions = read_all(bench, paths)
            scores = score(bench, predictions)
        # Keep the scored files (model outputs live in tmp) for `zsl results rescore`.
        if store or archive_to is not None:
            archive_predictions(paths, predictions, root=archive_to)
        submission = submission_info(package)  # hashes the files while they exist
    declared = package.manifest.declarations.backbone_pretrained_on
    leakage = benchmark_audit(spec, bench, class_set=declared)
    record = RunRecord(
        benchmark=benchmark_info(spec, bench),
        submission=submission,
        predictions_hashes={s: p.sha256 for s, p in predictions.items()},
        harness_version=harness.__version__,
        runner=runner if package.manifest.kind == "model" else "predictions",
        environment=env,
        timings=steps.timings,
        leakage=leakage,
        logs=logs,
        scores=scores,
        created_at=datetime.now(UTC).replace(microsecond=0),
    )
    if store:
        from harness.store import open_store, save_run

        with steps("store", "store"):
            save_run(open_store(database_url), record)
    return record
