"""Process hygiene for the worker's inductive check: what keeps two prediction passes apart.

The worker (see :mod:`harness.worker`) predicts every test image twice, in two processes forked
from the fitted model, and compares. Two passes are only independent if nothing carries
information from one to the other, so the worker, which never runs model code itself:

- becomes a *child subreaper*, so every process the model starts stays its descendant even after
  a double fork or ``setsid``, and :func:`sweep` kills all of them (except the pass processes)
  before, between and after the passes; a pidfd pins each victim, so a recycled pid is never hit;
- makes itself non-dumpable, so same-user model processes cannot read or write its memory;
- forbids POSIX message queues for the whole job (``RLIMIT_MSGQUEUE`` 0: they outlive processes
  and no file lists them);
- snapshots what survives processes: every entry under the writable folders (out, ``HOME``,
  ``TMPDIR``: name, type, size, mtimes, inode, mode, link target) and the System V IPC tables
  of this user (:func:`snapshot`); a pass that changed any of it is refused;
- keeps the waiting pass process stopped (``SIGSTOP``) while the other one runs, and checks
  before resuming it that it was not scheduled meanwhile and has no signal pending
  (:func:`sched_count`, :func:`pending_signals`).

Each pass process itself runs :func:`seal_pass_process` before it predicts: it refuses to run
with extra threads (``os.register_at_fork`` hooks of the model) or shared writable memory
inherited from the fitted process, closes every inherited file descriptor but its own pipes,
blocks file writes (``RLIMIT_FSIZE`` 0), restores default signal dispositions and makes itself
non-dumpable (so the running pass cannot write into the waiting one through ``/proc``).

Out of reach here, and documented as such in the worker: the seal runs inside a copy of the
fitted process, so model code that rewrote the worker's own functions during ``fit`` can skip
it; what the worker checks from outside (sweep, snapshots, stopped state) still holds then.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import resource
import signal
import stat
import time
from collections.abc import Collection, Iterable
from pathlib import Path

from harness.procfs import proc_stat, process_table, subtree

__all__ = [
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "SHM_DIRS",
    "SNAPSHOT_LIMIT",
    "SWEEP_ROUNDS",
    "Entry",
    "GuardError",
    "Reaper",
    "become_subreaper",
    "changes",
    "descendants",
    "forbid_message_queues",
    "is_descendant",
    "is_stopped",
    "pending_signals",
    "sched_count",
    "seal_pass_process",
    "set_undumpable",
    "snapshot",
    "status_fields",
    "stop",
    "writable_roots",
]

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 100
SNAPSHOT_LIMIT = 500_000
SHM_DIRS = ("/dev/shm", "/tmp", "/var/tmp", "/run/shm")


class GuardError(Exception):
    """Something the inductive check cannot allow; the message says what and what to do."""


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


def forbid_message_queues() -> None:
    """No POSIX message queue can be created by this process or its descendants."""
    # Not Linux (no RLIMIT_MSGQUEUE): nothing to forbid.
    with contextlib.suppress(ValueError, OSError, AttributeError):
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))


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
            f" {SWEEP_ROUNDS} rounds of killing); the inductive check cannot isolate the passes"
        )


def status_fields(pid: int, task: int | None = None) -> dict[str, str]:
    path = f"/proc/{pid}/status" if task is None else f"/proc/{pid}/task/{task}/status"
    with open(path) as handle:
        return dict(line.split(":", 1) for line in handle if ":" in line)


def sched_count(pid: int) -> int:
    """Context switches of every thread of ``pid``: unchanged while it stays stopped."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        fields = status_fields(pid, int(task))
        total += int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    return total


def pending_signals(pid: int) -> int:
    """Bit mask of signals pending for ``pid`` (process-wide and per thread)."""
    mask = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        fields = status_fields(pid, int(task))
        mask |= int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
    return mask


