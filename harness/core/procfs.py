"""The process table from ``/proc``: one reading of ``/proc/PID/stat`` for every process tool.

Used on both sides of the isolation: by the runners' containment (``harness.runners.cgroup``,
the fallback without cgroups) and by the worker's process hygiene (``harness.worker.guard``).
Linux only, like the runners.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "proc_stat",
    "process_table",
    "subtree",
]


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` the harness reads (see proc(5))."""

    pid: int
    ppid: int
    state: str  # one letter: R running, S sleeping, T stopped, Z zombie, ...
    start_ticks: int  # start time after boot, in clock ticks: tells a reused pid apart
    rss_pages: int


def proc_stat(pid: int) -> ProcStat | None:
    """``pid``'s stat line, or None when the process is gone (or the line is unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces and parentheses.
    fields = data[data.rfind(b")") + 2 :].split()
    if len(fields) < 22:
        return None
    return ProcStat(
        pid=pid,
        ppid=int(fields[1]),
        state=fields[0].decode("ascii", "replace"),
        start_ticks=int(fields[19]),
        rss_pages=int(fields[21]),
    )


def process_table() -> dict[int, ProcStat]:
    """Every process this one can see, by pid."""
    table: dict[int, ProcStat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := proc_stat(int(name))) is not None:
            table[int(name)] = info
    return table


def subtree(table: dict[int, ProcStat], roots: Iterable[int]) -> list[int]:
    """``roots`` (those in ``table``) and all their descendants, each once, parents first.

    >>> t = {p: ProcStat(p, pp, "S", 0, 0) for p, pp in [(1, 0), (2, 1), (3, 2), (4, 1), (5, 9)]}
    >>> subtree(t, [2, 4])
    [2, 3, 4]
    """
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    found: list[int] = []
    seen: set[int] = set()
    todo = [pid for pid in roots if pid in table][::-1]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        todo.extend(sorted(children.get(pid, []), reverse=True))
    return found
