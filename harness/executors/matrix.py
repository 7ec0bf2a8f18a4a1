"""Run a matrix of (package × spec) runs on an executor and store each record as it arrives.

:func:`run_matrix` is the driver of ``zsl run`` over many packages or specs and of
``zsl ci pr``. It plans every run (loads each spec and prepares its frozen benchmark once,
opens each package once and hashes it), skips the runs the store already holds for the same
package hash, benchmark hash and spec hash (so a re-invocation resumes), and hands the rest to
a backend (:func:`harness.executors.drive`) as ``run`` tasks
(:class:`harness.executors.task.RunTask`). The runs of one package (in one runner) on several
members of one benchmark family (:class:`harness.spec.FamilySpec`: the validation variants of
a dataset's split) go as one ``family`` task (:class:`harness.executors.task.FamilyTask`): one
job that runs them one after another on one worker and returns each member's record; skipping
what the store holds is decided per member first, so the job holds only the members to run.

See docs/executors.md.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness import store  # lazy: SQLAlchemy is imported when a store is first used
from harness.core.errors import HarnessError, IntegrityError, error_text
from harness.core.registry import freeze_all
from harness.core.tempdirs import run_directory
from harness.executors import (
    Backend,
    Job,
    Outcome,
    check_executor,
    drive,
    make_backend,
    progress_bar,
)
from harness.executors.task import FamilyTask, RunTask, check_record
from harness.plan import BenchmarkPlan, PackagePlan, plan_benchmark, plan_package
from harness.records import RunKey, RunRecord
from harness.results.prediction_archive import archive_file, predictions_dir
from harness.results.records_io import load_record, record_path
from harness.runners import runners
from harness.spec import load_spec
from harness.submission.package import MANIFEST
from harness.submission.resources import ResourceCaps, cap_resources

__all__ = [
    "MatrixReport",
    "RunRequest",
    "RunResult",
    "run_matrix",
]

Status = Literal["done", "failed", "skipped"]
#: The identity of what a run scores: benchmark id, version, hash and spec hash; submission
#: name, version and package hash. A stored run with the same key is not run again.
StoredKey = tuple[str, int, str, str, str, str, str]


@dataclass(frozen=True)
class RunRequest:
    """One run of the matrix: a package (folder or archive) on a spec, in a runner (None: the
    strongest the executing machine offers).

    ``caps``: the most resources the run gets beyond the executing machine's own caps (CI's
    ``max_resources``, :meth:`harness.ci.config.CIConfig.resource_caps`); the job asks the
    executor for the package's resources capped by them, and the worker holds the run to them
    (:func:`harness.submission.resources.limited_to`).
    """

    package: Path
    spec: Path
    runner: str | None = None
    caps: ResourceCaps | None = None

    @property
    def label(self) -> str:
        return f"{self.package} on {self.spec}"


@dataclass
class PlannedRun:
    """A request with everything the driver resolved for it.

    ``submission``: ``name@version`` of its package; ``family``, ``member``: its spec's
    benchmark family id and member label (None outside a family).
    """

    request: RunRequest
    task: RunTask
    job: Job
    key: StoredKey
    submission: str = ""
    family: str | None = None
    member: str | None = None


@dataclass
class RunResult:
    """What became of one request."""

    request: RunRequest
    status: Status
    label: str
    record: RunRecord | None = None
    error: str | None = None
    exit_code: int = 0
    attempts: int = 0
    node: str | None = None
    trace: str | None = None  # where a harness bug happened, for its report
    replaced: store.ReplacedRun | None = None  # the stored run this one replaced, to say so


@dataclass
class MatrixReport:
    results: list[RunResult]
    wall_s: float = 0.0

    def count(self, status: Status) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def exit_code(self) -> int:
        """0 when nothing failed, else the highest failure's code (2: an integrity error)."""
        return max((r.exit_code or 1 for r in self.results if r.status == "failed"), default=0)


# -- planning -----------------------------------------------------------------------------------


