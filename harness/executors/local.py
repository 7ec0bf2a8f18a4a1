"""The local executor: a pool of worker processes on this machine.

Each worker is a fresh interpreter (``spawn``: it inherits the driver's environment at the time
the pool starts, ``ZSL_HOME`` included, and no threads or locks of the driver) running
:func:`harness.executors.task.execute_json`; the task and its result cross as JSON text. The
workers share the machine's ``ZSL_HOME``, so benchmarks are not shipped (the worker still
checks the hash of the copy it loads) and prediction files go straight into the archive.

A worker process that dies (killed, out of memory) breaks the whole pool: every run in flight
is then reported as a transient failure, to be tried again on a new pool.

Each worker's own numeric libraries (scoring, bootstrap intervals run in the worker) get the
machine's CPUs divided among the workers, as Ray gives a task its ``num_cpus``: ``jobs`` workers
each using every core would oversubscribe the machine (the model itself runs with its package's
``resources.cpus`` threads, set by the runner).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from harness.executors import Outcome, PlannedRun, default_jobs
from harness.executors.task import ARCHIVE_SHARED, execute_json

__all__ = ["LocalPool"]


def _limit_threads(threads: int) -> None:
    """Worker start: ``threads`` threads for BLAS/OpenMP (already loaded or loaded later)."""
    from threadpoolctl import threadpool_limits

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    threadpool_limits(limits=threads)


class LocalPool:
    """``jobs`` worker processes; at most ``jobs`` runs at a time."""

    archive = ARCHIVE_SHARED

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool = self._new_pool()
        self._futures: dict[Future[str], int] = {}

    def _new_pool(self) -> ProcessPoolExecutor:
        threads = max(1, default_jobs() // self.jobs)
        return ProcessPoolExecutor(
            max_workers=self.jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_limit_threads,
            initargs=(threads,),
        )

    def capacity(self) -> int:
        return self.jobs

    def infeasible(self, plan: PlannedRun) -> str | None:
        return None  # the runner bounds the run's memory; one machine runs everything

    def submit(self, ticket: int, plan: PlannedRun) -> None:
        self._futures[self._pool.submit(execute_json, plan.task.to_json())] = ticket

    def wait(self) -> list[tuple[int, Outcome]]:
        done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
        finished: list[tuple[int, Outcome]] = []
        broken = False
        for future in done:
            ticket = self._futures.pop(future)
            try:
                finished.append((ticket, Outcome(result=json.loads(future.result()))))
            except BrokenProcessPool as err:
                broken = True
                finished.append((ticket, Outcome(system_error=f"worker process died ({err})")))
        if broken:  # every other run in flight died with the pool
            for ticket in self._futures.values():
                finished.append((ticket, Outcome(system_error="the worker pool broke")))
            self._futures.clear()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
        return finished

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
