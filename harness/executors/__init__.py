"""Run a matrix of (package × spec) runs on a local process pool or a Ray cluster.

:func:`run_matrix` is the driver. It plans every run (loads each spec and prepares its frozen
benchmark once, opens each package once and hashes it), skips the runs the store already holds
for the same package hash, benchmark hash and spec hash (so a re-invocation resumes), and hands
the rest to a backend:

- ``local`` (:mod:`harness.executors.local`): a pool of ``jobs`` worker processes on this
  machine (default: one per CPU), which archive their prediction files themselves;
- ``ray`` (:mod:`harness.executors.ray`): one Ray task per run, asking for the package's
  ``resources`` (``cpus`` → ``num_cpus``, ``gpus`` → ``num_gpus``, ``memory_gb`` → ``memory``
  bytes), on the cluster at ``ray_address`` or a Ray instance started here; each node gets the
  frozen benchmark from the object store, verified against its hash
  (:func:`harness.executors.task.ensure_benchmark`), and sends the prediction files back with
  the record.

Each worker runs :mod:`harness.executors.task` and returns the record as its JSON export; the
driver verifies it (:func:`harness.results.records_io.load_record`, then the planned hashes)
and stores it at once (:func:`harness.store.save_run`), so a failure later in the matrix never
loses a finished run. Failures are per run. A transient one — the worker process or its node
died, the runner could not start (``OSError``) — is tried again up to ``max_retries`` times;
a model that fails, a refused package or mismatching data is not. A rich progress bar on
stderr counts done, failed, running and skipped runs.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.errors import HarnessError, IntegrityError
from harness.executors.task import TaskSpec, check_record
from harness.records import RunRecord
from harness.submission.package import Resources

if TYPE_CHECKING:
    from harness.data.artifacts import FrozenBenchmark
    from harness.spec import Spec
    from harness.submission.package import Package

__all__ = [
    "EXECUTORS",
    "MatrixReport",
    "Outcome",
    "PlannedRun",
    "RunRequest",
    "RunResult",
    "default_jobs",
    "plan_runs",
    "run_matrix",
]

EXECUTORS = ("local", "ray")
Status = Literal["done", "failed", "skipped"]
#: The identity of what a run scores: benchmark id, version, hash and spec hash; submission
#: name, version and package hash. A stored run with the same key is not run again.
StoredKey = tuple[str, int, str, str, str, str, str]

_console = Console(stderr=True, highlight=False, emoji=False, markup=False)


@dataclass(frozen=True)
class RunRequest:
    """One run of the matrix: a package (folder or archive) on a spec, in a runner (None: the
    strongest the executing machine offers)."""

    package: Path
    spec: Path
    runner: str | None = None

    @property
    def label(self) -> str:
        return f"{self.package} on {self.spec}"


@dataclass
class PlannedRun:
    """A request with everything the driver resolved for it."""

    request: RunRequest
    task: TaskSpec
    resources: Resources
    key: StoredKey
    frozen_root: Path
    label: str


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


@dataclass
class Outcome:
    """A finished task: the worker's JSON result, or a failure of the executor itself."""

    result: dict[str, Any] | None = None
    system_error: str | None = None  # the worker or its node died: transient


class Backend(Protocol):
    """Where tasks run. ``wait`` blocks until at least one submitted task has finished."""

    archive: str

    def capacity(self) -> int | None: ...

    def infeasible(self, plan: PlannedRun) -> str | None: ...

    def submit(self, ticket: int, plan: PlannedRun) -> None: ...

    def wait(self) -> list[tuple[int, Outcome]]: ...

    def close(self) -> None: ...


