"""Containment of one run's processes: a cgroup where the machine offers one, else a fallback.

Why: rlimits are per process, so they do not bound a run's total (N processes × ``RLIMIT_AS``,
plus tmpfs pages, which belong to no process), and a model can leave daemons behind with
``setsid`` and a double fork, out of its process group and session. A cgroup holds every
process the run starts whatever it does to its session or parent, charges the run's tmpfs pages
(a sandbox's ``/tmp``) to it, and can be killed as a whole.

See docs/runners.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.procfs import proc_stat, process_table, subtree

__all__ = [
    "MOUNTINFO",
    "POLL_S",
    "PR_GET_CHILD_SUBREAPER",
    "PR_GET_DUMPABLE",
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "SELF_CGROUP",
    "Containment",
    "prctl",
]

MOUNTINFO = Path("/proc/self/mountinfo")
SELF_CGROUP = Path("/proc/self/cgroup")
POLL_S = 0.1
KILL_WAIT_S = 5.0
STALE_S = 300.0

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

# The shell that stands between Popen and the real command while the harness moves it into the
# cgroups: it waits for one line on stdin (the gate), puts /dev/null back on stdin and execs.
# Nothing the run starts can exist before it is inside the cgroups.
GATE = 'read -r _ || exit 125; exec </dev/null; exec "$@"'


def prctl(option: int, arg: int = 0) -> int:
    """``prctl(2)``; returns its result, or raises OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    if option in (PR_GET_CHILD_SUBREAPER,):
        value = ctypes.c_int(0)
        if libc.prctl(option, ctypes.byref(value), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl({option})")
        return value.value
    result = int(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))
    if result < 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {arg})")
    return result


@dataclass
class _Group:
    path: Path
    version: int  # 1 or 2
    controllers: set[str] = field(default_factory=set)
    has_kill: bool = False  # v2 cgroup.kill (Linux 5.14+)

    def procs(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(x) for x in text.split()]


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        path = path.replace(code, chr(int(code[1:], 8)))
    return path


def _hierarchies() -> tuple[Path | None, dict[str, Path]]:
    """This process's cgroup folders: the v2 one (or None) and one v1 folder per controller."""
    own_v1: dict[str, str] = {}
    own_v2: str | None = None
    for line in SELF_CGROUP.read_text().splitlines():
        hier_id, controllers, path = line.split(":", 2)
        if hier_id == "0" and controllers == "":
            own_v2 = path
        else:
            for controller in controllers.split(","):
                own_v1[controller] = path
    v2: Path | None = None
    v1: dict[str, Path] = {}
    for line in MOUNTINFO.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, mountpoint, fstype, options = fields[3], _unescape(fields[4]), extra[0], extra[2]

        def below(own: str, root: str = root, mountpoint: str = mountpoint) -> Path | None:
            # The mount may show a sub-tree (a container's): our path is relative to its root.
            if own == root or own.startswith(root.rstrip("/") + "/"):
                return Path(mountpoint) / own[len(root) :].lstrip("/")
            return None

        if fstype == "cgroup2" and own_v2 is not None and v2 is None:
            v2 = below(own_v2)
        elif fstype == "cgroup":
            for controller in options.split(","):
                if controller in own_v1 and controller not in v1:
                    found = below(own_v1[controller])
                    if found is not None:
                        v1[controller] = found
    return v2, v1


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


# -- the process table, for the fallback ---------------------------------------------------------