def plan_runs(requests: Sequence[RunRequest], workdir: Path) -> list[PlannedRun | RunResult]:
    """Resolve every request (spec hash, prepared benchmark, package hash, its resources capped
    by the request's ``caps``), in order; a request that cannot be resolved, whatever the
    exception, becomes a failed result (so does one asking for more GPUs than ``caps``).

    Each spec is loaded and its benchmark prepared once (:func:`harness.plan.plan_benchmark`),
    each package opened and hashed once (:func:`harness.plan.plan_package`; the worker makes
    the snapshot it runs from, and checks its hash against this one)."""
    specs: dict[Path, BenchmarkPlan | Exception] = {}
    packages: dict[Path, PackagePlan | Exception] = {}
    planned: list[PlannedRun | RunResult] = []
    for request in requests:
        spec_path, package_path = request.spec.resolve(), request.package.resolve()
        if spec_path not in specs:
            try:
                specs[spec_path] = plan_benchmark(load_spec(spec_path), spec_path)
            except Exception as err:  # this spec's runs fail, the others go on
                specs[spec_path] = err
        if package_path not in packages:
            try:
                packages[package_path] = plan_package(package_path, workdir, snapshot=False)
            except Exception as err:  # this package's runs fail, the others go on
                packages[package_path] = err
        benchmark, package = specs[spec_path], packages[package_path]
        problem = next((p for p in (benchmark, package) if isinstance(p, Exception)), None)
        if problem is not None:
            code = problem.exit_code if isinstance(problem, HarnessError) else 1
            planned.append(
                RunResult(
                    request, "failed", request.label, error=error_text(problem), exit_code=code
                )
            )
            continue
        assert not isinstance(benchmark, Exception) and not isinstance(package, Exception)
        spec, frozen = benchmark.spec, benchmark.prepared.frozen
        manifest = package.package.manifest
        resources = manifest.resources
        if request.caps is not None:  # a GPU count above the caps fails here, before any work
            try:
                capped = cap_resources(resources, request.caps)
                resources = capped.check(f"{request.package / MANIFEST}")
            except HarnessError as err:
                planned.append(
                    RunResult(
                        request,
                        "failed",
                        request.label,
                        error=error_text(err),
                        exit_code=err.exit_code,
                    )
                )
                continue
        task = RunTask(
            package=str(package_path),
            spec=str(spec_path),
            runner=request.runner,
            package_hash=package.hash,
            benchmark_hash=frozen.hash,
            spec_hash=spec.spec_hash(),
            caps=request.caps,
        )
        key: StoredKey = (
            spec.benchmark,
            spec.version,
            frozen.hash,
            task.spec_hash,
            manifest.name,
            manifest.version,
            task.package_hash,
        )
        submission = f"{manifest.name}@{manifest.version}"
        label = f"{submission} on {spec.benchmark} v{spec.version}"
        job = Job("run", task.to_json(), label, resources, benchmark=frozen.root)
        family = spec.family
        planned.append(
            PlannedRun(
                request,
                task,
                job,
                key,
                submission,
                family.id if family else None,
                family.member if family else None,
            )
        )
    return planned


def stored_keys(engine: Any, benchmarks: set[str]) -> set[StoredKey]:
    """The keys of the runs ``engine`` holds on ``benchmarks``."""
    keys: set[StoredKey] = set()
    for benchmark in sorted(benchmarks):
        # A hidden run with the same hashes is stored already: hiding is not a reason to re-run.
        for record in store.load_runs(engine, benchmark=benchmark, include_hidden=True):
            keys.add(stored_key(record))
    return keys


def stored_key(record: RunRecord) -> StoredKey:
    return (
        record.benchmark.id,
        record.benchmark.version,
        record.benchmark.hash,
        record.benchmark.spec_hash,
        record.submission.name,
        record.submission.version,
        record.submission.package_hash,
    )


# -- the driver ---------------------------------------------------------------------------------