def default_jobs() -> int:
    """Worker processes of the local pool: one per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


# -- planning -----------------------------------------------------------------------------------


def plan_runs(requests: Sequence[RunRequest], workdir: Path) -> list[PlannedRun | RunResult]:
    """Resolve every request (spec hash, prepared benchmark, package hash), in order; a request
    that cannot be resolved becomes a failed result, the others are planned."""
    from harness.data.prepare import prepare
    from harness.spec import load_spec
    from harness.submission.unpack import open_package

    specs: dict[Path, tuple[Spec, FrozenBenchmark] | HarnessError] = {}
    packages: dict[Path, Package | HarnessError] = {}
    planned: list[PlannedRun | RunResult] = []
    for request in requests:
        spec_path, package_path = request.spec.resolve(), request.package.resolve()
        if spec_path not in specs:
            try:
                spec = load_spec(spec_path)
                specs[spec_path] = (spec, prepare(spec))
            except HarnessError as err:
                specs[spec_path] = err
        if package_path not in packages:
            try:
                holder = Path(tempfile.mkdtemp(prefix="package-", dir=workdir))
                packages[package_path] = open_package(package_path, holder)
            except HarnessError as err:
                packages[package_path] = err
        spec_entry, package = specs[spec_path], packages[package_path]
        for problem in (spec_entry, package):
            if isinstance(problem, HarnessError):
                failed = RunResult(request, "failed", request.label, error=str(problem))
                failed.exit_code = problem.exit_code
                planned.append(failed)
                break
        if isinstance(spec_entry, HarnessError) or isinstance(package, HarnessError):
            continue
        spec, frozen = spec_entry
        manifest = package.manifest
        task = TaskSpec(
            package=str(package_path),
            spec=str(spec_path),
            runner=request.runner,
            package_hash=package.hash(),
            benchmark_hash=frozen.hash,
            spec_hash=spec.spec_hash(),
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
        label = f"{manifest.name}@{manifest.version} on {spec.benchmark} v{spec.version}"
        planned.append(PlannedRun(request, task, manifest.resources, key, frozen.root, label))
    return planned


def stored_keys(engine: Any, benchmarks: set[str]) -> set[StoredKey]:
    """The keys of the runs ``engine`` holds on ``benchmarks``."""
    from harness.store import load_runs

    keys: set[StoredKey] = set()
    for benchmark in sorted(benchmarks):
        for record in load_runs(engine, benchmark=benchmark):
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


def make_backend(
    executor: str, *, jobs: int | None, ray_address: str | None, ship_benchmarks: bool = True
) -> Backend:
    if executor == "local":
        from harness.executors.local import LocalPool

        return LocalPool(jobs or default_jobs())
    if executor == "ray":
        from harness.executors.ray import RayCluster

        return RayCluster(address=ray_address, jobs=jobs, ship_benchmarks=ship_benchmarks)
    raise HarnessError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")


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
) -> MatrixReport:
    """Run every request, store each record as it arrives, and report what became of each.

    ``rerun``: run requests the store already holds (same hashes) again instead of skipping
    them. ``backend``: an already made backend (tests); else :func:`make_backend`.
    """
    from harness.registry import freeze_all
    from harness.runners import runners
    from harness.store import open_store

    if executor not in EXECUTORS:
        raise HarnessError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")
    if jobs is not None and jobs < 1:
        raise HarnessError(f"--jobs must be at least 1, not {jobs}")
    if executor == "ray" and backend is None:
        from harness.executors.ray import import_ray

        import_ray()  # a missing extra is said before any work
    for runner in {r.runner for r in requests if r.runner is not None}:
        runners.get(runner)  # an unknown runner name fails before any work
    freeze_all()
    start = time.perf_counter()
    engine = open_store(database_url)
    results: dict[int, RunResult] = {}
    with tempfile.TemporaryDirectory(prefix="zsl-matrix-") as tmp:
        planned = plan_runs(requests, Path(tmp))
        benchmarks = {p.key[0] for p in planned if isinstance(p, PlannedRun)}
        done_before = set() if rerun else stored_keys(engine, benchmarks)
        ordered: list[tuple[int, PlannedRun]] = []
        for ticket, plan in enumerate(planned):
            if isinstance(plan, RunResult):
                results[ticket] = plan
            elif plan.key in done_before:
                results[ticket] = RunResult(plan.request, "skipped", plan.label)
            else:
                ordered.append((ticket, plan))
        todo = deque(ordered)
        by_ticket = dict(ordered)
        attempts = dict.fromkeys(by_ticket, 0)
        with _progress(len(requests), enabled=progress) as bar:
            for result in results.values():
                bar.finished(result)
            bar.update(results)
            if not todo:
                return MatrixReport(_in_order(results), time.perf_counter() - start)
            backend = backend or make_backend(
                executor, jobs=jobs, ray_address=ray_address, ship_benchmarks=ship_benchmarks
            )
            try:
                running = 0
                while todo or running:
                    running += _submit(backend, todo, running, attempts, results, bar)
                    bar.update(results, running)
                    if not running:
                        break
                    for ticket, outcome in backend.wait():
                        running -= 1
                        plan = by_ticket[ticket]
                        settled = _settle(plan, outcome, attempts[ticket], max_retries, engine)
                        if settled is None:  # transient: again
                            todo.append((ticket, plan))
                            bar.retry(plan.label, outcome)
                            continue
                        results[ticket] = settled
                        bar.finished(settled)
                    bar.update(results, running)
            finally:
                backend.close()
    return MatrixReport(_in_order(results), time.perf_counter() - start)


def _submit(
    backend: Backend,
    todo: deque[tuple[int, PlannedRun]],
    running: int,
    attempts: dict[int, int],
    results: dict[int, RunResult],
    bar: _Bar,
) -> int:
    """Submit runs from ``todo`` while the backend has room; return how many were submitted.
    A run no worker could ever hold fails here."""
    capacity = backend.capacity()
    submitted = 0
    while todo and (capacity is None or running + submitted < capacity):
        ticket, plan = todo.popleft()
        problem = backend.infeasible(plan)
        if problem is not None:
            results[ticket] = RunResult(
                plan.request, "failed", plan.label, error=problem, exit_code=1
            )
            bar.finished(results[ticket])
            continue
        attempts[ticket] += 1
        backend.submit(ticket, plan)
        submitted += 1
    return submitted


def _in_order(results: dict[int, RunResult]) -> list[RunResult]:
    return [results[t] for t in sorted(results)]


def _settle(
    plan: PlannedRun, outcome: Outcome, attempt: int, max_retries: int, engine: Any
) -> RunResult | None:
    """The result of a finished task (its record stored), or None to try it again."""
    result = outcome.result or {}
    transient = outcome.system_error is not None or bool(result.get("transient"))
    if not result.get("ok"):
        error = outcome.system_error or str(result.get("error", "no result"))
        if transient and attempt <= max_retries:
            return None
        if transient:
            error += f" (gave up after {attempt} attempts)"
        code = int(result.get("exit_code", 1)) if outcome.result else 1
        return RunResult(
            plan.request, "failed", plan.label, error=error, exit_code=code, attempts=attempt
        )
    node = result.get("node")
    try:
        record = store_result(plan, result, engine)
    except HarnessError as err:
        return RunResult(
            plan.request,
            "failed",
            plan.label,
            error=f"storing: {err}",
            exit_code=err.exit_code,
            attempts=attempt,
            node=node,
        )
    return RunResult(plan.request, "done", plan.label, record=record, attempts=attempt, node=node)


def store_result(plan: PlannedRun, result: dict[str, Any], engine: Any) -> RunRecord:
    """Verify a worker's record, archive the prediction files it sent back, store the record."""
    from harness.results.prediction_archive import archive_file, predictions_dir
    from harness.results.records_io import load_record
    from harness.store import save_run

    record = load_record(str(result.get("record", "")), f"record of {plan.label}")
    check_record(record, plan.task, where="driver")
    shipped = result.get("predictions") or []
    if shipped:
        with tempfile.TemporaryDirectory(prefix="zsl-returned-") as tmp:
            for entry in shipped:
                setting, suffix = str(entry["setting"]), str(entry["suffix"])
                data = base64.b64decode(str(entry["data"]), validate=True)
                actual = "sha256:" + hashlib.sha256(data).hexdigest()
                if actual != entry["sha256"] or setting not in record.predictions_hashes:
                    raise IntegrityError(
                        f"{plan.label}: the {setting!r} prediction file came back with sha256 "
                        f"{actual}, not {entry['sha256']} (or for a setting the record lacks)"
                    )
                if suffix not in (".safetensors", ".npz"):
                    raise IntegrityError(f"{plan.label}: prediction file suffix {suffix!r}")
                path = Path(tmp) / f"{setting}{suffix}"
                path.write_bytes(data)
                archive_file(
                    path,
                    content_hash=record.predictions_hashes[setting],
                    benchmark_hash=record.benchmark.hash,
                    setting=setting,
                    root=predictions_dir(),
                )
    save_run(engine, record)
    return record


