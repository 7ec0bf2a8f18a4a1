"""Runner ``local``: your own trusted code in a subprocess, with a clean environment and limits.

No isolation beyond a separate process: the model runs as the harness's user, sees its files and
the network. Use it for the project's own reference submissions and for code you trust; untrusted
code goes through ``sandbox`` or ``container`` (``harness.runners.default_runner`` picks the
strongest one the machine offers, and warns when only ``local`` is left).

What it does hold:

- **the environment**: an allow-list (:data:`PASSED_ENV`: the path, the locale, the temporary
  folder), never the caller's secrets (``AWS_*``, ``ZSL_DATABASE_URL``…). ``VIRTUAL_ENV`` is not
  passed (the worker is started with this interpreter, it needs no activation), and
  ``PYTHONPATH`` only ever names the folder the ``harness`` package was imported from, when the
  caller's ``PYTHONPATH`` is how it was found (a source checkout run without installing).
- **the harness's own environment**: while a run is alive the harness is not dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``), so a model running as the same non-root user cannot read
  ``/proc/<harness pid>/environ`` (or its memory). Root is exempt from that check (it holds
  ``CAP_SYS_PTRACE``): a harness run as root hands a ``local`` model everything, which is one
  more reason ``local`` is for trusted code only.
- **the test features**: no phase is given them (see ``harness.runners.judge``), but their file
  lies in the run's temporary folder on the host's disk, where a ``local`` model, running as
  the harness's user, can read it: only the isolating runners keep them out of reach.
- **limits and the process tree**: the run's total memory (``resources.memory_gb``), its
  processes and the size of its output folder, and at the end every process it started,
  daemons included, is killed (see ``base.run_process`` and ``harness.runners.cgroup``).
- **GPUs** (``resources.gpus``, see ``harness.runners.gpus``): the run holds a lease on that many
  of the machine's GPUs, disjoint from every other run's, and ``CUDA_VISIBLE_DEVICES`` names them
  (empty for a run that asked for none, so CUDA shows it no GPU). This is a convention, not a
  wall: a ``local`` model can still open every ``/dev/nvidia*`` node the user can.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import harness
from harness.runners.base import (
    RunJob,
    RunLimits,
    RunOutcome,
    job_argv,
    run_job,
    runners,
)
from harness.runners.cgroup import PR_GET_DUMPABLE, PR_SET_DUMPABLE, prctl
from harness.runners.failure import explain_failure
from harness.runners.gpus import Gpu, cuda_env, lease

__all__ = [
    "LocalRunner",
    "local_env",
]

# Only what Python and BLAS need; the caller's secrets and settings stay out.
PASSED_ENV = ("PATH", "LANG", "LC_ALL")


def local_env(
    job: RunJob, caller: dict[str, str] | None = None, *, assigned: Sequence[Gpu] = ()
) -> dict[str, str]:
    """The environment of a local run: the allow-list of ``caller`` (default: ours) and settings,
    ``CUDA_VISIBLE_DEVICES`` among them: the ``job.gpus`` GPUs ``assigned`` to it, or none."""
    if len(assigned) != job.gpus:
        raise ValueError(f"job asks for {job.gpus} GPU(s) but {len(assigned)} are assigned")
    caller = dict(os.environ) if caller is None else caller
    env = {k: caller[k] for k in PASSED_ENV if k in caller}
    source = str(Path(harness.__file__).resolve().parent.parent)
    if source in [str(Path(p).resolve()) for p in caller.get("PYTHONPATH", "").split(":") if p]:
        env["PYTHONPATH"] = source
    env.update(
        HOME=str(job.out),
        # The phase's own folder (a fresh one per prediction pass, removed after it): what a
        # model keeps in its temporary files does not outlive the pass.
        TMPDIR=str(job.out),
        PYTHONHASHSEED=str(job.seed),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        OMP_NUM_THREADS=str(job.cpus),
        OPENBLAS_NUM_THREADS=str(job.cpus),
        MKL_NUM_THREADS=str(job.cpus),
    )
    env.update(cuda_env(assigned))
    return env


@contextmanager
def not_dumpable() -> Iterator[str]:
    """The harness process is not dumpable inside the block; yields what was done."""
    try:
        before = prctl(PR_GET_DUMPABLE)
        prctl(PR_SET_DUMPABLE, 0)
    except OSError as err:
        yield f"could not make the harness non-dumpable ({err})"
        return
    try:
        yield "harness not dumpable during the run"
    finally:
        prctl(PR_SET_DUMPABLE, before)


class LocalRunner:
    name = "local"

    def run(self, job: RunJob) -> RunOutcome:
        with lease(job.gpus) as assigned, not_dumpable() as dumpable:
            outcome = run_job(
                job,
                lambda channel: job_argv(job, channel=channel),
                env=local_env(job, assigned=assigned),
                limits=RunLimits.for_job(job),
            )
        outcome.details["dumpable"] = dumpable
        if assigned:
            outcome.details["gpus"] = ",".join(g.cuda_id for g in assigned)
        return explain_failure(job, outcome)


runners.add("local", LocalRunner())