def stop(pid: int, timeout_s: float = 10.0) -> None:
    """Stop ``pid`` (SIGSTOP cannot be caught) and wait until the kernel says it is stopped."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        info = proc_stat(pid)
        if info is None or info.state in "ZX":
            raise GuardError(f"a prediction pass process (pid {pid}) ended before it could wait")
        if info.state in "Tt":
            return
        if time.monotonic() > deadline:
            raise GuardError(f"a prediction pass process (pid {pid}) did not stop")
        time.sleep(0.002)


def is_stopped(pid: int) -> bool:
    info = proc_stat(pid)
    return info is not None and info.state in "Tt"


# --- what survives processes -------------------------------------------------------------


def writable_roots(out: Path) -> list[Path]:
    """The folders a pass could leave a file in: the out folder, ``HOME`` and ``TMPDIR``.

    Only folders this process can write are kept (a read-only ``HOME=/`` in a container is
    not), nested ones are folded into their parent, and ``/`` is never walked.
    """
    candidates = [out, os.environ.get("HOME"), os.environ.get("TMPDIR")]
    found: list[Path] = []
    for raw in candidates:
        if not raw:
            continue
        path = Path(raw).resolve()
        if path == Path("/") or not path.is_dir() or not os.access(path, os.W_OK):
            continue
        found.append(path)
    found.sort(key=lambda p: len(p.parts))
    roots: list[Path] = []
    for path in found:
        if not any(path == r or r in path.parents for r in roots):
            roots.append(path)
    return roots


Entry = tuple[object, ...]


def _walk(root: Path, table: dict[str, Entry]) -> None:
    root_dev = os.lstat(root).st_dev
    readonly: dict[int, bool] = {root_dev: False}
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as err:
            table[str(folder)] = ("unreadable", err.errno)
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = stat.S_IFMT(st.st_mode)
            target = os.readlink(entry.path) if stat.S_ISLNK(st.st_mode) else ""
            table[entry.path] = (
                kind,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_ino,
                st.st_mode,
                st.st_nlink,
                target,
            )
            if len(table) > SNAPSHOT_LIMIT:
                raise GuardError(
                    f"more than {SNAPSHOT_LIMIT} files under {root}: too many to check that"
                    " prediction passes leave no file behind"
                )
            if stat.S_ISDIR(st.st_mode):
                # A read-only mount below a root (a Python bound over /tmp) cannot change.
                if st.st_dev not in readonly:
                    readonly[st.st_dev] = bool(os.statvfs(entry.path).f_flag & os.ST_RDONLY)
                if not readonly[st.st_dev]:
                    todo.append(Path(entry.path))


def _sysv() -> dict[str, Entry]:
    """This user's System V IPC objects with their counters and times (change on every use)."""
    table: dict[str, Entry] = {}
    uid = str(os.getuid())
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split(), strict=False))
            if row.get("uid") == uid or row.get("cuid") == uid:
                table[f"System V {kind} id {row.get(header[1], '?')}"] = tuple(line.split())
    return table


def snapshot(roots: Iterable[Path]) -> dict[str, Entry]:
    """Every entry under ``roots`` and this user's System V IPC objects, for :func:`changes`."""
    table: dict[str, Entry] = {}
    for root in roots:
        _walk(root, table)
    table.update(_sysv())
    return table


def changes(before: dict[str, Entry], after: dict[str, Entry], limit: int = 5) -> list[str]:
    """Up to ``limit`` entries created, removed or changed between two snapshots, described."""
    found: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        if before.get(key) == after.get(key):
            continue
        what = "created" if key not in before else "removed" if key not in after else "changed"
        found.append(f"{key} ({what})")
        if len(found) >= limit:
            break
    return found


# --- inside a pass process ---------------------------------------------------------------


def _maps() -> list[tuple[str, str]]:
    """(permissions, backing path) of every mapping of this process."""
    found = []
    with open("/proc/self/maps") as handle:
        for line in handle:
            parts = line.split(maxsplit=5)
            found.append((parts[1], parts[5].strip() if len(parts) > 5 else ""))
    return found


def _shared_mapping_problem(perms: str, path: str, writable: Collection[Path]) -> str | None:
    if perms[3] != "s":
        return None
    if not path.startswith("/") or path.endswith(" (deleted)"):
        return f"anonymous shared memory {path or '(no file)'} ({perms})"
    if "w" in perms:
        return f"a writable shared mapping of {path}"
    resolved = Path(path)
    if any(resolved == d or d in resolved.parents for d in writable):
        return f"a shared mapping of {path}, in a folder the passes can write"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return f"a shared mapping of {path}, which is not a regular file"
    except OSError:
        return f"a shared mapping of {path}, which is gone"
    return None


def seal_pass_process(keep_fds: Collection[int], writable: Collection[Path]) -> None:
    """Run first in a freshly forked pass process, before it sees a test image.

    Raises GuardError (the pass is refused) for what it cannot undo: threads started by fork
    hooks, and shared memory that the other pass process also maps.
    """
    threads = int(status_fields(os.getpid())["Threads"])
    if threads != 1:
        raise GuardError(
            f"the fitted model started {threads - 1} thread(s) in the forked prediction process"
            " (os.register_at_fork hooks?); a pass must run alone"
        )
    # Everything inherited from the fitted process goes, first of all pipes and sockets that
    # the other pass process holds too.
    top = max(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    low = 3
    for fd in sorted(f for f in keep_fds if f >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, top)
    writable_dirs = {*(Path(d) for d in SHM_DIRS), *writable}
    for perms, path in _maps():
        problem = _shared_mapping_problem(perms, path, writable_dirs)
        if problem is not None:
            raise GuardError(
                f"the fitted model keeps {problem}: the other prediction pass would see what"
                " this one writes there. Keep model state in private memory (or copy it in"
                " fit), or declare `declarations.transductive: true` in submission.yaml"
            )
    # No data into any file from here on: a cache file is what would link the two passes.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            continue
    set_undumpable()
