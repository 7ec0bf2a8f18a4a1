"""Process hygiene for the worker's check mode (``zsl submission validate``).

The check imports a package's entrypoint in a forked process and reports what it found; the
worker (see :mod:`harness.worker.phases`), which never runs model code itself:

- becomes a *child subreaper*, so every process the model starts stays its descendant even after
  a double fork or ``setsid``, and :meth:`Reaper.sweep` kills all of them before the findings are
  written; a pidfd pins each victim, so a recycled pid is never hit;
- makes itself non-dumpable, so same-user model processes cannot read or write its memory.

Fit and prediction need none of this any more: each is a run of its own, and the harness judges
them from outside (:mod:`harness.runners.judge`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import time
from collections.abc import Collection

from harness.core.procfs import proc_stat, process_table, subtree

__all__ = [
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "Reaper",
    "become_subreaper",
    "descendants",
    "set_undumpable",
]

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 100


class GuardError(Exception):
    """Something the check cannot allow; the message says what and what to do."""


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def _prctl(option: int, value: int) -> bool:
    libc = _libc()
    if libc is None or not hasattr(libc, "prctl"):
        return False
    return int(libc.prctl(option, value, 0, 0, 0)) == 0


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented to it (Linux), not to init."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_undumpable() -> bool:
    """Same-user processes can no longer read or write this process's memory (``/proc``)."""
    return _prctl(PR_SET_DUMPABLE, 0)


# --- processes ---------------------------------------------------------------------------


def descendants(root: int | None = None) -> dict[int, str]:
    """Every live descendant of ``root`` (default: this process) with its state letter."""
    root = os.getpid() if root is None else root
    table = process_table()
    children = [pid for pid, info in table.items() if info.ppid == root]
    return {pid: table[pid].state for pid in subtree(table, children)}


def is_descendant(pid: int, root: int) -> bool:
    """Whether ``pid`` is (now) a descendant of ``root``, by its chain of parents."""
    seen = set()
    while pid not in seen and pid > 1:
        seen.add(pid)
        info = proc_stat(pid)
        if info is None:
            return False
        pid = info.ppid
        if pid == root:
            return True
    return False


def _kill(pid: int) -> None:
    """SIGKILL ``pid`` if it is still our descendant; a pidfd pins it against pid reuse."""
    me = os.getpid()
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):
        if is_descendant(pid, me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return
    try:
        if is_descendant(pid, me):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


class Reaper:
    """Collects the exit statuses of this process's children (orphans included, as subreaper)."""

    def __init__(self) -> None:
        self.statuses: dict[int, int] = {}

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = status

    def wait(self, pid: int, timeout_s: float = 30.0) -> int | None:
        """The wait status of child ``pid`` once it ended, or None if it outlived ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while pid not in self.statuses:
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                self.reap()
                return self.statuses.get(pid)
            if got:
                self.statuses[pid] = status
                break
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
        return self.statuses[pid]

    def sweep(self, keep: Collection[int] = ()) -> int:
        """Kill every live descendant except ``keep``; return how many were killed.

        Repeats until none is left (a process may fork while it is being killed), then reaps the
        ones that became our children.
        """
        killed = 0
        for _ in range(SWEEP_ROUNDS):
            self.reap()
            victims = [p for p, s in descendants().items() if p not in keep and s not in "ZX"]
            if not victims:
                return killed
            for pid in victims:
                _kill(pid)
            killed += len(victims)
            time.sleep(0.002)
        raise GuardError(
            f"the model keeps starting processes ({len(victims)} still running after"
            f" {SWEEP_ROUNDS} rounds of killing)"
        )
