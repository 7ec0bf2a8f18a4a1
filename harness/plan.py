"""The plan of a run: everything ``zsl run`` establishes before any model code runs.

Three steps, each done once for what it covers: :func:`plan_benchmark` (the validated spec,
its metric parameters parsed, and its frozen benchmark), :func:`plan_package` (the package
validated and, for a model, the private snapshot every phase runs from, hashed once) and
:func:`plan_run` (both for one run, with the runner chosen and resources capped).
:func:`plan_submission` makes the three for one package on one spec. ``zsl run``, the dry run,
the demo and the matrix driver take plans; a matrix worker plans again from paths and refuses a
spec or package whose hash is not the driver's. See docs/executors.md ("Plans").
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.text import Text

from harness.class_embedding import check_applicable
from harness.core.errors import HarnessError
from harness.core.registry import freeze_all
from harness.data.artifacts import benchmark_dir, cache_action
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.runners import default_runner, runners
from harness.runners.environments import check_requirements, refuse_unmet
from harness.spec import Spec, load_spec
from harness.submission.package import Package
from harness.submission.resources import CappedResources, cap_resources, effective_caps
from harness.submission.unpack import open_package, snapshot_package

__all__ = [
    "BenchmarkPlan",
    "PackagePlan",
    "RunPlan",
    "Steps",
    "plan_benchmark",
    "plan_package",
    "plan_run",
    "plan_submission",
]

#: Where the steps of a run, and what a run says on the way, are shown (stderr).
console = Console(stderr=True, highlight=False, emoji=False, markup=False)


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
            with console.status(f"{label}…"):
                yield
        self.timings[name] = round(time.perf_counter() - start, 4)
        if not self.quiet:
            console.print(
                Text.assemble("  ", ("✓", "green"), f" {label} ({self.timings[name]:.1f} s)")
            )


@dataclass(frozen=True)
class BenchmarkPlan:
    """A spec and its frozen benchmark.

    ``spec_path``: the spec file as the caller named it (messages name it so); ``bench``: the
    prepared benchmark, None only in a dry run's plan of a benchmark not prepared yet.
    """

    spec_path: Path
    spec: Spec
    bench: PreparedBenchmark | None

    @property
    def root(self) -> Path:
        """Where the frozen benchmark is (or would be) under ``ZSL_HOME``."""
        return benchmark_dir(self.spec.benchmark, self.spec.version)

    @property
    def prepared(self) -> PreparedBenchmark:
        """The prepared benchmark; refused for a dry run's plan of one not prepared."""
        if self.bench is None:
            raise HarnessError(
                f"{self.spec.benchmark} v{self.spec.version} is not prepared (a dry run's plan);"
                f" prepare it with `zsl data prepare {self.spec_path}`"
            )
        return self.bench


@dataclass(frozen=True)
class PackagePlan:
    """A validated package: ``package`` (for a model, its read-only snapshot) and its hash."""

    path: Path
    package: Package
    hash: str


@dataclass(frozen=True)
class RunPlan:
    """One package on one benchmark, ready to run: nothing of the package has run yet.

    ``runner``: the runner a model runs in (None for a predictions package); ``resources``: a
    model's declared resources capped by this machine, with a note per capped field (None for
    a predictions package); ``prediction_paths``: a predictions package's file per setting
    (empty for a model); ``timings``: seconds of the planning steps (``prepare``,
    ``validate``), the first of the run record's timings.
    """

    benchmark: BenchmarkPlan
    package: PackagePlan
    runner: str | None
    resources: CappedResources | None
    prediction_paths: Mapping[str, Path] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def spec(self) -> Spec:
        return self.benchmark.spec


