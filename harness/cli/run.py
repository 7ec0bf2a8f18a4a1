"""``zsl run`` and ``zsl demo``: score submissions end to end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

# The package alone, which imports no backend until one of its names is used.
from harness import runners
from harness.cli._common import (
    REPORTED_DIR,
    SITE_DIR,
    DatabaseUrl,
    Executor,
    Jobs,
    MaxRetries,
    RayAddress,
    SiteFolder,
    chosen_executor,
    reports_errors,
    stderr,
    stdout,
)
from harness.core.errors import (
    HarnessError,
    NotApplicableError,
    PredictionError,
    SpecError,
    SubmissionError,
)
from harness.core.lazy import lazy_module
from harness.core.registry import freeze_all
from harness.core.tempdirs import run_directory

if TYPE_CHECKING:
    from harness import class_embedding, pipeline, records, scoring
    from harness import plan as planning
    from harness import spec as spec_module
    from harness import store as run_store
    from harness.ci import config as ci_config
    from harness.data.prepare import PreparedBenchmark
    from harness.executors import matrix as executor_matrix
    from harness.records import RunRecord
    from harness.results import records_io, standing
    from harness.results import reported as reported_values
    from harness.site import builder as site_builder
    from harness.submission import package as submission_package
    from harness.submission.package import Package
else:
    # The implementation, imported when a command runs: the --help of `zsl run` and `zsl demo`
    # must not import it (pydantic models, NumPy, SQLAlchemy, Jinja2).
    class_embedding = lazy_module("harness.class_embedding")
    pipeline = lazy_module("harness.pipeline")
    planning = lazy_module("harness.plan")
    records = lazy_module("harness.records")
    scoring = lazy_module("harness.scoring")
    spec_module = lazy_module("harness.spec")
    run_store = lazy_module("harness.store")
    ci_config = lazy_module("harness.ci.config")
    executor_matrix = lazy_module("harness.executors.matrix")
    records_io = lazy_module("harness.results.records_io")
    standing = lazy_module("harness.results.standing")
    reported_values = lazy_module("harness.results.reported")
    site_builder = lazy_module("harness.site.builder")
    submission_package = lazy_module("harness.submission.package")

__all__ = ["RUNNER_HELP", "demo", "family_specs", "run"]

_BACKENDS = [f"'{name}' ({text})" for name, text in runners.BACKENDS.items()]
RUNNER_HELP = (
    f"isolation for the package's code: {', '.join(_BACKENDS[:-1])} or {_BACKENDS[-1]};"
    f" default: {runners.DEFAULT_CHOICE}"
)


def _summary(record: RunRecord) -> str:
    parts = []
    for entry in record.scores:
        if entry.metric == record.benchmark.primary.get(entry.setting):
            parts.append(f"{entry.setting} {entry.metric} {100 * entry.value:.1f}")
    badges = standing.badges_text(record.benchmark)
    return f"{record.submission.name} on {record.benchmark.id} {badges}: " + ", ".join(parts)


def _note(message: str) -> None:
    stderr.print(Text.assemble(("note: ", "bold yellow"), message), soft_wrap=True)


def _warn_below_chance(record: RunRecord) -> bool:
    """Each below-chance score of ``record`` (:func:`below_chance`) as a warning on stderr;
    whether there was any."""
    warnings = scoring.below_chance(record)
    for warning in warnings:
        stderr.print(
            Text.assemble(
                ("warning: ", "bold red"),
                f"{records_io.describe_key(records.run_key(record))}: {warning}",
            ),
            soft_wrap=True,
        )
    return bool(warnings)


@reports_errors
def run(
    packages: Annotated[
        list[Path] | None,
        typer.Argument(
            help="submission folders, .zip or .tar.gz (with --matrix and none given: every"
            " package under submissions/ beside the configuration)",
            exists=True,
            show_default=False,
        ),
    ] = None,
    spec: Annotated[
        list[Path] | None,
        typer.Option(
            help="benchmark spec (repeat for several)",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    matrix: Annotated[
        Path | None,
        typer.Option(
            help="take the specs from a CI configuration (leaderboard/ci.yaml)",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    family: Annotated[
        bool,
        typer.Option(
            "--family",
            help="run each spec's whole benchmark family (its 'family:' members: the"
            " validation variants of its dataset and split), each package's runs on one family"
            " as one job",
        ),
    ] = False,
    runner: Annotated[str | None, typer.Option(help=RUNNER_HELP, show_default=False)] = None,
    executor: Executor = None,
    jobs: Jobs = None,
    ray_address: RayAddress = None,
    max_retries: MaxRetries = 2,
    rerun: Annotated[
        bool, typer.Option("--rerun", help="run again what the store holds with the same hashes")
    ] = False,
    database_url: DatabaseUrl = None,
    no_store: Annotated[
        bool,
        typer.Option(
            "--no-store", help="run and score one package on one spec, print, store nothing"
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="validate and plan only: package, spec, frozen benchmark, runner, and the"
            " stored run each run would replace; no model runs, nothing is stored",
        ),
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="store the run over a stored run of the same submission name and version"
            " made from another package hash (changed files), which is refused without it",
        ),
    ] = False,
) -> None:
    """Prepare, validate, run, score and store submissions on benchmarks.

    One package and one --spec: that run, its steps shown, as always. Several packages or
    specs (or --matrix, --executor, --family): every package on every spec, on the local
    process pool or a Ray cluster; each record is stored as it arrives, and runs the store
    already holds for the same package, benchmark and spec hashes are skipped, so running it
    again resumes. A package's runs on the members of one benchmark family are one job.

    A run that replaces a stored one (same benchmark version and submission version, whatever
    the runner) says so on stderr; a score below chance is a warning on stderr. A package whose
    files changed (another package hash) under a stored name and version is refused before it
    runs: bump its version, or pass --replace.
    """
    specs, packages = _matrix_inputs(list(packages or []), list(spec or []), matrix)
    if family:
        specs = family_specs(specs)
    if dry_run:
        _dry_run(
            packages,
            specs,
            runner=runner,
            database_url=database_url,
            store=not no_store,
            refuse_changed_package=not replace,
        )
        return
    single = len(packages) == 1 and len(specs) == 1
    if single and matrix is None and executor is None and jobs is None and ray_address is None:
        record = pipeline.run_submission(
            packages[0],
            specs[0],
            runner=runner,
            database_url=database_url,
            store=not no_store,
            refuse_changed_package=not replace,
        )
        stdout.print(
            _summary(record) + (" (not stored: --no-store)" if no_store else ""),
            soft_wrap=True,
        )
        _warn_below_chance(record)
        return
    if no_store:
        raise SubmissionError(
            "--no-store runs one package on one --spec (no --matrix, --executor, --jobs or"
            " --ray-address): the matrix stores each run as it arrives"
        )
    pairs = _applicable_pairs(packages, specs)
    report = executor_matrix.run_matrix(
        [executor_matrix.RunRequest(p, s, runner) for p, s in pairs],
        executor=chosen_executor(executor, ray_address),
        jobs=jobs,
        ray_address=ray_address,
        database_url=database_url,
        max_retries=max_retries,
        rerun=rerun,
        refuse_changed_package=not replace,
    )
    below = 0
    for result in report.results:
        if result.record is not None:
            stdout.print(_summary(result.record))
            if result.replaced is not None:
                _note(pipeline.replacement_message(result.replaced, result.record))
            below += _warn_below_chance(result.record)
    stdout.print(
        f"{report.count('done')} done, {report.count('failed')} failed,"
        f" {report.count('skipped')} skipped (stored already) in {report.wall_s:.1f} s"
        + (f"; {below} with scores below chance (warnings above)" if below else "")
    )
    if report.exit_code:
        raise typer.Exit(code=report.exit_code)


def _dry_run(
    packages: list[Path],
    specs: list[Path],
    *,
    runner: str | None,
    database_url: str | None,
    store: bool,
    refuse_changed_package: bool,
) -> None:
    """Print the plan of every package on every spec (:func:`dry_run`). One pair: its
    error is the command's; several: each pair's error is printed, and the exit code is the
    highest (1 user, 2 integrity)."""
    pairs = [(package, spec_path) for spec_path in specs for package in packages]
    worst = 0
    for package, spec_path in pairs:
        try:
            plan = pipeline.dry_run(
                package,
                spec_path,
                runner=runner,
                database_url=database_url,
                store=store,
                refuse_changed_package=refuse_changed_package,
            )
        except HarnessError as err:
            if len(pairs) == 1:
                raise
            if isinstance(err, NotApplicableError):  # not a failure: the pair is left out
                _note(f"skipped {package} on {spec_path}: {err}")
                continue
            stderr.print(
                Text.assemble(("error: ", "bold red"), f"{package} on {spec_path}: {err}"),
                soft_wrap=True,
            )
            worst = max(worst, err.exit_code)
            continue
        for line in plan.lines():
            stdout.print(line, soft_wrap=True)
    if worst:
        raise typer.Exit(code=worst)


def family_specs(specs: list[Path]) -> list[Path]:
    """Every member spec of each spec's benchmark family, in family order, each once."""
    expanded: dict[Path, Path] = {}
    for path in specs:
        spec = spec_module.load_spec(path)
        found = spec_module.load_family(spec)
        if found is None:
            raise SpecError(
                f"{path}: --family: this spec declares no benchmark family (a 'family:' key"
                " naming its members); run it without --family"
            )
        for member in found.members:
            expanded.setdefault(member.path, member.path)
    return list(expanded)


