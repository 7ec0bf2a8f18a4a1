"""``zsl run``: prepare → validate → run → score → store, one submission on one benchmark.

Each step is a call into the module that owns it; this module only composes them, times them,
shows progress, and assembles the :class:`RunRecord`. Nothing is stored unless every step
succeeded, and the store writes the record in one transaction; a run that replaces a stored
one says so on stderr (:func:`replacement_message`), and scores below chance
(:func:`harness.scoring.below_chance`) are kept in the record's ``logs["warnings"]``.
Everything checked before running is the run's plan (:mod:`harness.plan`): :func:`run_planned`
runs one, :func:`dry_run` (``zsl run --dry-run``) describes one, nothing run.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from rich.text import Text

import harness
import harness.store  # lazy: SQLAlchemy is imported when a store is first used
from harness.audit import benchmark_audit
from harness.bundles import write_bundle
from harness.class_embedding import embeddings_for
from harness.core.errors import SubmissionError
from harness.core.hashing import short_hash
from harness.core.registry import freeze_all
from harness.core.tempdirs import run_directory
from harness.data.prepare import PreparedBenchmark
from harness.data.sources import raw_inputs
from harness.hyperparameters import Hyperparameters
from harness.plan import PackagePlan, RunPlan, Steps, console, plan_submission
from harness.records import BenchmarkInfo, RunKey, RunRecord, SubmissionInfo
from harness.results.prediction_archive import archive_predictions
from harness.results.records_io import describe_key
from harness.runners import RunJob, default_runner, runners
from harness.runners.judge import ModelRun, check_ran, run_model
from harness.runners.outputs import OutputDir
from harness.runners.progress import ConsoleProgress, reporting
from harness.scoring import score, with_chance_warnings
from harness.spec import Spec
from harness.submission.package import MANIFEST, Package
from harness.submission.predictions import Predictions, read_predictions
from harness.submission.resources import cap_resources, effective_caps


def environment() -> dict[str, str]:
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    for dist in ("numpy", "scipy", "scikit-learn", "safetensors", "torch", "torchvision"):
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
) -> ModelRun:
    """Run the model in ``runner``: per fit a fit phase and its prediction passes, each a run
    of its own, judged outside them (:func:`harness.runners.judge.run_model`), from the
    package's snapshot. Returns the prediction files it made, the fitted states' hashes, the
    phases' timings (``fit_<fit>``, ``save_<fit>``, ``predict_<setting>``, ``check_<fit>``
    seconds, ``peak_rss_mib``), what the model exposed after each fit
    (:mod:`harness.hyperparameters`) and the logs; a container run also the image it ran in
    (``reference@sha256:…``, the run record's ``environment``).
    """
    model = package.manifest.model
    assert model is not None
    base = replace(
        _package_job(package, work, work, package.manifest.resources.time_s),
        entrypoint=model.entrypoint,
    )
    return run_model(
        bench,
        base,
        runner,
        work,
        name=package.name,
        transductive=package.manifest.declarations.transductive,
        class_embedding=package.manifest.declarations.class_embedding,
    )


def _package_job(package: Package, bundle: Path, out: Path, time_s: float) -> RunJob:
    """A job running code of ``package`` on ``bundle`` into ``out``, with its declared seed and
    resources and a wall clock of ``time_s`` seconds, each capped by this machine and by the
    caps of the block it runs in (CI's: :func:`harness.submission.resources.effective_caps`);
    a GPU count above its cap is refused (:class:`~harness.core.errors.SubmissionError`)."""
    caps = effective_caps()
    resources = cap_resources(package.manifest.resources, caps).check(str(package.root / MANIFEST))
    return RunJob(
        bundle=bundle,
        package=package.root,
        entrypoint="",
        out=out,
        seed=package.manifest.seed,
        timeout_s=min(float(time_s), float(caps.time_s)),
        memory_gb=resources.memory_gb,
        cpus=resources.cpus,
        gpus=resources.gpus,
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
    with run_directory("zsl-gen-") as tmp:
        work = Path(tmp)
        declared = package.manifest.declarations.class_embedding
        embeddings = embeddings_for(declared, bench.spec, package=package.name)
        bundle = write_bundle(bench, work / "bundle", embeddings=embeddings)
        out = work / "out"
        out.mkdir()
        time_s = timeout_s if timeout_s is not None else package.manifest.resources.time_s
        job = replace(_package_job(package, bundle, out, time_s), script=files.generator)
        outcome = runners.get(runner).run(job)
        check_ran(outcome, f"{package.name} generator", runner)
        # The generator is untrusted: its files are copied through OutputDir, which follows no
        # link, takes regular files only and bounds their size by the dense contract's.
        made = OutputDir(out)
        for setting in bench.spec.prediction_settings():
            cells = len(bench.rows(setting)) * len(bench.columns(setting))
            target = package.prediction_path(bench.spec.benchmark, setting)
            made.copy_to(f"{setting}.safetensors", target, limit=8 * cells + GENERATED_HEADROOM)


def read_all(
    bench: PreparedBenchmark,
    paths: dict[str, Path],
    names: Mapping[str, str] | None = None,
) -> dict[str, Predictions]:
    """Read and check the prediction file of every setting (validation ones are dense).

    ``names``: how messages name each setting's file (a package's files by their path in the
    package, not the temporary folder an archive was unpacked into); default: its path.
    """
    fmt = bench.spec.predictions
    names = names or {}
    return {
        setting: read_predictions(
            path,
            benchmark_hash=bench.hash,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
            shape=(len(bench.rows(setting)), len(bench.columns(setting))),
            # Top-K benchmarks keep the K best of test rows; validation and scale are dense.
            topk=fmt.k if fmt.format == "topk" and setting in bench.spec.settings else None,
            name=names.get(setting),
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
        structure=bench.facts.structure,
        test_classes=bench.facts.test_classes,
        family=spec.family.id if spec.family else None,
        family_member=spec.family.member if spec.family else None,
        provenance=bench.frozen.meta.get("provenance"),
        raw_inputs=raw_inputs(bench.frozen.raw_inputs, bench.hash, spec.data.checksum),
        experimental=spec.experimental,
    )


def submission_info(planned: PackagePlan) -> SubmissionInfo:
    """The record's submission: the planned package's manifest, hash and README."""
    package = planned.package
    m = package.manifest
    return SubmissionInfo(
        name=m.name,
        version=m.version,
        kind=m.kind,
        package_hash=planned.hash,
        authors=list(m.authors),
        paper=m.paper,
        url=m.url,
        code=m.code,
        bibtex=m.bibtex,
        readme=package.readme(),
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
    refuse_changed_package: bool = False,
) -> RunRecord:
    """Score one package on one benchmark and store the record (one transaction): its plan
    (:func:`harness.plan.plan_submission`), run (:func:`run_planned`).

    ``runner`` runs model code; None picks the strongest this machine offers
    (``harness.runners.default_runner``: sandbox, else container, else local with a warning).
    ``refuse_changed_package``: as :func:`run_planned`'s (``zsl run`` without ``--replace``).
    """
    steps = Steps(quiet)
    with run_directory("zsl-run-") as tmp:
        plan = plan_submission(package_path, spec_path, tmp, runner=runner, steps=steps)
        return run_planned(
            plan,
            database_url=database_url,
            store=store,
            quiet=quiet,
            archive_to=archive_to,
            steps=steps,
            refuse_changed_package=refuse_changed_package,
        )


def run_planned(
    plan: RunPlan,
    *,
    database_url: str | None = None,
    store: bool = True,
    quiet: bool = False,
    archive_to: Path | None = None,
    steps: Steps | None = None,
    refuse_changed_package: bool = False,
) -> RunRecord:
    """Run ``plan``, score it and store the record (one transaction).

    The plan's package (for a model, its snapshot) must still exist: the caller's work folder
    holds it. ``archive_to``: with ``store=False``, archive the scored prediction files under
    this root all the same (the executors' workers, whose driver stores the record; see
    :mod:`harness.executors`). ``steps``: the steps the plan was made in (their timings come
    first in the record's); default: new ones, from the plan's timings.
    ``refuse_changed_package``: a stored run of the same key made from another package hash
    refuses the run before anything of it runs (:class:`harness.store.ChangedPackageError`).
    """
    freeze_all()
    if steps is None:
        steps = Steps(quiet)
        steps.timings.update(plan.timings)
    spec, bench, package = plan.spec, plan.benchmark.prepared, plan.package.package
    engine = harness.store.open_store(database_url) if store else None
    if engine is not None and refuse_changed_package:
        manifest = package.manifest
        key: RunKey = (spec.benchmark, spec.version, manifest.name, manifest.version)
        refused = harness.store.changed_packages(engine, {key: plan.package.hash})
        if refused:
            raise refused[key]
    logs: dict[str, str] = {}
    chosen: dict[str, Hyperparameters] = {}
    states: dict[str, str] = {}
    env = environment()
    with run_directory("zsl-run-") as tmp:
        if plan.resources is not None:
            runner = plan.runner
            assert runner is not None
            # Declared resources above what this machine (or CI's block) allows are capped.
            for note in plan.resources.notes if not quiet else ():
                console.print(Text.assemble(("warning: ", "bold yellow"), str(note)))
            given = plan.resources.resources
            env["resources"] = (
                f"cpus={given.cpus} memory_gb={given.memory_gb:g} time_s={given.time_s}"
                f" gpus={given.gpus}"
            )
            # The phases' progress (fit, validation fit, predict per setting) as it comes.
            sink = None if quiet else ConsoleProgress(console)
            with steps("run", f"run {package.name} ({runner} runner)"), reporting(sink):
                ran = _run_model(bench, package, runner, tmp)
            paths, states, chosen, logs = ran.paths, ran.states, ran.hyperparameters, ran.logs
            steps.timings.update(ran.timings)
            if ran.image is not None:
                env["image"] = ran.image
        else:
            paths = dict(plan.prediction_paths)
        with steps("score", "score"):
            predictions = read_all(
                bench,
                paths,
                package.display_names(paths) if package.manifest.kind == "predictions" else None,
            )
            scores = score(bench, predictions)
        # Keep the scored files (model outputs live in tmp) for `zsl results rescore`.
        if store or archive_to is not None:
            archive_predictions(paths, predictions, root=archive_to)
        submission = submission_info(plan.package)
    declared = package.manifest.declarations.backbone_pretrained_on
    # The audit frozen with the benchmark (not this machine's class lists and WordNet); only a
    # declared backbone of its own is audited here.
    leakage = benchmark_audit(spec, bench, class_set=declared)
    record = RunRecord(
        benchmark=benchmark_info(spec, bench),
        submission=submission,
        predictions_hashes={s: p.sha256 for s, p in predictions.items()},
        harness_version=harness.__version__,
        runner=plan.runner if plan.runner is not None else "predictions",
        environment=env,
        timings=steps.timings,
        leakage=leakage,
        logs=logs,
        hyperparameters=chosen,
        model_state=states,
        scores=scores,
        created_at=datetime.now(UTC).replace(microsecond=0),
    )
    # Below-chance warnings are kept with the record (its logs), shown by `zsl run` and CI.
    record = with_chance_warnings(record)
    if store:
        with steps("store", "store"):
            assert engine is not None
            _, replaced = harness.store.save_run_reporting(
                engine, record, refuse_changed_package=refuse_changed_package
            )
        if replaced is not None:
            console.print(
                Text.assemble(("note: ", "bold yellow"), replacement_message(replaced, record)),
                soft_wrap=True,
            )
    return record


def format_score(value: float) -> str:
    """A score as ``zsl run`` prints it: percent for values in [0, 1], else 4 digits."""
    return f"{100 * value:.1f}" if 0.0 <= value <= 1.0 else f"{value:.4g}"


def _stored_summary(runner: str, created_at: datetime) -> str:
    return f"{runner} runner, {created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def replacement_message(replaced: harness.store.ReplacedRun, record: RunRecord) -> str:
    """What a save replaced, for stderr: the old run's runner, date, package hash before →
    after (when it changed), and its primary scores before → after (``record``: the run that
    replaced it)."""
    after = harness.store.primary_values(record)
    changes = [
        f"{setting} {record.benchmark.primary[setting]} "
        f"{format_score(before)} → {format_score(after[setting])}"
        # ZSL first: the order of the settings does not depend on how the record was read.
        for setting, before in sorted(replaced.primary.items(), key=lambda i: i[0] != "zsl")
        if setting in after
    ]
    hidden = (
        f"; it stays hidden (`zsl results unhide '{describe_key(replaced.key)}'` shows it)"
        if replaced.hidden
        else ""
    )
    new_package = record.submission.package_hash
    if replaced.package_hash != new_package:
        changes.insert(
            0, f"package {short_hash(replaced.package_hash)} → {short_hash(new_package)}"
        )
    return (
        f"this {record.runner} run replaces the stored run of {describe_key(replaced.key)} "
        f"({_stored_summary(replaced.runner, replaced.created_at)}"
        + (f"; {', '.join(changes)}" if changes else "")
        + f"){hidden}"
    )


@dataclass
class DryRun:
    """What ``zsl run --dry-run`` found for one package on one spec: its plan (everything
    ``zsl run`` checks before running), what it would run and what it would store. Nothing was
    run or stored."""

    package: str
    spec: str
    submission: str  # name@version
    kind: str
    package_hash: str
    benchmark: str  # "id vN"
    spec_hash: str
    benchmark_state: str
    action: str
    key: RunKey
    store: bool
    replaces: harness.store.StoredRun | None = None
    same_hashes: bool = False

    def lines(self) -> list[str]:
        """The plan as lines for stdout, one per step."""
        if not self.store:
            stored = "would store nothing (--no-store)"
        elif self.replaces is None:
            stored = f"would store a new run: {describe_key(self.key)}"
        else:
            old = self.replaces.record
            scores = ", ".join(
                f"{s} {old.benchmark.primary[s]} {format_score(v)}"
                for s, v in harness.store.primary_values(old).items()
            )
            stored = (
                f"would replace the stored run of {describe_key(self.key)} "
                f"({_stored_summary(old.runner, old.created_at)}"
                + (f"; {scores}" if scores else "")
                + ")"
                + (
                    "; stored with the same package, benchmark and spec hashes"
                    if self.same_hashes
                    else ""
                )
                + ("; it is hidden and would stay hidden" if self.replaces.hidden else "")
            )
        return [
            f"dry run of {self.package} on {self.spec}: nothing run, nothing stored",
            f"  package:   valid: {self.submission} ({self.kind}, {self.package_hash})",
            f"  spec:      valid: {self.benchmark} (spec {self.spec_hash})",
            f"  benchmark: {self.benchmark_state}",
            f"  run:       {self.action}",
            f"  store:     {stored}",
        ]


def dry_run(
    package_path: str | Path,
    spec_path: str | Path,
    *,
    runner: str | None = None,
    database_url: str | None = None,
    store: bool = True,
    refuse_changed_package: bool = False,
) -> DryRun:
    """The plan :func:`run_submission` would run (:func:`harness.plan.plan_submission`, with
    nothing written), described, and the stored run it would replace. The spec is loaded and
    validated; the frozen benchmark, where prepared, is verified (not prepared: ``zsl run``
    would prepare it first; nothing is written here); the package is opened and validated
    (and, for a predictions package on a prepared benchmark, its prediction files read and
    checked); the runner is resolved; and the store is read for the run it would replace (same
    benchmark version and submission version).

    Raises
    ------
    HarnessError
        What ``zsl run`` would fail with before running: a bad spec or package, a frozen
        benchmark that does not verify, bad prediction files, an unknown runner, a changed
        package under a stored version (``refuse_changed_package``, as :func:`run_planned`).
    """
    with run_directory("zsl-plan-") as tmp:
        plan = plan_submission(package_path, spec_path, tmp, runner=runner, dry_run=True)
        spec, bench, root = plan.spec, plan.benchmark.bench, plan.benchmark.root
        if bench is None:
            state = (
                f"not prepared yet: `zsl run` would prepare it first (or `zsl data prepare "
                f"{spec_path}`) under {root}"
            )
        else:
            state = f"prepared and verified ({bench.hash}) at {root}"
        manifest = plan.package.package.manifest
        settings = spec.prediction_settings()
        if plan.runner is not None:
            assert manifest.model is not None
            res = manifest.resources
            action = (
                f"would run {manifest.model.entrypoint} in the {plan.runner} runner (fit, then "
                f"predict for {', '.join(settings)}; at most {res.time_s} s, "
                f"{res.memory_gb:g} GB, {res.cpus} CPU, {res.gpus} GPU), then score"
            )
        else:
            paths = dict(plan.prediction_paths)
            shown = ", ".join(p.name for p in paths.values())
            if bench is not None:  # hashes, shapes, values: as a run reads them
                read_all(bench, paths, plan.package.package.display_names(paths))
                action = f"would score the prediction files {shown} (read and checked)"
            else:
                action = (
                    f"would score the prediction files {shown} (checked once the benchmark "
                    "is prepared)"
                )
    key: RunKey = (spec.benchmark, spec.version, manifest.name, manifest.version)
    found = DryRun(
        package=str(package_path),
        spec=str(spec_path),
        submission=f"{manifest.name}@{manifest.version}",
        kind=manifest.kind,
        package_hash=plan.package.hash,
        benchmark=f"{spec.benchmark} v{spec.version}",
        spec_hash=spec.spec_hash(),
        benchmark_state=state,
        action=action,
        key=key,
        store=store,
    )
    if store:
        engine = harness.store.open_store(database_url)
        try:
            stored = harness.store.list_runs(
                engine, benchmark=spec.benchmark, submission=manifest.name
            )
        finally:
            engine.dispose()
        found.replaces = next((s for s in stored if s.key == key), None)
        if found.replaces is not None:
            old = found.replaces.record
            if refuse_changed_package and old.submission.package_hash != found.package_hash:
                raise harness.store.ChangedPackageError.of(
                    key, old.submission.package_hash, found.package_hash
                )
            found.same_hashes = (
                old.submission.package_hash == found.package_hash
                and old.benchmark.spec_hash == found.spec_hash
                and (bench is None or old.benchmark.hash == bench.hash)
            )
    return found
