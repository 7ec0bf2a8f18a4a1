"""The inline executor: every task in this process, one at a time, when the driver waits.

No worker process: nothing is spawned, nothing is shipped, and whatever this process has
patched or registered is what the task sees. For debugging a matrix, for small jobs where a
pool's start-up would dominate, and for callers that replace parts of the harness in-process
(tests). A task that raises ``KeyboardInterrupt`` or ``SystemExit`` stops the driver, as any
interrupt of this process does.
"""

from __future__ import annotations

import json
from collections import deque

from harness.executors import BackendKind, Job, Outcome
from harness.executors.task import execute_json

__all__ = ["BACKEND", "InlineBackend"]


class InlineBackend:
    """Runs one submitted task at a time, in this process."""

    def __init__(self) -> None:
        self._queue: deque[tuple[int, Job]] = deque()

    def has_room(self, job: Job) -> bool:
        return not self._queue

    def infeasible(self, job: Job) -> str | None:
        return None  # the runner bounds the run's memory

    def submit(self, ticket: int, job: Job) -> None:
        self._queue.append((ticket, job))

    def wait(self) -> list[tuple[int, Outcome]]:
        ticket, job = self._queue.popleft()
        return [(ticket, Outcome(result=json.loads(execute_json(job.kind, job.task))))]

    def close(self) -> None:
        self._queue.clear()


BACKEND = BackendKind(make=lambda _jobs, _address, _ship: InlineBackend())