@dataclass
class Containment:
    """Holds one run's processes (see docs/runners.md); ``start``, ``attach``, ``close``."""

    memory_bytes: int | None
    groups: list[_Group]
    notes: list[str]
    sandbox_tmp: bool = False
    memory_group: _Group | None = None
    kill_group: _Group | None = None
    root_pid: int = 0
    root_start: int = 0
    subreaper_before: int | None = None
    gated: bool = False
    uid: str = ""

    # -- setting up ---------------------------------------------------------------------------

    @classmethod
    def start(
        cls, *, memory_bytes: int | None, pids_max: int | None, sandbox_tmp: bool = False
    ) -> Containment:
        """Create the run's cgroups (nothing runs in them yet); fall back where that fails."""
        box = cls(memory_bytes=memory_bytes, groups=[], notes=[], sandbox_tmp=sandbox_tmp)
        box.uid = uuid.uuid4().hex[:16]
        try:
            v2, v1 = _hierarchies()
        except (OSError, ValueError) as err:
            where = getattr(err, "filename", None) or f"{SELF_CGROUP} or {MOUNTINFO}"
            box.notes.append(f"cgroups unavailable: cannot read {where} ({err.__class__.__name__})")
            v2, v1 = None, {}
        else:
            if v2 is None and not v1:
                box.notes.append(f"cgroups unavailable: no cgroup file system in {MOUNTINFO}")
        want = {"memory"} if memory_bytes is not None else set()
        if pids_max is not None:
            want.add("pids")
        if v2 is not None:
            box._make_v2(v2, want)
        for controller in sorted(want - {c for g in box.groups for c in g.controllers}):
            if controller in v1:
                box._make_v1(v1[controller], controller)
        if box.kill_group is None and v1:
            # Nothing to limit, but a group still finds every process of the run at the end.
            any_v1 = next((c for c in ("pids", "memory", "freezer") if c in v1), sorted(v1)[0])
            box._make_v1(v1[any_v1], "")
        box._configure(memory_bytes, pids_max)
        if pids_max is not None and not any("pids" in g.controllers for g in box.groups):
            box.notes.append("pids: no pids cgroup; only per-process limits bound forks")
        box.gated = bool(box.groups)
        return box

    def _mkdir(self, parent: Path) -> Path | None:
        _sweep(parent)
        child = parent / f"zsl-{self.uid}"
        try:
            child.mkdir()
        except OSError as err:
            self.notes.append(f"cannot create cgroup {child}: {err.strerror or err}")
            return None
        return child

    def _make_v2(self, parent: Path, want: set[str]) -> None:
        child = self._mkdir(parent)
        if child is None:
            return
        group = _Group(child, 2, has_kill=(child / "cgroup.kill").exists())
        try:
            available = set((child / "cgroup.controllers").read_text().split())
            # Controllers the parent has but does not hand down: try to delegate them (refused,
            # EBUSY, when the parent holds processes and is not the root). Those the parent
            # lacks (bound to v1 on hybrid systems) are looked for in v1.
            missing = want - available
            missing &= set((parent / "cgroup.controllers").read_text().split())
        except OSError:
            available, missing = set(), set()
        if missing:
            try:
                _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
                available = set((child / "cgroup.controllers").read_text().split())
            except OSError as err:
                self.notes.append(
                    f"cgroup v2 {parent}: cannot enable {', '.join(sorted(missing))}"
                    f" ({err.strerror or err})"
                )
        group.controllers = want & available
        self.groups.append(group)
        self.kill_group = group

    def _make_v1(self, parent: Path, controller: str) -> None:
        child = self._mkdir(parent)
        if child is not None:
            self.groups.append(_Group(child, 1, {controller} - {""}))
            if self.kill_group is None:
                self.kill_group = self.groups[-1]

    def _configure(self, memory_bytes: int | None, pids_max: int | None) -> None:
        for group in list(self.groups):
            try:
                if "memory" in group.controllers and memory_bytes is not None:
                    if group.version == 2:
                        _write(group.path / "memory.max", str(memory_bytes))
                        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                            if (group.path / name).exists():
                                _write(group.path / name, value)
                    else:
                        _write(group.path / "memory.limit_in_bytes", str(memory_bytes))
                        if (group.path / "memory.memsw.limit_in_bytes").exists():
                            _write(group.path / "memory.memsw.limit_in_bytes", str(memory_bytes))
                    self.memory_group = group
                if "pids" in group.controllers and pids_max is not None:
                    _write(group.path / "pids.max", str(pids_max))
            except OSError as err:
                self.notes.append(f"cannot set limits in {group.path}: {err.strerror or err}")
                group.controllers.discard("memory")
                if self.memory_group is group:
                    self.memory_group = None
        if memory_bytes is not None and self.memory_group is None:
            self.notes.append("memory: no memory cgroup; the run's total is polled instead")

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` behind the gate when there are cgroups to join (see :data:`GATE`)."""
        return ["/bin/sh", "-c", GATE, "zsl-gate", *argv] if self.gated else argv

    def attach(self, pid: int, gate: object | None) -> None:
        """Put the run's first process (waiting at the gate) into the cgroups, then open it.

        Where that fails the run goes on under the fallback, and the notes say why.
        """
        self.root_pid = pid
        for group in list(self.groups):
            try:
                _write(group.path / "cgroup.procs", str(pid))
            except OSError as err:
                self.notes.append(f"cannot join cgroup {group.path}: {err.strerror or err}")
                self._drop(group)
        if not self.groups:
            self._fallback()
        stat = proc_stat(pid)
        self.root_start = stat.start_ticks if stat else 0
        if gate is not None:
            try:
                gate.write(b"go\n")  # type: ignore[attr-defined]
                gate.close()  # type: ignore[attr-defined]
            except OSError:
                pass  # the gate died already: its exit code says so

    def _drop(self, group: _Group) -> None:
        self.groups.remove(group)
        if self.memory_group is group:
            self.memory_group = None
            self.notes.append("memory: no memory cgroup; the run's total is polled instead")
        if self.kill_group is group:
            self.kill_group = self.groups[0] if self.groups else None
        with contextlib.suppress(OSError):
            group.path.rmdir()

    def _fallback(self) -> None:
        try:
            self.subreaper_before = prctl(PR_GET_CHILD_SUBREAPER)
            prctl(PR_SET_CHILD_SUBREAPER, 1)
            self.notes.append("process tree: no cgroup; the harness is a subreaper for the run")
        except OSError as err:
            self.notes.append(f"process tree: no cgroup and no subreaper ({err})")

    # -- while it runs ----------------------------------------------------------------------

    def tree(self) -> list[int]:
        """The run's processes, in the fallback: the tree under the first process and the
        harness's children (re-parented daemons) started after it."""
        table = process_table()
        me = os.getpid()
        roots = [self.root_pid] if self.root_pid in table else []
        roots += [
            pid
            for pid, info in table.items()
            if info.ppid == me and pid != self.root_pid and info.start_ticks >= self.root_start
        ]
        return subtree(table, roots)

    def memory_used(self) -> int:
        """The fallback's measure: resident memory of the tree plus the sandbox's /tmp."""
        pids = self.tree()
        page = os.sysconf("SC_PAGE_SIZE")
        total = 0
        for pid in pids:
            stat = proc_stat(pid)
            total += stat.rss_pages * page if stat else 0
        if self.sandbox_tmp:
            total += self._sandbox_tmp_bytes(pids)
        return total

    @staticmethod
    def _sandbox_tmp_bytes(pids: list[int]) -> int:
        try:
            host_tmp = os.stat("/tmp").st_dev
        except OSError:
            host_tmp = -1
        for pid in pids:
            tmp = f"/proc/{pid}/root/tmp"
            try:
                if os.stat(tmp).st_dev == host_tmp:
                    continue  # not inside the sandbox (the outer bwrap): the host's /tmp
                st = os.statvfs(tmp)
            except OSError:
                continue
            return (st.f_blocks - st.f_bfree) * st.f_frsize
        return 0

    def check(self) -> str | None:
        """Why the run must stop now (memory over its bound), or None."""
        if self.memory_bytes is None:
            return None
        gib = f"{self.memory_bytes / (1 << 30):g} GiB"
        group = self.memory_group
        if group is not None:
            events = "memory.events" if group.version == 2 else "memory.oom_control"
            if _read_counter(group.path / events, "oom_kill") > 0:
                return (
                    f"memory limit of {gib} for the whole run reached (processes and /tmp"
                    f" together; cgroup {group.path.name} OOM-killed a process)"
                )
            return None
        used = self.memory_used()
        if used > self.memory_bytes:
            return (
                f"memory limit of {gib} for the whole run reached (watchdog: processes and /tmp"
                f" held {used / (1 << 30):.2f} GiB)"
            )
        return None

    # -- the end ----------------------------------------------------------------------------

    def kill(self) -> int:
        """Kill every process of the run; returns how many there were besides the first."""
        if self.kill_group is not None:
            return self._kill_group(self.kill_group)
        return self._kill_tree()

    def _kill_group(self, group: _Group) -> int:
        if group.has_kill:
            with contextlib.suppress(OSError):
                _write(group.path / "cgroup.kill", "1")
        return self._kill_until_gone(group.procs)

    def _kill_tree(self) -> int:
        def tree_and_group() -> list[int]:
            if self.root_pid:
                with contextlib.suppress(OSError):
                    os.killpg(self.root_pid, signal.SIGKILL)
            return self.tree()

        return self._kill_until_gone(tree_and_group)

    def _kill_until_gone(self, members: Callable[[], list[int]]) -> int:
        """SIGKILL and reap ``members()`` until none but the first process is left (or
        ``KILL_WAIT_S`` passed); returns how many others there were at first."""
        first = [p for p in members() if p != self.root_pid]
        deadline = time.monotonic() + KILL_WAIT_S
        while True:
            left = members()
            for pid in left:
                _kill(pid)
            self._reap(left)
            if not [p for p in left if p != self.root_pid] or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return len(first)

    def _reap(self, pids: list[int]) -> None:
        """Collect re-parented children (never the first process: Popen waits for it)."""
        for pid in pids:
            if pid == self.root_pid:
                continue
            with contextlib.suppress(ChildProcessError):  # not ours: init reaps it
                os.waitpid(pid, os.WNOHANG)

    def close(self) -> None:
        """Remove the cgroups and restore the subreaper flag; after :meth:`kill`."""
        for group in self.groups:
            deadline = time.monotonic() + KILL_WAIT_S
            while True:
                try:
                    group.path.rmdir()
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        self.notes.append(f"could not remove {group.path}: {err.strerror}")
                        break
                    for pid in group.procs():
                        _kill(pid)
                    time.sleep(0.02)
        if self.subreaper_before is not None:
            with contextlib.suppress(OSError):
                prctl(PR_SET_CHILD_SUBREAPER, self.subreaper_before)
            self.subreaper_before = None

    def describe(self) -> dict[str, object]:
        """What held the run, for ``RunOutcome.details``."""
        memory = None
        if self.memory_bytes is not None:
            memory = (
                f"cgroup v{self.memory_group.version} {self.memory_group.path}"
                if self.memory_group is not None
                else f"watchdog every {POLL_S:g} s"
            )
        if self.kill_group is not None:
            kill = (
                f"cgroup.kill of {self.kill_group.path}"
                if self.kill_group.has_kill
                else f"every pid of cgroup v{self.kill_group.version} {self.kill_group.path}"
            )
        else:
            kill = "process tree (subreaper)"
        return {"memory": memory, "kill": kill, "notes": list(self.notes)}


def _sweep(parent: Path) -> None:
    """Remove the empty groups of harnesses that were killed before they could (SIGKILL).

    Only groups older than :data:`STALE_S`: a live run's group is empty only for the moment
    between its creation and its first process joining. A group that still holds processes
    cannot be removed (EBUSY), so nothing running is touched."""
    try:
        stale = [c for c in parent.glob("zsl-*") if time.time() - c.stat().st_mtime > STALE_S]
    except OSError:
        return
    for child in stale:
        with contextlib.suppress(OSError):
            child.rmdir()


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