def run_matrix(
    requests: Sequence[RunRequest],
    *,
    executor: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
    database_url: str | None = None,
    max_retries: int = 2,
    rerun: bool = False,
    ship_benchmarks: bool = True,
    progress: bool = True,
    backend: Backend | None = None,
    refuse_changed_package: bool = False,
) -> MatrixReport:
    """Run every request, store each record as it arrives, and report what became of each.

    ``rerun``: run requests the store already holds (same hashes) again instead of skipping
    them. ``backend``: an already made backend (tests); else :func:`make_backend`.
    ``refuse_changed_package``: a request whose run the store holds from another package hash
    fails before it runs, and again at its save (``zsl run`` without ``--replace``;
    :func:`harness.store.changed_packages`).
    """
    check_executor(executor, jobs)
    for runner in {r.runner for r in requests if r.runner is not None}:
        runners.get(runner)  # an unknown runner name fails before any work
    freeze_all()
    start = time.perf_counter()
    engine = store.open_store(database_url)
    results: dict[int, RunResult] = {}
    with run_directory("zsl-matrix-") as tmp:
        planned = plan_runs(requests, Path(tmp))
        benchmarks = {p.key[0] for p in planned if isinstance(p, PlannedRun)}
        done_before = set() if rerun else stored_keys(engine, benchmarks)
        todo: dict[int, PlannedRun] = {}
        for ticket, plan in enumerate(planned):
            if isinstance(plan, RunResult):
                results[ticket] = plan
            elif plan.key in done_before:
                results[ticket] = RunResult(plan.request, "skipped", plan.job.label)
            else:
                todo[ticket] = plan
        if refuse_changed_package:
            for ticket, error in _changed_packages(todo, engine).items():
                plan = todo.pop(ticket)
                results[ticket] = RunResult(
                    plan.request,
                    "failed",
                    plan.job.label,
                    error=str(error),
                    exit_code=error.exit_code,
                )
        with progress_bar(len(requests), enabled=progress) as bar:
            for result in results.values():
                bar.finished(result.status, _line(result))
            if todo:
                backend = backend or make_backend(
                    executor, jobs=jobs, ray_address=ray_address, ship_benchmarks=ship_benchmarks
                )
                try:
                    jobs_todo, members = family_jobs(todo, retries=max_retries)
                    for ticket, outcome in drive(
                        backend, jobs_todo, max_retries=max_retries, bar=bar
                    ):
                        for member, member_outcome in member_outcomes(members[ticket], outcome):
                            results[member] = _settle(
                                todo[member], member_outcome, engine, refuse_changed_package
                            )
                            bar.finished(results[member].status, _line(results[member]))
                finally:
                    backend.close()
    return MatrixReport([results[t] for t in sorted(results)], time.perf_counter() - start)


def family_jobs(
    todo: dict[int, PlannedRun], *, retries: int
) -> tuple[list[tuple[int, Job]], dict[int, list[int]]]:
    """The jobs for ``todo`` (ticket → planned run), in ticket order, and each job's tickets.

    A run is a job of its own, except that the runs of one package in one runner on two or
    more members of one benchmark family become one ``family`` job (under its first run's
    ticket), its runs in ticket order. ``retries``: how often the worker tries a member again
    whose failure is transient (a whole job's transient failure is the driver's to retry).
    """
    groups: dict[tuple[str, str | None, str], list[int]] = {}
    jobs: list[tuple[int, Job]] = []
    tickets: dict[int, list[int]] = {}
    for ticket, plan in todo.items():
        if plan.family is None:
            jobs.append((ticket, plan.job))
            tickets[ticket] = [ticket]
        else:
            groups.setdefault((plan.task.package, plan.task.runner, plan.family), []).append(ticket)
    for (_, _, family), group in groups.items():
        group.sort()
        first = todo[group[0]]
        if len(group) == 1:
            job = first.job
        else:
            plans = [todo[t] for t in group]
            task = FamilyTask(family, tuple(p.task for p in plans), retries)
            labels = ", ".join(f"{p.member} ({p.key[0]})" for p in plans)
            job = Job(
                "family",
                task.to_json(),
                f"{first.submission} on family {family}: {labels}",
                first.job.resources,
                member_benchmarks=tuple(p.job.benchmark for p in plans if p.job.benchmark),
            )
        jobs.append((group[0], job))
        tickets[group[0]] = group
    jobs.sort(key=lambda entry: entry[0])
    return jobs, tickets


def member_outcomes(tickets: list[int], outcome: Outcome) -> list[tuple[int, Outcome]]:
    """Each run's outcome from its job's: a ``run`` job's is its own; a ``family`` job's
    result holds one per member, in order (a failure of the whole job is each member's)."""
    if len(tickets) == 1:
        return [(tickets[0], outcome)]
    runs = (outcome.result or {}).get("runs") if outcome.ok else None
    if not isinstance(runs, list) or len(runs) != len(tickets):
        if outcome.ok:  # a worker of another harness version, or a bug
            got = len(runs) if isinstance(runs, list) else "no"
            outcome = Outcome(
                result={
                    "ok": False,
                    "error": f"the family job returned {got} outcomes for {len(tickets)} runs",
                    "exit_code": 1,
                    "node": outcome.node,
                },
                attempts=outcome.attempts,
            )
        return [(ticket, outcome) for ticket in tickets]
    found = []
    for ticket, run in zip(tickets, runs, strict=True):
        result = dict(run) if isinstance(run, dict) else {"ok": False, "error": "no outcome"}
        result["node"] = outcome.node or result.get("node")  # the job's: names the Ray node
        found.append((ticket, Outcome(result=result, attempts=outcome.attempts)))
    return found