def _applicable_pairs(packages: list[Path], specs: list[Path]) -> list[tuple[Path, Path]]:
    """Every (package, spec) pair of a matrix but those whose package uses a kind of class
    embedding the spec lacks (:mod:`harness.class_embedding`), each left out with a note.

    A package archive, or a spec or package that does not load, stays in: its run says what is
    wrong with it."""
    uses = {package: _declared_class_embedding(package) for package in packages}
    pairs = []
    for spec_path in specs:
        try:
            spec = spec_module.load_spec(spec_path)
        except HarnessError:
            spec = None
        for package in packages:
            declared = uses[package]
            reason = None
            if spec is not None and declared is not None:
                reason = class_embedding.not_applicable_reason(declared, spec)
            if reason is None:
                pairs.append((package, spec_path))
            else:
                _note(f"skipped {package} on {spec_path}: not applicable: {reason}")
    return pairs


def _declared_class_embedding(package: Path) -> str | None:
    """A package folder's ``declarations.class_embedding``; None for an archive or a folder
    that is not a valid package."""
    if not package.is_dir():
        return None
    try:
        return submission_package.load_package(package).manifest.declarations.class_embedding
    except HarnessError:
        return None


def _matrix_inputs(
    packages: list[Path], specs: list[Path], matrix: Path | None
) -> tuple[list[Path], list[Path]]:
    """The specs and packages of a ``zsl run``: from the command line, or --matrix."""
    if matrix is not None:
        root = ci_config.config_root(matrix, Path.cwd())
        specs += ci_config.config_spec_paths(ci_config.load_ci_config(matrix), root, matrix)
        if not packages:
            packages = sorted(
                p.parent for p in (root / "submissions").glob(f"*/{submission_package.MANIFEST}")
            )
    if not specs:
        raise SubmissionError("give a benchmark spec (--spec, repeatable) or --matrix ci.yaml")
    if not packages:
        raise SubmissionError("give at least one submission package")
    return specs, packages


