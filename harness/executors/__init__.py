"""Where the harness's many-task work executes: a local process pool, this process, or Ray.

A caller turns its work into :class:`Job` objects — a task of a kind
(:data:`harness.executors.task.TASKS`) as JSON, with the resources it asks for and the files a
node without the driver's disk needs — and :func:`drive` hands them to a backend.

See docs/executors.md.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.core.errors import HarnessError
from harness.core.registry import Registry
from harness.submission.package import Resources

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendKind",
    "Job",
    "Outcome",
    "backends",
    "check_executor",
    "default_jobs",
    "drive",
    "make_backend",
    "progress_bar",
]


@dataclass(frozen=True)
class BackendKind:
    """A registered backend. ``make(jobs, ray_address, ship_benchmarks)`` opens one; ``check()``
    raises, before any work, when it cannot run here (Ray's optional extra is not installed)."""

    make: Callable[[int | None, str | None, bool], Backend]
    check: Callable[[], object] = lambda: None


#: Each backend's name (in the order the CLI lists them) and the :class:`BackendKind` its module
#: defines: a backend's module is imported when it is chosen, so Ray's needs its extra only then.
BACKENDS: dict[str, str] = {
    "local": "harness.executors.local:BACKEND",
    "inline": "harness.executors.inline:BACKEND",
    "ray": "harness.executors.ray:BACKEND",
}
backends = Registry[BackendKind]("executor")
for _name, _target in BACKENDS.items():
    backends.add_lazy(_name, _target)

_console = Console(stderr=True, highlight=False, emoji=False, markup=False)


@dataclass(frozen=True)
class Job:
    """One task for a backend.

    ``kind`` names the worker's function (:data:`harness.executors.task.TASKS`), ``task`` is
    its input as JSON. ``benchmark``: the frozen benchmark the task loads, shipped to nodes that
    do not share the driver's disk; ``member_benchmarks``: a ``family`` task's, one per member
    run in order (``benchmark`` is then None), shipped likewise; ``attachments``: the task's
    input files on the driver's disk, by the name the task knows them by, shipped likewise.
    """

    kind: str
    task: str
    label: str
    resources: Resources = field(default_factory=Resources)
    benchmark: Path | None = None
    attachments: tuple[tuple[str, Path], ...] = ()
    member_benchmarks: tuple[Path, ...] = ()


@dataclass
class Outcome:
    """A finished task: the worker's JSON result, or a failure of the executor itself."""

    result: dict[str, Any] | None = None
    system_error: str | None = None  # the worker or its node died: transient
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.result and self.result.get("ok"))

    @property
    def transient(self) -> bool:
        return self.system_error is not None or bool((self.result or {}).get("transient"))

    @property
    def error(self) -> str:
        return self.system_error or str((self.result or {}).get("error", "no result"))

    @property
    def exit_code(self) -> int:
        return int((self.result or {}).get("exit_code", 1)) if self.system_error is None else 1

    @property
    def trace(self) -> str | None:
        """Where a harness bug happened (the traceback's tail), apart from the error."""
        trace = (self.result or {}).get("trace")
        return str(trace) if trace else None

    @property
    def node(self) -> str | None:
        node = (self.result or {}).get("node")
        return str(node) if node else None


class Backend(Protocol):
    """Where tasks run. ``has_room`` says whether ``job`` may start now (a backend that queues
    itself, as Ray does, always has room); ``wait`` blocks until at least one submitted task
    has finished."""

    def has_room(self, job: Job) -> bool: ...

    def infeasible(self, job: Job) -> str | None: ...

    def submit(self, ticket: int, job: Job) -> None: ...

    def wait(self) -> list[tuple[int, Outcome]]: ...

    def close(self) -> None: ...


