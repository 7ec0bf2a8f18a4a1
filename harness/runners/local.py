"""Runner ``local``: your own trusted code in a subprocess, with a clean environment and limits.

No isolation beyond a separate process: the model runs as the harness's user, sees its files and
the network. Use it for the project's own reference submissions and for code you trust; untrusted
code goes through ``sandbox`` or ``container`` (``harness.runners.default_runner`` picks the
strongest one the machine offers, and warns when only ``local`` is left).

See docs/runners.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import harness
from harness.core.gpus import Gpu, cuda_env, lease
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
