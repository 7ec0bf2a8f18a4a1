"""``zsl submission``: start, validate packages (folders or archives), run generators."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

# The package alone, which imports no backend until one of its names is used.
from harness import runners
from harness.cli._common import reports_errors, stdout
from harness.cli.run import RUNNER_HELP
from harness.core.errors import PredictionError, SubmissionError
from harness.core.lazy import lazy_module
from harness.core.tempdirs import run_directory

if TYPE_CHECKING:
    from harness import pipeline
    from harness import spec as spec_module
    from harness.data import prepare as preparation
    from harness.runners import entrypoint_check, environments, smoke
    from harness.runners.entrypoint_check import EntrypointCheck
    from harness.runners.environments import RequirementCheck
    from harness.runners.smoke import SmokeRun
    from harness.submission import package as submission_package
    from harness.submission import resources, scaffold, unpack
    from harness.submission.package import Package
    from harness.submission.resources import CappedResources
else:
    # The implementation, imported when a command runs: its --help must not import it (pydantic
    # models, NumPy).
    pipeline = lazy_module("harness.pipeline")
    spec_module = lazy_module("harness.spec")
    preparation = lazy_module("harness.data.prepare")
    entrypoint_check = lazy_module("harness.runners.entrypoint_check")
    environments = lazy_module("harness.runners.environments")
    smoke = lazy_module("harness.runners.smoke")
    submission_package = lazy_module("harness.submission.package")
    resources = lazy_module("harness.submission.resources")
    scaffold = lazy_module("harness.submission.scaffold")
    unpack = lazy_module("harness.submission.unpack")

__all__ = ["app", "validate_package"]

app = typer.Typer(
    no_args_is_help=True,
)

PackagePath = Annotated[
    Path, typer.Argument(help="submission folder", exists=True, file_okay=False)
]


@app.command()
@reports_errors
def init(
    name: Annotated[str, typer.Argument(help="package name (letters, digits, . _ -)")],
    kind: Annotated[
        str, typer.Option(help="'model' (model code) or 'predictions' (prediction files)")
    ] = "model",
    out: Annotated[
        Path,
        typer.Option("--out", help="folder to create the package folder NAME in", file_okay=False),
    ] = Path("."),
) -> None:
    """Write a working template package (submission.yaml, model.py, README.md) to start from."""
    if kind not in ("model", "predictions"):
        raise SubmissionError(f"--kind {kind!r}: choose 'model' or 'predictions'")
    chosen: Literal["model", "predictions"] = "model" if kind == "model" else "predictions"
    root = scaffold.write_template(name, out, kind=chosen)
    stdout.print(f"created {root} ({kind}); next: zsl submission validate {root}")


@dataclass(frozen=True)
class PackageValidation:
    """What ``zsl submission validate`` found in a valid package.

    ``files``: how many files the hash covers; ``review``: those that are neither ``.py``
    source nor plain data (a reviewer should look at them); ``entrypoint``: a model package's
    check (None for predictions); ``requirements``: its ``model.requirements`` against the
    runner's environment (None: it declares none); ``smoke``: its smoke run on ``--spec``'s
    benchmark (None: no spec); ``resources``: its ``resources`` capped by this machine
    (:func:`~harness.submission.resources.effective_caps`), one note per field a run here gets
    less of than declared (or, for GPUs, is refused).
    """

    name: str
    version: str
    kind: str
    package_hash: str
    files: int
    review: tuple[str, ...]
    entrypoint: EntrypointCheck | None
    resources: CappedResources
    requirements: RequirementCheck | None = None
    smoke: SmokeRun | None = None


def validate_package(
    package: Path, spec: Path | None = None, runner: str | None = None
) -> PackageValidation:
    """Check a package (folder or archive): its ``submission.yaml`` and files, a model's
    requirements against ``runner``'s environment (default: the runner a run would use), its
    entrypoint (in that runner) and, with ``spec``, its smoke run on that benchmark
    (:func:`harness.runners.smoke.smoke_run`); a predictions package's files against ``spec``'s
    benchmark; and its resources against this machine's caps.

    Raises
    ------
    SubmissionError
        The package is invalid or hostile, a requirement is not met, or its entrypoint check
        found problems (each listed).
    RunnerError
        Its smoke run failed (what the run would have said).
    """
    with run_directory("zsl-validate-") as tmp:
        loaded = unpack.open_package(package, tmp)
        m = loaded.manifest
        if spec is not None and m.kind == "predictions":
            bench = preparation.load_benchmark(spec_module.load_spec(spec))
            settings = bench.spec.prediction_settings()
            # Missing files are named with the command that writes them.
            paths = loaded.prediction_files(bench.spec.benchmark, settings, spec=spec)
            try:
                pipeline.read_all(bench, paths)
            except PredictionError as err:  # name the file by its path in the package
                raise _in_package_terms(err, loaded, paths.values()) from None
        checked, required, smoked = None, None, None
        if m.kind == "model":
            if runner is not None:
                runners.runners.get(runner)  # an unknown name fails before any work
            runner = runner or runners.default_runner(loaded)
            required = environments.check_requirements(loaded, runner)
            environments.refuse_unmet(required, loaded, shown=package, spec=spec)
            # Imports the package's code: in a runner (sandbox by default), never here.
            checked = entrypoint_check.check_entrypoint(loaded, runner)
            if not checked.ok:
                count = len(checked.problems)
                raise SubmissionError(
                    f"{package}: entrypoint {checked.entrypoint} (checked in runner"
                    f" '{checked.runner}'): {count} problem{'s' if count > 1 else ''}\n  "
                    + "\n  ".join(entrypoint_check.describe(checked))
                )
            if spec is not None:
                bench = preparation.load_benchmark(spec_module.load_spec(spec))
                smoked = smoke.smoke_run(loaded, bench, runner, shown=package)
        return PackageValidation(
            name=m.name,
            version=m.version,
            kind=m.kind,
            package_hash=loaded.hash(),
            files=len(loaded.files()),
            review=tuple(loaded.files_to_review()),
            entrypoint=checked,
            resources=resources.cap_resources(m.resources, resources.effective_caps()),
            requirements=required,
            smoke=smoked,
        )


@app.command()
@reports_errors
def validate(
    package: Annotated[
        Path,
        typer.Argument(help="submission folder, or a .zip / .tar.gz archive of one", exists=True),
    ],
    spec: Annotated[
        Path | None,
        typer.Option(
            help="a benchmark spec: a predictions package's files are checked against it; a"
            " model gets a smoke run, fit and predict on a small subsample of it in the runner"
            " under a tight time limit (the output says what was run)",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    runner: Annotated[
        str | None,
        typer.Option(help=RUNNER_HELP, show_default=False),
    ] = None,
) -> None:
    """Check a package (folder or archive): its submission.yaml and files, a model's
    requirements and entrypoint in the runner a run would use (and, with --spec, a smoke run);
    print its hash, and each resource a run on this machine gets less of than declared."""
    found = validate_package(package, spec, runner)
    stdout.print(f"ok {package}: {found.name} {found.version} ({found.kind}) {found.package_hash}")
    if found.requirements is not None:
        stdout.print(f"  {found.requirements.summary()}", soft_wrap=True)
    if found.entrypoint is not None:
        for line in entrypoint_check.describe(found.entrypoint):
            stdout.print(f"  {line}", soft_wrap=True)
    if found.smoke is not None:
        stdout.print(f"  {found.smoke.describe()}", soft_wrap=True)
    for note in found.resources.notes:
        stdout.print(f"  {note}", soft_wrap=True)
    # What the hash covers, for the reviewer: the count, and every file that is neither .py
    # source nor plain data (docs, configs, arrays), since those deserve a look.
    stdout.print(f"  {found.files} files hashed")
    for rel in found.review:
        stdout.print(f"  review: {rel} (neither .py source nor plain data)")


def _in_package_terms(
    err: PredictionError, package: Package, paths: Iterable[Path]
) -> PredictionError:
    """``err`` with the file it starts with named by its path in ``package`` (an archive is
    unpacked into a temporary folder, whose path means nothing to its author)."""
    text = str(err)
    for path in paths:
        if text.startswith(f"{path}: "):
            return PredictionError(package.display_name(path) + text[len(str(path)) :])
    return err


@app.command()
@reports_errors
def generate(
    package: PackagePath,
    spec: Annotated[Path, typer.Option(help="benchmark spec", exists=True, dir_okay=False)],
    runner: Annotated[
        str | None,
        typer.Option(help=RUNNER_HELP, show_default=False),
    ] = None,
) -> None:
    """Run a predictions package's generator on a benchmark's task bundle, in a runner."""
    loaded = submission_package.load_package(package)
    bench = preparation.load_benchmark(spec_module.load_spec(spec))
    pipeline.generate_prediction_files(loaded, bench, runner=runner)
    for setting in bench.spec.prediction_settings():
        stdout.print(f"wrote {loaded.prediction_path(bench.spec.benchmark, setting)}")