def default_jobs() -> int:
    """Worker processes of the local pool: one per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def check_executor(executor: str, jobs: int | None) -> None:
    """Refuse an unknown executor, a bad ``jobs`` or a missing Ray before any work."""
    if executor not in BACKENDS:
        raise HarnessError(f"unknown executor {executor!r}; choose one of: {', '.join(BACKENDS)}")
    if jobs is not None and jobs < 1:
        raise HarnessError(f"--jobs must be at least 1, not {jobs}")
    backends.get(executor).check()  # a missing extra is said before any work


def make_backend(
    executor: str, *, jobs: int | None, ray_address: str | None, ship_benchmarks: bool = True
) -> Backend:
    check_executor(executor, jobs)
    return backends.get(executor).make(jobs, ray_address, ship_benchmarks)


def drive(
    backend: Backend, jobs: Sequence[tuple[int, Job]], *, max_retries: int, bar: ProgressBar
) -> Iterator[tuple[int, Outcome]]:
    """Run ``jobs`` (ticket, job) on ``backend``; yield each one's final outcome as it arrives.

    Jobs start in order, each as soon as the backend has room for it. A transient failure is
    submitted again (at the back of the queue, so it may land on another worker or node) until
    it has been tried ``max_retries`` + 1 times; its last error then says so. A job no worker
    could ever hold fails at once. The caller closes the backend.
    """
    todo = deque(jobs)
    by_ticket = dict(jobs)
    attempts = dict.fromkeys(by_ticket, 0)
    running = 0
    while todo or running:
        while todo and backend.has_room(todo[0][1]):
            ticket, job = todo.popleft()
            problem = backend.infeasible(job)
            if problem is not None:
                yield ticket, Outcome(result={"ok": False, "error": problem, "exit_code": 1})
                continue
            attempts[ticket] += 1
            backend.submit(ticket, job)
            running += 1
        bar.running(running)
        if not running:
            break
        for ticket, outcome in backend.wait():
            running -= 1
            outcome.attempts = attempts[ticket]
            if not outcome.ok and outcome.transient:
                if attempts[ticket] <= max_retries:
                    todo.append((ticket, by_ticket[ticket]))
                    bar.retry(by_ticket[ticket].label, outcome.error)
                    continue
                outcome = _gave_up(outcome)
            yield ticket, outcome
        bar.running(running)


def _gave_up(outcome: Outcome) -> Outcome:
    why = f"{outcome.error} (gave up after {outcome.attempts} attempts)"
    if outcome.system_error is not None:
        return Outcome(system_error=why, attempts=outcome.attempts)
    return Outcome(result={**(outcome.result or {}), "error": why}, attempts=outcome.attempts)


# -- progress -----------------------------------------------------------------------------------


@dataclass
class ProgressBar:
    """Counts of done, failed, running and skipped jobs (and retries), and a line per job."""

    progress: Progress | None
    task: Any = None
    counts: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    _running: int = 0

    def running(self, running: int) -> None:
        self._running = running
        self._refresh()

    def finished(self, status: str, line: str) -> None:
        """One job ended with ``status`` (``done``, ``failed``, ``skipped``, or the caller's)."""
        self.counts[status] = self.counts.get(status, 0) + 1
        self._print(line)
        self._refresh()

    def retry(self, label: str, why: str) -> None:
        self.retries += 1
        self._print(f"  ↻ {label}: {why}; trying again")
        self._refresh()

    def _refresh(self) -> None:
        if self.progress is None:
            return
        shown = {"done": 0, "failed": 0, **self.counts}
        parts = [f"{status} {n}" for status, n in shown.items() if status != "skipped"]
        parts.append(f"running {self._running}")
        parts.append(f"skipped {shown.get('skipped', 0)}")
        if self.retries:
            parts.append(f"retried {self.retries}")
        self.progress.update(
            self.task, completed=sum(self.counts.values()), counts=" · ".join(parts)
        )

    def _print(self, line: str) -> None:
        if self.progress is not None:
            self.progress.console.print(line, soft_wrap=True)


@contextmanager
def progress_bar(total: int, *, enabled: bool, what: str = "runs") -> Iterator[ProgressBar]:
    """A :class:`ProgressBar` over ``total`` jobs on stderr (silent unless ``enabled``)."""
    if not enabled:
        yield ProgressBar(None)
        return
    progress = Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=_console,
    )
    with progress:
        task = progress.add_task(what, total=total, counts="")
        bar = ProgressBar(progress, task)
        bar.running(0)
        yield bar
