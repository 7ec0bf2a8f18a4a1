"""The runner interface: run one phase of a job inside some isolation, report what happened.

Every backend builds a command around the same worker entrypoint
(``python -m harness.worker.phases``:
a ``fit`` phase, one ``predict`` pass, or the ``--check`` of ``zsl submission validate``) or, for
a predictions package's generator, around its script (``python SCRIPT BUNDLE OUT``, see
:func:`job_argv`), and returns a :class:`RunOutcome`. A runner never reads test labels and never
scores; what a phase produced is read by the harness (:mod:`harness.runners.judge`).

See docs/runners.md.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, Protocol

from harness.core.registry import Registry
from harness.runners import BACKENDS
from harness.runners.cgroup import POLL_S, Containment
from harness.runners.progress import ProgressReader, current_sink, strip_events

__all__ = [
    "PIDS_LIMIT",
    "Conversation",
    "RunJob",
    "RunLimits",
    "RunOutcome",
    "Runner",
    "folder_size",
    "job_argv",
    "run_job",
    "run_process",
    "runners",
    "truncate",
    "worker_env",
]

LOG_LIMIT_BYTES = 64 * 1024
# Processes (threads count too) a run may hold at once, where a cgroup or rlimit enforces it.
PIDS_LIMIT = 256
# After the run's processes are gone, how long its output pipes may take to reach end of file.
DRAIN_S = 2.0
# Entries the output folder may hold (a model filling it with empty files costs inodes and scans).
OUT_MAX_ENTRIES = 10_000


class Conversation(Protocol):
    """What a prediction pass says with the harness while it runs: called in a thread with the
    harness's ends of the two pipes (``requests``: written, ``replies``: read); returns True when
    the pass ended as the protocol says (the process should exit by itself), False when the
    harness stopped talking (the run's processes are then killed)."""

    def __call__(self, requests: int, replies: int) -> bool: ...


@dataclass(frozen=True)
class RunJob:
    bundle: Path
    package: Path
    entrypoint: str
    out: Path
    seed: int = 0
    timeout_s: float = 1800.0
    memory_gb: float = 4.0
    cpus: int = 1
    gpus: int = 0
    # A predictions package's generator (a path inside ``package``) instead of the worker:
    # ``python SCRIPT BUNDLE OUT`` (see ``job_argv``).
    script: str | None = None
    # The worker's phase: ``fit`` (on ``bundle``, a model bundle of one fit, saving into
    # ``out/state``) or ``predict`` (one pass over ``state``, talking through ``conversation``).
    phase: Literal["fit", "predict"] = "fit"
    # A prediction pass: the fitted state (shown read-only at /state by isolating runners) and
    # the harness's side of the protocol (harness.runners.protocol).
    state: Path | None = None
    conversation: Conversation | None = field(default=None, compare=False, repr=False)
    # Check mode: the worker imports ``entrypoint`` and checks it against the model protocol,
    # without data (``zsl submission validate``; ``bundle`` is an empty folder then).
    check: bool = False

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * (1 << 30))

    @property
    def out_bytes(self) -> int:
        """The output folder's bound: ``memory_gb``. What a run writes there is prediction files,
        arrays the worker held in memory, so a run that needs more is one that declares more
        memory; a bound of its own in the manifest would be one more number to get wrong."""
        return self.memory_bytes


@dataclass
class RunOutcome:
    exit_code: int
    reason: str
    wall_s: float
    stdout: str = ""
    stderr: str = ""
    details: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Runner(Protocol):
    name: str

    def run(self, job: RunJob) -> RunOutcome: ...


#: The runners by name. Each backend module registers its runner at its end
#: (``runners.add(...)``), imported the first time the registry is read.
runners: Registry[Runner] = Registry("runner")
runners.add_modules(*(f"harness.runners.{name}" for name in BACKENDS))


def worker_argv(
    job: RunJob, python: str = sys.executable, *, channel: tuple[int, int] | None = None
) -> list[str]:
    """The worker's command line for the job's phase (see :mod:`harness.worker.phases`).

    ``channel``: the descriptors (requests, replies) of a prediction pass as the worker sees
    them (the runner's ``pass_fds``, or 0 and 1 where the protocol rides on the standard
    streams, as in containers). A ``check`` job runs the worker's check mode
    (``--check PACKAGE ENTRYPOINT OUT``, see :func:`harness.worker.phases.check`)."""
    if job.check:
        return [python, "-m", "harness.worker.phases", "--check", str(job.package), job.entrypoint,
                str(job.out)]  # fmt: skip
    head = [python, "-m", "harness.worker.phases", job.phase]
    if job.phase == "fit":
        return [*head, str(job.bundle), str(job.package), job.entrypoint, str(job.out),
                "--seed", str(job.seed)]  # fmt: skip
    if job.state is None or channel is None:
        raise ValueError("a prediction pass needs a state folder and a channel")
    requests, replies = channel
    return [*head, str(job.package), job.entrypoint, str(job.state), "--requests",
            str(requests), "--replies", str(replies), "--seed", str(job.seed)]  # fmt: skip