def plan_benchmark(spec: Spec, spec_path: str | Path, *, prepare: bool = True) -> BenchmarkPlan:
    """``spec``'s frozen benchmark, prepared (or reused, every artifact verified).

    ``prepare`` False (a dry run): a benchmark not prepared yet is left so (``bench`` None),
    nothing is written; a prepared one is verified all the same.
    """
    root = benchmark_dir(spec.benchmark, spec.version)
    if not prepare and cache_action(root, spec.data_hash()) == "create":
        return BenchmarkPlan(Path(spec_path), spec, None)
    return BenchmarkPlan(Path(spec_path), spec, load_benchmark(spec))


def plan_package(
    path: str | Path, workdir: Path, *, runner: str | None = None, snapshot: bool = True
) -> PackagePlan:
    """The package at ``path`` (a folder, used in place; an archive, unpacked safely under
    ``workdir``) validated, and hashed.

    For a model, ``runner`` (None: chosen later, by :func:`plan_run`) must be a known runner
    name, and with ``snapshot`` every phase runs from a private, read-only copy under
    ``workdir`` (:func:`harness.submission.unpack.snapshot_package`): the hash is the copy's.
    """
    holder = Path(tempfile.mkdtemp(prefix="package-", dir=workdir))
    package = open_package(Path(path), holder / "package")
    if package.manifest.kind == "model":
        if runner is not None:
            runners.get(runner)  # unknown runner names fail before any work
        if snapshot:
            package = snapshot_package(package, holder / "snapshot")
    return PackagePlan(Path(path), package, package.hash())


def plan_run(
    benchmark: BenchmarkPlan,
    package: PackagePlan,
    *,
    runner: str | None = None,
    timings: Mapping[str, float] | None = None,
) -> RunPlan:
    """``package`` on ``benchmark``: for a model, the runner (None: the strongest this machine
    offers, :func:`harness.runners.default_runner`), its ``model.requirements`` met there
    (:func:`~harness.runners.environments.check_requirements`) and its resources capped by
    this machine;
    for a predictions package, its files (missing ones are named with the command that writes
    them). A package using a kind of class embedding the benchmark lacks is refused first
    (:class:`~harness.core.errors.NotApplicableError`)."""
    manifest = package.package.manifest
    check_applicable(manifest.name, manifest.declarations.class_embedding, benchmark.spec)
    if manifest.kind == "model":
        if runner is None:
            runner = default_runner(package.package)
        # Refused here, before any model code runs: a requirement the runner's Python lacks
        # would otherwise fail the fit with ModuleNotFoundError.
        found = check_requirements(package.package, runner)
        refuse_unmet(found, package.package, shown=package.path, spec=benchmark.spec_path)
        capped = cap_resources(manifest.resources, effective_caps())
        return RunPlan(benchmark, package, runner, capped, timings=dict(timings or {}))
    spec = benchmark.spec
    paths = package.package.prediction_files(
        spec.benchmark, spec.prediction_settings(), spec=benchmark.spec_path
    )
    return RunPlan(benchmark, package, None, None, paths, dict(timings or {}))


def plan_submission(
    package_path: str | Path,
    spec_path: str | Path,
    workdir: Path,
    *,
    runner: str | None = None,
    steps: Steps | None = None,
    dry_run: bool = False,
) -> RunPlan:
    """The plan of one package on one spec: the spec loaded, its benchmark prepared (step
    ``prepare``), the package opened, validated and snapshotted (step ``validate``), the runner
    chosen; ``steps`` (default: quiet ones) times and shows each step.

    ``dry_run``: nothing is written (a benchmark not prepared stays so) and no snapshot made.
    The package's files live under ``workdir`` (the caller's) for as long as it runs.
    """
    freeze_all()
    steps = steps or Steps(quiet=True)
    spec = load_spec(spec_path)
    with steps("prepare", f"prepare {spec.benchmark} v{spec.version}"):
        benchmark = plan_benchmark(spec, spec_path, prepare=not dry_run)
    with steps("validate", f"validate {package_path}"):
        package = plan_package(package_path, workdir, runner=runner, snapshot=not dry_run)
    # Outside the steps: the default runner's warning is not a spinner's.
    return plan_run(benchmark, package, runner=runner, timings=steps.timings)
