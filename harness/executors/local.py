"""The local executor: a pool of worker processes on this machine.

Each worker is a fresh interpreter (``spawn``: it inherits the driver's environment at the time
the pool starts, ``ZSL_HOME`` included, and no threads or locks of the driver) running
:func:`harness.executors.task.execute_json`; the task and its result cross as JSON text. The
workers share the machine's disk, so nothing is shipped (a worker still checks the hash of the
benchmark it loads) and prediction files go straight into the archive.

A worker process that dies (killed, out of memory) breaks the whole pool: every run in flight
is then reported as a transient failure, to be tried again on a new pool.

See docs/executors.md.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from harness.executors import BackendKind, Job, Outcome, default_jobs
from harness.executors.task import execute_json

__all__ = ["BACKEND", "LocalPool"]


def _limit_threads(threads: int) -> None:
    """Worker start: ``threads`` threads for BLAS/OpenMP (already loaded or loaded later)."""
    from threadpoolctl import threadpool_limits

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    threadpool_limits(limits=threads)


class LocalPool:
    """``jobs`` worker processes; at most ``jobs`` runs at a time, asking for at most
    ``cpus`` CPUs together (see docs/executors.md)."""

    def __init__(self, jobs: int, cpus: int | None = None) -> None:
        self.jobs = jobs
        self.cpus = max(jobs, default_jobs() if cpus is None else cpus)
        self._pool = self._new_pool()
        self._futures: dict[Future[str], tuple[int, int]] = {}  # → (ticket, CPUs asked for)

    def _new_pool(self) -> ProcessPoolExecutor:
        threads = max(1, default_jobs() // self.jobs)
        return ProcessPoolExecutor(
            max_workers=self.jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_limit_threads,
            initargs=(threads,),
        )

    def has_room(self, job: Job) -> bool:
        if not self._futures:
            return True
        used = sum(cpus for _, cpus in self._futures.values())
        return len(self._futures) < self.jobs and used + job.resources.cpus <= self.cpus

    def infeasible(self, job: Job) -> str | None:
        return None  # the runner bounds the run's memory; one machine runs everything

    def submit(self, ticket: int, job: Job) -> None:
        future = self._pool.submit(execute_json, job.kind, job.task)
        self._futures[future] = (ticket, job.resources.cpus)

    def wait(self) -> list[tuple[int, Outcome]]:
        done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
        finished: list[tuple[int, Outcome]] = []
        broken = False
        for future in done:
            ticket, _ = self._futures.pop(future)
            try:
                finished.append((ticket, Outcome(result=json.loads(future.result()))))
            except BrokenProcessPool as err:
                broken = True
                finished.append((ticket, Outcome(system_error=f"worker process died ({err})")))
        if broken:  # every other run in flight died with the pool
            for ticket, _ in self._futures.values():
                finished.append((ticket, Outcome(system_error="the worker pool broke")))
            self._futures.clear()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
        return finished

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


BACKEND = BackendKind(make=lambda jobs, _address, _ship: LocalPool(jobs or default_jobs()))