def worker_env(job: RunJob, *, home: str) -> dict[str, str]:
    """The worker's environment under an isolating runner (sandbox, container): none of the
    harness's own, the job's seed for hashing, and as many math-library threads as it has CPUs,
    so a package scores bit-identically under either."""
    threads = str(job.cpus)
    return {
        "HOME": home,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": str(job.seed),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


def job_argv(
    job: RunJob, python: str = sys.executable, *, channel: tuple[int, int] | None = None
) -> list[str]:
    """The command a runner starts for ``job``: the worker, or the package's generator script."""
    if job.script is not None:
        return [python, str(job.package / job.script), str(job.bundle), str(job.out)]
    return worker_argv(job, python=python, channel=channel)


def truncate(data: bytes, limit: int = LOG_LIMIT_BYTES) -> str:
    """Keep the head and the tail of a log; say how much was cut."""
    if len(data) <= limit:
        return data.decode("utf-8", "replace")
    half = limit // 2
    cut = len(data) - 2 * half
    return (
        data[:half].decode("utf-8", "replace")
        + f"\n[... {cut} bytes cut ...]\n"
        + data[-half:].decode("utf-8", "replace")
    )


class HeadTail:
    """A stream read piece by piece, kept as :func:`truncate` would keep it whole.

    Holds at most about ``1.5 * limit`` bytes however much is fed: the first ``limit // 2``
    bytes, and a window over the rest that is trimmed back to its last ``limit - limit // 2``
    bytes whenever it reaches twice that.
    """

    def __init__(self, limit: int = LOG_LIMIT_BYTES) -> None:
        self.limit = limit
        self.half = limit // 2
        self.keep = limit - self.half
        self.head = bytearray()
        self.rest = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.rest += data
        if len(self.rest) > 2 * self.keep:
            del self.rest[: len(self.rest) - self.keep]

    def text(self) -> str:
        if self.total <= self.limit:
            return (bytes(self.head) + bytes(self.rest)).decode("utf-8", "replace")
        cut = self.total - 2 * self.half
        return (
            bytes(self.head).decode("utf-8", "replace")
            + f"\n[... {cut} bytes cut ...]\n"
            + bytes(self.rest[-self.half :]).decode("utf-8", "replace")
        )


@dataclass(frozen=True)
class RunLimits:
    """What :func:`run_process` enforces besides the wall clock (None: not bounded)."""

    memory_bytes: int | None = None  # the whole run: processes and tmpfs pages together
    pids: int | None = None
    out_dir: Path | None = None
    out_bytes: int | None = None
    sandbox_tmp: bool = False  # the fallback watchdog also counts the sandbox's private /tmp

    @classmethod
    def for_job(cls, job: RunJob, *, sandbox_tmp: bool = False) -> RunLimits:
        return cls(
            memory_bytes=job.memory_bytes,
            pids=PIDS_LIMIT,
            out_dir=job.out,
            out_bytes=job.out_bytes,
            sandbox_tmp=sandbox_tmp,
        )


def folder_size(root: Path, max_entries: int = OUT_MAX_ENTRIES) -> tuple[int, int]:
    """(bytes, entries) under ``root``, links not followed; a sparse file counts at its size.

    Raises OSError when a folder cannot be read (a model hiding what it wrote). An entry that
    vanishes during the scan (a model renaming or deleting its own files) is skipped: the next
    poll, and the check after the run, see the folder as it then is."""
    total, entries = 0, 0
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            it = os.scandir(folder)
        except FileNotFoundError:
            if folder == root:
                raise
            continue
        with it:
            for entry in it:
                entries += 1
                if entries > max_entries:
                    return total, entries
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                total += max(st.st_size, st.st_blocks * 512)
                if stat.S_ISDIR(st.st_mode):
                    todo.append(Path(entry.path))
    return total, entries


def _out_problem(limits: RunLimits) -> str | None:
    if limits.out_dir is None or limits.out_bytes is None:
        return None
    bound = f"{limits.out_bytes / (1 << 30):g} GiB"
    try:
        size, entries = folder_size(limits.out_dir)
    except OSError as err:
        return f"output folder cannot be measured ({err.strerror or err}: {err.filename})"
    if size > limits.out_bytes:
        return f"output folder exceeded its bound of {bound} (held {size / (1 << 30):.2f} GiB)"
    if entries > OUT_MAX_ENTRIES:
        return f"output folder holds more than {OUT_MAX_ENTRIES} files and folders"
    return None


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return "ok" if code == 0 else f"exited with code {code}"


#: After a conversation ended, how long the pass's processes may take to exit by themselves.
CONVERSATION_EXIT_S = 10.0
#: ... and after the harness stopped it (a refused answer, a broken protocol).
REFUSAL_EXIT_S = 2.0


class _Talk:
    """A job's conversation in a thread, on the harness's ends of its two pipes."""

    def __init__(
        self, conversation: Conversation, requests: int, replies: int, child: tuple[int, int]
    ) -> None:
        self.conversation = conversation
        self.fds = (requests, replies)
        self.child = child  # the child's ends: closed here once it holds them
        self.ended_at: float | None = None
        self.finished = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="zsl-conversation", daemon=True)

    def _run(self) -> None:
        try:
            self.finished = bool(self.conversation(*self.fds))
        except BaseException as err:  # kept for the caller: the harness's own failure
            self.error = err
        finally:
            self.close()
            self.ended_at = time.perf_counter()

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = (-1, -1)

    def close_child_ends(self) -> None:
        """After the child started: only its processes hold these, so its exit is our EOF."""
        for fd in self.child:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.child = (-1, -1)

    def overdue(self, now: float) -> bool:
        """The conversation ended (or failed) and the processes had their time to exit: a pass
        that refused a chunk exits with its code at once, one the harness stopped talking to
        gets :data:`REFUSAL_EXIT_S`."""
        if self.ended_at is None:
            return False
        grace = CONVERSATION_EXIT_S if self.finished else REFUSAL_EXIT_S
        return now - self.ended_at > grace


