"""A package's ``resources`` and the caps on them: this machine's, and the leaderboard's.

A package declares what its run needs (``resources`` in ``submission.yaml``: :class:`Resources`),
and those numbers size the run: the sandbox's ``/tmp`` and cgroup, its rlimits, its wall clock
and its math-library threads. A declared number is the package author's, so it is never used as
it stands: every run gets :func:`cap_resources` of it under caps (:class:`ResourceCaps`).

See docs/submission.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.core.errors import HarnessError, SubmissionError
from harness.core.gpus import GPUS_ENV, list_gpus

__all__ = [
    "DEFAULT_MAX_TIME_S",
    "SELF_CGROUP",
    "CapNote",
    "CappedResources",
    "ResourceCaps",
    "Resources",
    "cap_resources",
    "cgroup_memory_bytes",
    "current_limits",
    "effective_caps",
    "limited_to",
    "machine_caps",
    "meminfo_total_bytes",
]

#: The longest wall clock a run gets on a machine, unless ``ZSL_MAX_TIME_S`` says otherwise.
DEFAULT_MAX_TIME_S = 24 * 3600
MAX_TIME_ENV = "ZSL_MAX_TIME_S"
MEMINFO = Path("/proc/meminfo")
SELF_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")
_GIB = 1 << 30

ResourceField = Literal["cpus", "memory_gb", "time_s", "gpus"]
#: The fields of ``resources``, in the order notes are given.
RESOURCE_FIELDS: tuple[ResourceField, ...] = ("cpus", "memory_gb", "time_s", "gpus")
_UNITS = {"cpus": "", "memory_gb": " GB", "time_s": " s", "gpus": ""}


class Resources(BaseModel):
    """``resources`` of ``submission.yaml``: what the package's run needs (capped before use).

    Every value is a finite number (``.inf`` and ``.nan`` are refused), ``time_s`` and the
    counts are whole numbers (``1e8`` is one, ``1.5`` is not), and ``true``/``false`` are not
    numbers here.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: int = Field(0, ge=0)
    memory_gb: float = Field(4.0, gt=0, allow_inf_nan=False)
    time_s: int = Field(1800, gt=0)
    cpus: int = Field(1, gt=0)

    @field_validator("gpus", "memory_gb", "time_s", "cpus", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: Any) -> Any:
        # pydantic reads true as 1; YAML's `cpus: yes` is a mistake, not one CPU.
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got a boolean ({str(value).lower()})")
        return value