def _ensure_predictions(package: Package, bench: PreparedBenchmark, runner: str) -> None:
    """Regenerate a shipped predictions package's files when missing or made for other data."""
    if (
        package.manifest.kind != "predictions"
        or package.manifest.prediction_files.generator is None
    ):
        return
    paths: dict[str, Path] = {
        s: package.prediction_path(bench.spec.benchmark, s)
        for s in bench.spec.prediction_settings()
    }
    try:
        pipeline.read_all(bench, paths)
    except PredictionError:
        pipeline.generate_prediction_files(package, bench, runner=runner)


@reports_errors
def demo(
    spec: Annotated[Path, typer.Option(help="demo spec")] = Path("specs/demo.yaml"),
    submissions: Annotated[Path, typer.Option(help="folder of shipped submissions")] = Path(
        "submissions"
    ),
    out: SiteFolder = SITE_DIR,
    database_url: DatabaseUrl = None,
    runner: Annotated[str | None, typer.Option(help=RUNNER_HELP, show_default=False)] = None,
) -> None:
    """Run every shipped submission on the demo benchmark and build the leaderboard site."""
    if not spec.is_file() or not submissions.is_dir():
        raise SubmissionError(
            f"{spec} or {submissions}/ not found: run `zsl demo` from the repository root"
            " or pass --spec and --submissions"
        )
    packages = sorted(p.parent for p in submissions.glob(f"*/{submission_package.MANIFEST}"))
    if runner is not None:
        runners.runners.get(runner)  # an unknown name fails before any work
    else:
        runner = (
            runners.default_runner()
        )  # once (one warning at most): no shipped package names an image
    freeze_all()
    # The demo benchmark is planned once for every package: spec loaded, benchmark prepared.
    prepared = planning.Steps()
    loaded = spec_module.load_spec(spec)
    with prepared("prepare", f"prepare {loaded.benchmark} v{loaded.version}"):
        benchmark = planning.plan_benchmark(loaded, spec)
    for package_dir in packages:
        shipped = submission_package.load_package(package_dir)
        # A package for another kind of benchmark (CLIP zero-shot needs CLIP text embeddings)
        # is no failure of the demo: one line says why it is left out.
        reason = class_embedding.not_applicable_reason(
            shipped.manifest.declarations.class_embedding, loaded
        )
        if reason is not None:
            _note(f"skipped {shipped.name}: not applicable: {reason}")
            continue
        _ensure_predictions(shipped, benchmark.prepared, runner)
        steps = planning.Steps()
        steps.timings.update(prepared.timings)
        with run_directory("zsl-run-") as tmp:
            with steps("validate", f"validate {package_dir}"):
                package = planning.plan_package(package_dir, tmp, runner=runner)
            plan = planning.plan_run(benchmark, package, runner=runner, timings=steps.timings)
            record = pipeline.run_planned(plan, database_url=database_url, steps=steps)
        stdout.print(_summary(record))
        _warn_below_chance(record)
    runs = run_store.load_runs(run_store.open_store(database_url))
    values = reported_values.reported_in(REPORTED_DIR)
    index = site_builder.build_site(runs, out, reported=values)
    stdout.print(f"leaderboard: {index.resolve()}")