@dataclass
class _Watch:
    """What stops a run early, polled by :func:`run_process` between reads of its output."""

    start: float
    timeout_s: float
    limits: RunLimits
    box: Containment
    talk: _Talk | None
    next_out_check: float = 0.0

    def stop_reason(self) -> str | None:
        now = time.perf_counter()
        if now - self.start > self.timeout_s:
            return f"timed out after {self.timeout_s:g} s; process group killed"
        if self.talk is not None and self.talk.overdue(now):
            return "stopped by the harness: the conversation ended"
        stop = self.box.check()
        if stop is None and now >= self.next_out_check:
            began = time.perf_counter()
            stop = _out_problem(self.limits)
            # A folder with many entries is scanned less often (at most ~5% of the time).
            self.next_out_check = now + max(POLL_S, 20 * (time.perf_counter() - began))
        return stop


def run_process(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout_s: float,
    limits: RunLimits | None = None,
    log_limit: int = LOG_LIMIT_BYTES,
    pass_fds: tuple[int, ...] = (),
    talk: _Talk | None = None,
) -> RunOutcome:
    """Run ``argv`` in its own session under ``limits``; kill everything it started at the end.

    The run stops early (everything killed, the reason says why) at the wall-clock limit, when
    its memory passes ``limits.memory_bytes`` (a cgroup OOM kill, or the fallback watchdog) or
    its output folder passes ``limits.out_bytes``. A run that ended by itself has its leftover
    processes (daemons) killed too; ``details["killed_after_exit"]`` counts them.
    ``pass_fds``: descriptors the child inherits (``subprocess.Popen``'s), at the same numbers.
    ``talk``: a conversation (see :func:`run_job`) started once the child runs; when it ends
    the child has :data:`CONVERSATION_EXIT_S` to exit (none when it failed) before it is killed.
    An exception raised by the conversation itself is raised here once the run is over.
    """
    limits = limits or RunLimits()
    start = time.perf_counter()
    box = Containment.start(
        memory_bytes=limits.memory_bytes, pids_max=limits.pids, sandbox_tmp=limits.sandbox_tmp
    )
    try:
        proc = subprocess.Popen(
            box.wrap(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if box.gated else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except BaseException:
        box.close()
        if talk is not None:
            talk.close_child_ends()
            talk.close()
        raise
    if talk is not None:
        talk.close_child_ends()
    try:
        box.attach(proc.pid, proc.stdin)
        progress = ProgressReader(current_sink(), start)
        logs = _Logs(proc, log_limit, progress)
        if talk is not None:
            talk.thread.start()
        stop: str | None = None
        watch = _Watch(start, timeout_s, limits, box, talk)
        while proc.poll() is None:
            logs.pump(POLL_S)
            progress.tick()  # a heartbeat while a phase runs silent
            stop = watch.stop_reason()
            if stop is not None:
                box.kill()
                proc.wait()
                break
        killed_after = box.kill()
        logs.drain(DRAIN_S)
        progress.close()
        code = proc.returncode
        # A limit passed just before the end still fails the run, even one whose first process
        # exited 0 (its child was OOM-killed, or it wrote too much and left).
        over = stop or box.check() or _out_problem(limits)
        reason = over or _exit_reason(code)
        if over and code == 0:
            code = -signal.SIGKILL
    finally:
        if proc.poll() is None:
            box.kill()
            proc.wait()
        box.close()
        if talk is not None:
            # Every process holding the other ends is gone: the thread sees end of file.
            if talk.thread.is_alive() or talk.thread.ident is not None:
                talk.thread.join(timeout=DRAIN_S + CONVERSATION_EXIT_S)
            talk.close()
    details: dict[str, object] = {"containment": box.describe(), **progress.summary()}
    if killed_after:
        details["killed_after_exit"] = killed_after
    if talk is not None and talk.error is not None:
        raise talk.error
    return RunOutcome(
        exit_code=code,
        reason=reason,
        wall_s=time.perf_counter() - start,
        stdout=logs.out.text(),
        stderr=strip_events(logs.err.text()),
        details=details,
    )


def run_job(
    job: RunJob,
    argv: Callable[[tuple[int, int] | None], list[str]],
    *,
    env: dict[str, str],
    limits: RunLimits,
    extra_fds: tuple[int, ...] = (),
) -> RunOutcome:
    """:func:`run_process` on the command ``argv(channel)`` in ``job.out`` under the job's wall
    clock. A prediction pass (``job.conversation``) gets two fresh pipes: ``channel`` is the
    child's ends (requests read, replies written), passed to it at the same numbers, and the
    conversation runs on the harness's ends; other jobs get ``channel`` None. ``extra_fds``
    are passed to the child as well (a seccomp program for bwrap)."""
    if job.conversation is None:
        return run_process(
            argv(None),
            env=env,
            cwd=job.out,
            timeout_s=job.timeout_s,
            limits=limits,
            pass_fds=extra_fds,
        )
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    child = (requests_r, replies_w)
    talk = _Talk(job.conversation, requests_w, replies_r, child)
    try:
        command = argv(child)
    except BaseException:
        talk.close_child_ends()
        talk.close()
        raise
    return run_process(
        command,
        env=env,
        cwd=job.out,
        timeout_s=job.timeout_s,
        limits=limits,
        pass_fds=(*child, *extra_fds),
        talk=talk,
    )


class _Logs:
    """The child's stdout and stderr, read without blocking into :class:`HeadTail` buffers;
    stderr also goes to ``progress`` (the worker's progress events)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], limit: int, progress: ProgressReader | None = None
    ) -> None:
        self.proc = proc
        self.out, self.err = HeadTail(limit), HeadTail(limit)
        self.progress = progress
        self.sel = selectors.DefaultSelector()
        for stream, buf in ((proc.stdout, self.out), (proc.stderr, self.err)):
            assert stream is not None
            os.set_blocking(stream.fileno(), False)
            self.sel.register(stream, selectors.EVENT_READ, buf)

    def pump(self, timeout: float) -> None:
        """Read whatever arrives during ``timeout`` seconds (the caller's polling interval)."""
        deadline = time.perf_counter() + timeout
        while (left := deadline - time.perf_counter()) > 0:
            if not self.sel.get_map():
                # Both streams closed: the child is ending. Wait for it, not for the rest of
                # the interval (a sleep cost every phase up to POLL_S after its exit).
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=left)
                return
            for key, _ in self.sel.select(left):
                stream: IO[bytes] = key.fileobj  # type: ignore[assignment]
                try:
                    chunk = os.read(stream.fileno(), 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    key.data.feed(chunk)
                    if key.data is self.err and self.progress is not None:
                        self.progress.feed(chunk)
                else:
                    self.sel.unregister(stream)
                    stream.close()

    def drain(self, limit_s: float) -> None:
        """Read to end of file; a writer that outlived the kill only costs ``limit_s``."""
        deadline = time.perf_counter() + limit_s
        while self.sel.get_map() and time.perf_counter() < deadline:
            self.pump(min(0.01, max(0.0, deadline - time.perf_counter())))
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
        self.sel.close()
