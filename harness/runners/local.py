"""Runner ``local``: trusted code in a subprocess, with a clean environment and a timeout.

No isolation beyond a separate process and a minimal environment: use it for the project's own
reference submissions and for code you trust. Untrusted code goes through ``sandbox`` or
``container``.
"""

from __future__ import annotations

import os

from harness.runners.base import RunJob, RunOutcome, run_process, runners, worker_argv

# Only what Python and BLAS need; the caller's secrets and settings stay out.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")


class LocalRunner:
    name = "local"

    def run(self, job: RunJob) -> RunOutcome:
        env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
        env.update(
            HOME=str(job.out),
            PYTHONHASHSEED=str(job.seed),
            PYTHONDONTWRITEBYTECODE="1",
            OMP_NUM_THREADS=str(job.cpus),
            OPENBLAS_NUM_THREADS=str(job.cpus),
            MKL_NUM_THREADS=str(job.cpus),
        )
        return run_process(worker_argv(job), env=env, cwd=job.out, timeout_s=job.timeout_s)


runners.add("local", LocalRunner())