# -- progress -----------------------------------------------------------------------------------


@dataclass
class _Bar:
    progress: Progress | None
    task: Any = None
    total: int = 0
    retries: int = 0
    lines: list[str] = field(default_factory=list)

    def update(self, results: dict[int, RunResult], running: int = 0) -> None:
        counts = {s: sum(r.status == s for r in results.values()) for s in ("done", "failed")}
        skipped = sum(r.status == "skipped" for r in results.values())
        text = (
            f"done {counts['done']} · failed {counts['failed']} · running {running}"
            f" · skipped {skipped}" + (f" · retried {self.retries}" if self.retries else "")
        )
        if self.progress is not None:
            self.progress.update(self.task, completed=len(results), counts=text)

    def finished(self, result: RunResult) -> None:
        if result.status == "done":
            line = f"  ✓ {result.label}" + (f" [{result.node}]" if result.node else "")
        elif result.status == "skipped":
            line = f"  - {result.label}: stored already with the same hashes, skipped"
        else:
            line = f"  ✗ {result.label}: {result.error}"
        self._print(line)

    def retry(self, label: str, outcome: Outcome) -> None:
        self.retries += 1
        why = outcome.system_error or (outcome.result or {}).get("error", "")
        self._print(f"  ↻ {label}: {why}; trying again")

    def _print(self, line: str) -> None:
        if self.progress is not None:
            self.progress.console.print(line, soft_wrap=True)


@contextmanager
def _progress(total: int, *, enabled: bool) -> Iterator[_Bar]:
    if not enabled:
        yield _Bar(None, total=total)
        return
    progress = Progress(
        TextColumn("runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=_console,
    )
    with progress:
        task = progress.add_task("runs", total=total, counts="")
        yield _Bar(progress, task, total)