@dataclass(frozen=True)
class ResourceCaps:
    """The most a run may get of each resource, and where each cap comes from.

    ``sources``: field name -> why that cap ("this machine has 2 CPUs", "the leaderboard's
    ci.yaml `max_resources.cpus`"), shown in each :class:`CapNote`. ``memory_gb`` is ``inf``
    only on a machine that gives no memory figure (nothing to cap with).
    """

    cpus: int
    memory_gb: float
    time_s: int
    gpus: int
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in RESOURCE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or math.isnan(value) or value < 0:
                raise ValueError(f"ResourceCaps.{name}: a number >= 0; got {value!r}")

    def source(self, name: ResourceField) -> str:
        """Where the cap on ``name`` comes from."""
        return self.sources.get(name, f"the cap on {name}")

    def tighter(self, other: ResourceCaps) -> ResourceCaps:
        """Each field's lower cap of ``self`` and ``other``, with its source (``self``'s on a
        tie: the caller puts the cap it wants named first)."""
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name in RESOURCE_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            chosen = self if mine <= theirs else other
            values[name] = getattr(chosen, name)
            sources[name] = chosen.source(name)
        return ResourceCaps(**values, sources=sources)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResourceCaps:
        """The caps from their JSON form (:func:`dataclasses.asdict`: how a task carries them)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"ResourceCaps: unknown field(s) {', '.join(unknown)}")
        return cls(**{**data, "sources": dict(data.get("sources") or {})})


@dataclass(frozen=True)
class CapNote:
    """One declared resource above its cap: ``declared``, the ``cap`` and its ``source``.

    ``refused``: the field is ``gpus``, which is never lowered: a run is refused instead
    (:meth:`CappedResources.check`). ``str()`` is the line ``zsl submission validate`` prints.
    """

    field: ResourceField
    declared: float
    cap: float
    source: str
    refused: bool = False

    def __str__(self) -> str:
        unit = _UNITS[self.field]
        declared, cap = f"{_number(self.declared)}{unit}", f"{_number(self.cap)}{unit}"
        if self.refused:
            return (
                f"resources.{self.field}: {declared} declared, more than the {cap} allowed"
                f" ({self.source}): a GPU count is never lowered, so a run is refused"
            )
        return f"resources.{self.field}: {declared} declared, capped to {cap} ({self.source})"


@dataclass(frozen=True)
class CappedResources:
    """What :func:`cap_resources` made of a package's ``resources``: the ``resources`` a run
    gets (``gpus`` as declared) and one note per field above its cap, in
    :data:`RESOURCE_FIELDS` order."""

    resources: Resources
    notes: tuple[CapNote, ...] = ()

    @property
    def refused(self) -> tuple[CapNote, ...]:
        """The notes of fields a run cannot get (GPUs above their cap)."""
        return tuple(note for note in self.notes if note.refused)

    def check(self, where: str) -> Resources:
        """:attr:`resources`, or a :class:`~harness.core.errors.SubmissionError` ``where: note;
        what to do`` for the first field a run cannot get (``where``: the manifest)."""
        for note in self.refused:
            raise SubmissionError(
                f"{where}: {note}; lower resources.{note.field}, or run it where"
                f" {_number(note.declared)} are allowed"
            )
        return self.resources


def _number(value: float) -> str:
    """``value`` for a message: whole numbers as such, others with at most 2 decimals, huge
    ones in exponent form (a declared ``1e300`` stays one short word)."""
    if abs(value) >= 1e12:
        return f"{value:.3g}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def cap_resources(resources: Resources, caps: ResourceCaps) -> CappedResources:
    """``resources`` with CPUs, memory and time lowered to ``caps``, and a note for each field
    above its cap (GPUs too, which are not lowered: see :class:`CappedResources`)."""
    notes: list[CapNote] = []
    update: dict[str, Any] = {}
    for name in RESOURCE_FIELDS:
        declared, cap = getattr(resources, name), getattr(caps, name)
        if declared <= cap:
            continue
        refused = name == "gpus"
        notes.append(CapNote(name, declared, cap, caps.source(name), refused=refused))
        if not refused:
            update[name] = cap
    return CappedResources(resources.model_copy(update=update), tuple(notes))


# -- this machine -------------------------------------------------------------------------------


def meminfo_total_bytes(meminfo: Path = MEMINFO) -> int | None:
    """``MemTotal`` of ``meminfo`` (``/proc/meminfo``) in bytes; None when it cannot be read."""
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if key == "MemTotal" and parts and parts[0].isdigit():
            unit = parts[1].lower() if len(parts) > 1 else "b"
            return int(parts[0]) * {"kb": 1024, "mb": 1 << 20, "gb": _GIB}.get(unit, 1)
    return None


def _limit(path: Path) -> int | None:
    """The number a cgroup limit file holds (None: ``max``, absent or unreadable)."""
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cgroup_memory_bytes(
    self_cgroup: Path = SELF_CGROUP, cgroup_root: Path = CGROUP_ROOT
) -> int | None:
    """The memory limit of this process's cgroup in bytes, the lowest on the way up to the root
    of each hierarchy (v2 ``memory.max``, v1 ``memory/…/memory.limit_in_bytes``); None when no
    limit is set or none can be read. ``self_cgroup``: ``/proc/self/cgroup``; ``cgroup_root``:
    where the hierarchies are mounted. A cgroup namespace, or a mount of a sub-tree (a
    container's), shows a path that is not under the mount: the mount's own folder is read."""
    try:
        lines = self_cgroup.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found: list[int] = []
    for line in lines:
        hier_id, _, rest = line.partition(":")
        controllers, _, own = rest.partition(":")
        if hier_id == "0" and controllers == "":
            base, name = cgroup_root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = cgroup_root / "memory", "memory.limit_in_bytes"
        else:
            continue
        folder = base / own.strip().lstrip("/")
        if not folder.is_dir() or ".." in Path(own).parts:
            folder = base
        while True:
            limit = _limit(folder / name)
            if limit is not None:
                found.append(limit)
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    return min(found) if found else None


def _time_cap(env: Mapping[str, str]) -> tuple[int, str]:
    value = env.get(MAX_TIME_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_TIME_S, f"the harness's cap on a run's time; {MAX_TIME_ENV} sets another"
    if not value.isdigit() or int(value) <= 0:
        raise HarnessError(
            f"{MAX_TIME_ENV}={value[:40]!r}: the longest wall clock of a run, a whole number of"
            " seconds > 0 (e.g. 86400); set it so or unset it"
        )
    return int(value), f"{MAX_TIME_ENV}={value}"


def _plural(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def machine_caps(
    *,
    meminfo: Path = MEMINFO,
    self_cgroup: Path = SELF_CGROUP,
    cgroup_root: Path = CGROUP_ROOT,
    env: Mapping[str, str] | None = None,
) -> ResourceCaps:
    """What a run can get on this machine (see docs/submission.md).

    ``meminfo``, ``self_cgroup``, ``cgroup_root``: where the memory is read (tests point them
    at fake files); ``env``: the environment holding ``ZSL_MAX_TIME_S`` and what restricts the
    GPUs (``ZSL_GPUS``, ``CUDA_VISIBLE_DEVICES``, ``ZSL_DEV_DIR``; default: ours).

    Raises
    ------
    HarnessError
        ``ZSL_MAX_TIME_S`` is not a whole number of seconds > 0, or ``ZSL_GPUS`` names a GPU
        the machine does not have (:func:`harness.core.gpus.list_gpus`).
    """
    env = os.environ if env is None else env
    sources: dict[str, str] = {}
    affinity = getattr(os, "sched_getaffinity", None)
    total = os.cpu_count() or 1
    cpus = len(affinity(0)) if affinity is not None else total
    sources["cpus"] = f"this machine has {_plural(cpus, 'CPU')}" + (
        f" for this process (of {total})" if cpus < total else ""
    )
    machine = meminfo_total_bytes(meminfo) or _physical_bytes()
    group = cgroup_memory_bytes(self_cgroup, cgroup_root)
    memory_gb = math.inf  # no figure at all (no /proc, no sysconf): nothing to cap with
    sources["memory_gb"] = "no memory figure on this machine"
    if group is not None and (machine is None or group < machine):
        memory_gb, sources["memory_gb"] = _gb(group), "this process's cgroup memory limit"
    elif machine is not None:
        memory_gb, sources["memory_gb"] = _gb(machine), "this machine's memory"
    time_s, sources["time_s"] = _time_cap(env)
    gpus = len(list_gpus(env=env))
    restricted = next(
        (f" ({k}={env[k]!r})" for k in (GPUS_ENV, "CUDA_VISIBLE_DEVICES") if k in env), ""
    )
    sources["gpus"] = f"this machine has {_plural(gpus, 'GPU')}{restricted}"
    return ResourceCaps(cpus, memory_gb, time_s, gpus, sources)


def _physical_bytes() -> int | None:
    """The machine's memory from ``sysconf`` (where there is no ``/proc/meminfo``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def _gb(memory_bytes: int) -> float:
    """``memory_bytes`` in GB (GiB, as ``memory_gb`` counts), floored to a tenth: the cap is
    a number the machine has, and reads as one (a limit under 0.1 GB is kept exact)."""
    return math.floor(memory_bytes / _GIB * 10) / 10 or memory_bytes / _GIB


# -- the caps of a block of runs ----------------------------------------------------------------

_LIMITS: ContextVar[ResourceCaps | None] = ContextVar("zsl_resource_limits", default=None)


@contextmanager
def limited_to(caps: ResourceCaps | None) -> Iterator[None]:
    """Hold every run started in the block to ``caps`` too (None: no caps beyond the
    machine's); blocks nest, each adding its caps to the outer ones'."""
    outer = _LIMITS.get()
    joined = caps if outer is None else (outer if caps is None else caps.tighter(outer))
    token = _LIMITS.set(joined)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def current_limits() -> ResourceCaps | None:
    """The caps of the enclosing :func:`limited_to` blocks; None outside any."""
    return _LIMITS.get()


def effective_caps(caps: ResourceCaps | None = None) -> ResourceCaps:
    """What a run started here is held to: ``caps`` (default :func:`current_limits`) tightened
    by :func:`machine_caps`; on a tie, the cap is named as ``caps``'s source (CI's)."""
    machine = machine_caps()
    caps = current_limits() if caps is None else caps
    return machine if caps is None else caps.tighter(machine)