def _line(result: RunResult) -> str:
    if result.status == "done":
        return f"  ✓ {result.label}" + (f" [{result.node}]" if result.node else "")
    if result.status == "skipped":
        return f"  - {result.label}: stored already with the same hashes, skipped"
    where = f" [{result.node}]" if result.node else ""
    trace = f"\n      at: {result.trace}" if result.trace else ""
    return f"  ✗ {result.label}{where}: {result.error}{trace}"


def _changed_packages(todo: dict[int, PlannedRun], engine: Any) -> dict[int, HarnessError]:
    """The tickets of ``todo`` whose run the store holds from another package hash, each with
    the error that refuses it (one look-up per ticket: two packages of one name and version
    may be in one matrix)."""
    found: dict[int, HarnessError] = {}
    for ticket, plan in todo.items():
        key: RunKey = (plan.key[0], plan.key[1], plan.key[4], plan.key[5])
        for error in store.changed_packages(engine, {key: plan.key[6]}).values():
            found[ticket] = error
    return found


def _settle(
    plan: PlannedRun, outcome: Outcome, engine: Any, refuse_changed_package: bool = False
) -> RunResult:
    """The result of a finished task, its record verified and stored."""
    label, node = plan.job.label, outcome.node
    if not outcome.ok:
        return RunResult(
            plan.request,
            "failed",
            label,
            error=outcome.error,
            exit_code=outcome.exit_code,
            attempts=outcome.attempts,
            node=node,
            trace=outcome.trace,
        )
    try:
        record, replaced = store_result(
            plan, outcome.result or {}, engine, refuse_changed_package=refuse_changed_package
        )
    except Exception as err:  # this run's failure (a record that cannot be stored), not all's
        return RunResult(
            plan.request,
            "failed",
            label,
            error=f"storing: {error_text(err)}",
            exit_code=err.exit_code if isinstance(err, HarnessError) else 1,
            attempts=outcome.attempts,
            node=node,
        )
    return RunResult(
        plan.request,
        "done",
        label,
        record=record,
        attempts=outcome.attempts,
        node=node,
        replaced=replaced,
    )


def store_result(
    plan: PlannedRun,
    result: dict[str, Any],
    engine: Any,
    *,
    refuse_changed_package: bool = False,
) -> tuple[RunRecord, store.ReplacedRun | None]:
    """Verify a worker's record, archive the prediction files it sent back, store the record;
    return it and the stored run it replaced (None when it is new).

    A record that could not be exported (an unusable name for its file) is refused here, as
    this run's failure, rather than failing a later export of every record.
    """
    label = plan.job.label
    record = load_record(str(result.get("record", "")), f"record of {label}")
    check_record(record, plan.task, where="driver")
    record_path(Path(), record)
    shipped = result.get("predictions") or []
    if shipped:
        with run_directory("zsl-returned-") as tmp:
            for entry in shipped:
                setting, suffix = str(entry["setting"]), str(entry["suffix"])
                data = base64.b64decode(str(entry["data"]), validate=True)
                actual = "sha256:" + hashlib.sha256(data).hexdigest()
                if actual != entry["sha256"] or setting not in record.predictions_hashes:
                    raise IntegrityError(
                        f"{label}: the {setting!r} prediction file came back with sha256 "
                        f"{actual}, not {entry['sha256']} (or for a setting the record lacks)"
                    )
                if suffix not in (".safetensors", ".npz"):
                    raise IntegrityError(f"{label}: prediction file suffix {suffix!r}")
                path = Path(tmp) / f"{setting}{suffix}"
                path.write_bytes(data)
                archive_file(
                    path,
                    content_hash=record.predictions_hashes[setting],
                    benchmark_hash=record.benchmark.hash,
                    setting=setting,
                    root=predictions_dir(),
                )
    _, replaced = store.save_run_reporting(
        engine, record, refuse_changed_package=refuse_changed_package
    )
    return record, replaced
