"""Isolation backends for model code, behind one interface (see ``base``)."""

from harness.runners import container as _container  # noqa: F401  (registers 'container')
from harness.runners import local as _local  # noqa: F401  (registers 'local')
from harness.runners import sandbox as _sandbox  # noqa: F401  (registers 'sandbox')
from harness.runners.base import RunJob, Runner, RunOutcome, runners

__all__ = ["RunJob", "RunOutcome", "Runner", "runners"]
