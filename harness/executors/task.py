"""A task, as a worker executes it: JSON in, JSON out, nothing stored.

The driver (:mod:`harness.executors`) hands a worker — a process of the local pool, this very
process (``inline``), or a Ray task on any node — a task of a kind (:data:`TASKS`) as JSON and,
when the worker's node does not share the driver's disk (Ray), a :class:`Shipment`: the frozen
benchmark's files and the task's input files.

See docs/executors.md.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import socket
import tempfile
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness.core.errors import HarnessError, IntegrityError, error_text
from harness.core.hashing import file_sha256
from harness.core.tempdirs import run_directory
from harness.data.artifacts import MANIFEST, FrozenBenchmark, benchmark_dir
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.pipeline import run_planned
from harness.plan import Steps, plan_benchmark, plan_package, plan_run
from harness.records import RunRecord
from harness.rescore import rescore_record
from harness.results.prediction_archive import archive_file, archived_path, predictions_dir
from harness.results.records_io import dump_record, load_record
from harness.spec import Spec, load_spec
from harness.submission.resources import ResourceCaps, limited_to

__all__ = [
    "TASKS",
    "FamilyTask",
    "RescoreTask",
    "RunTask",
    "Shipment",
    "benchmark_files",
    "check_record",
    "ensure_benchmark",
    "execute",
    "execute_json",
    "node_name",
]

#: ``OSError`` numbers that say the machine lacked something for a moment (processes, memory,
#: a busy device, a dropped connection): the run is tried again. Any other ``OSError`` (a
#: missing file, a link loop a package made) fails the same way every time.
TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.ENOMEM,
        errno.EBUSY,
        errno.EINTR,
        errno.ENFILE,
        errno.EMFILE,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.EPIPE,
    }
)


@dataclass(frozen=True)
class RunTask:
    """What a worker needs to run one package on one spec, and the hashes it must reproduce.

    ``caps``: the most resources the run gets beyond the worker machine's own caps (CI's,
    :class:`~harness.submission.resources.ResourceCaps`; as JSON, its fields).
    """

    package: str
    spec: str
    runner: str | None
    package_hash: str
    benchmark_hash: str
    spec_hash: str
    caps: ResourceCaps | None = None

    def __post_init__(self) -> None:
        if isinstance(self.caps, Mapping):  # read back from JSON
            object.__setattr__(self, "caps", ResourceCaps.from_json(self.caps))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class FamilyTask:
    """The runs of one package on members of one benchmark family, one after another on one
    worker: one job for the executor, a record (or a failure) per member.

    ``runs``: each member's :class:`RunTask`; ``retries``: how many more times a member whose
    failure is transient is tried again, in place (the driver's ``max_retries``).
    """

    family: str
    runs: tuple[RunTask, ...]
    retries: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> FamilyTask:
        runs = tuple(RunTask(**run) for run in fields["runs"])
        return cls(family=str(fields["family"]), runs=runs, retries=int(fields["retries"]))


@dataclass(frozen=True)
class RescoreTask:
    """One stored record to score again from its archived prediction files.

    ``record``: its JSON export; ``spec``: the path of its spec (hash checked against the
    record's); ``benchmark_hash``: the frozen benchmark the driver verified; ``predictions``:
    the archived file of each setting on the driver's disk (shipped, by setting, to a node
    without it); ``archive_root``: the driver's archive, for a worker sharing its disk.
    """

    record: str
    spec: str
    benchmark_hash: str
    reasons: list[str]
    predictions: dict[str, str]
    archive_root: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass
class Shipment:
    """What a node that does not share the driver's disk gets with a task.

    ``benchmark``: the frozen benchmark's files (relative posix path → bytes; None: the node
    holds it, a shared ``ZSL_HOME``); ``attachments``: the task's input files by name;
    ``member_benchmarks``: a ``family`` task's, one per member run in order (each as
    ``benchmark``).
    """

    benchmark: dict[str, bytes] | None = None
    attachments: dict[str, bytes] = field(default_factory=dict)
    member_benchmarks: list[dict[str, bytes] | None] = field(default_factory=list)

    def member(self, index: int) -> Shipment:
        """What the ``index``-th member run of a family task gets."""
        benchmarks = self.member_benchmarks
        return Shipment(benchmarks[index] if index < len(benchmarks) else None)


def node_name() -> str:
    return socket.gethostname()


# -- frozen benchmarks by content hash ----------------------------------------------------------


def benchmark_files(root: Path) -> dict[str, bytes]:
    """Every regular file of the frozen benchmark at ``root``: relative posix path → bytes.

    The driver ships this to nodes that may not have the benchmark; :func:`ensure_benchmark`
    verifies it there.
    """
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise IntegrityError(f"{path}: a link inside a frozen benchmark; refusing to ship it")
        if path.is_file():
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    if MANIFEST not in files:
        raise IntegrityError(f"{root}: no {MANIFEST}; not a frozen benchmark")
    return files


def ensure_benchmark(
    benchmark: str,
    version: int,
    expected_hash: str,
    files: dict[str, bytes] | None,
) -> Path:
    """Make sure this node's frozen ``benchmark`` v``version`` has ``expected_hash``.

    A copy already under ``ZSL_HOME`` is used when its manifest has the expected hash (the
    pipeline's load then re-hashes every artifact). Otherwise ``files`` (from
    :func:`benchmark_files`; None: the node must have it, a shared ``ZSL_HOME``) are written to
    a temporary sibling, verified artifact by artifact, their hash compared with the expected
    one, and moved into place.

    Raises
    ------
    IntegrityError
        The node holds, or was shipped, a benchmark with another hash.
    HarnessError
        The node has no copy and none was shipped.
    """
    root = benchmark_dir(benchmark, version)
    where = f"node {node_name()}: {benchmark} v{version} at {root}"
    if not (root / MANIFEST).exists():
        if files is None:
            raise HarnessError(
                f"{where}: no frozen benchmark; the driver prepared it with hash {expected_hash}."
                " Share ZSL_HOME with the driver, or let the executor ship benchmarks"
            )
        _unpack(root, files, expected_hash, where)
    held = FrozenBenchmark(root).hash
    if held != expected_hash:
        raise IntegrityError(
            f"{where}: the frozen benchmark has hash {held}, but the driver prepared"
            f" {expected_hash}; the nodes disagree on the data (delete {root} on this node, or"
            " bump the spec's version if the data changed)"
        )
    return root


def _unpack(root: Path, files: dict[str, bytes], expected_hash: str, where: str) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".incoming", dir=root.parent))
    try:
        for rel, data in files.items():
            parts = PurePosixPath(rel).parts
            if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
                raise IntegrityError(f"{where}: shipped file name {rel!r} is not a plain path")
            target = tmp.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        shipped = FrozenBenchmark(tmp)
        shipped.verify()
        if shipped.hash != expected_hash:
            raise IntegrityError(
                f"{where}: the shipped benchmark hashes to {shipped.hash}, not to the expected"
                f" {expected_hash}; refusing it"
            )
        try:
            os.rename(tmp, root)
        except OSError:
            if not (root / MANIFEST).exists():  # not a concurrent task of this node winning
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- executing a task ---------------------------------------------------------------------------


def execute(kind: str, task_json: str, shipment: Shipment | None = None) -> dict[str, Any]:
    """Run the task of ``kind`` here; the outcome as a JSON-ready dict (see
    docs/executors.md). ``shipment`` None: this node shares the driver's disk."""
    try:
        body = TASKS[kind]
    except KeyError:
        return _failure(f"unknown task kind {kind!r}", transient=False, exit_code=1)
    try:
        fields = json.loads(task_json)
    except ValueError as err:
        return _failure(f"task is not JSON: {err}", transient=False, exit_code=1)
    return _outcome(body, fields, shipment)


def execute_json(kind: str, task_json: str, shipment: Shipment | None = None) -> str:
    """:func:`execute` with its outcome as JSON text (the pool's and Ray's form)."""
    return json.dumps(execute(kind, task_json, shipment), sort_keys=True)


def _outcome(
    body: Callable[[dict[str, Any], Shipment | None], dict[str, Any]],
    fields: dict[str, Any],
    shipment: Shipment | None,
) -> dict[str, Any]:
    """``body``'s result, or its failure classified (see docs/executors.md)."""
    try:
        return {"ok": True, "node": node_name(), **body(fields, shipment)}
    except HarnessError as err:
        return _failure(error_text(err), transient=False, exit_code=err.exit_code)
    except OSError as err:
        return _failure(error_text(err), transient=err.errno in TRANSIENT_ERRNOS, exit_code=1)
    except Exception as err:  # a bug, or something a submission provoked: keep where
        trace = " | ".join(traceback.format_exc().strip().splitlines()[-6:])
        return _failure(error_text(err), transient=False, exit_code=1, trace=trace)


def _failure(message: str, *, transient: bool, exit_code: int, trace: str = "") -> dict[str, Any]:
    failure: dict[str, Any] = {
        "ok": False,
        "error": message,
        "node": node_name(),
        "transient": transient,
        "exit_code": exit_code,
    }
    if trace:
        failure["trace"] = trace
    return failure


def _run(fields: dict[str, Any], shipment: Shipment | None) -> dict[str, Any]:
    """Plan the run again from the task's paths, refusing a spec, benchmark or package whose
    hash is not the driver's, and run it (:func:`harness.pipeline.run_planned`)."""
    task = RunTask(**fields)
    where = f"node {node_name()}"
    steps = Steps(quiet=True)
    with steps("prepare", "prepare"):
        spec = load_spec(task.spec)
        if spec.spec_hash() != task.spec_hash:
            raise IntegrityError(
                f"{where}: {task.spec} has spec hash {spec.spec_hash()}, the driver's has"
                f" {task.spec_hash}; every node must see the same spec files"
            )
        ensure_benchmark(
            spec.benchmark,
            spec.version,
            task.benchmark_hash,
            shipment.benchmark if shipment is not None else None,
        )
        benchmark = plan_benchmark(spec, task.spec)
    with run_directory("zsl-task-") as tmp:
        # Sharing the driver's disk, the files go straight into its archive; else they go
        # back with the record.
        root = predictions_dir() if shipment is None else Path(tmp) / "archive"
        with limited_to(task.caps):  # the driver's caps (CI's), beyond this machine's own
            with steps("validate", "validate"):
                package = plan_package(task.package, tmp, runner=task.runner)
            if package.hash != task.package_hash:  # what runs is what the driver planned
                raise IntegrityError(
                    f"{where}: {task.package} has package hash {package.hash}, the driver planned"
                    f" {task.package_hash}; every node must see the same package files"
                )
            plan = plan_run(benchmark, package, runner=task.runner, timings=steps.timings)
            record = run_planned(plan, store=False, quiet=True, archive_to=root, steps=steps)
        check_record(record, task, where=where)
        result: dict[str, Any] = {"record": dump_record(record)}
        if shipment is not None:
            result["predictions"] = [
                _returned_file(
                    archived_path(
                        content, benchmark_hash=record.benchmark.hash, setting=setting, root=root
                    ),
                    setting,
                )
                for setting, content in sorted(record.predictions_hashes.items())
            ]
    return result


def _run_family(fields: dict[str, Any], shipment: Shipment | None) -> dict[str, Any]:
    """Each member run in turn, each with its own outcome: a member that fails (after its
    retries, when the failure is transient) does not stop or fail the ones after it.

    What the members share is this worker: one process (imports, registries) on one node, and
    its page cache (the members of a family hold the same images, so a later member's features
    are read from memory, not disk); each member still loads and verifies its own frozen
    benchmark, opens and hashes the package, and runs its model in a runner of its own.
    """
    task = FamilyTask.from_fields(fields)
    outcomes = []
    for index, run in enumerate(task.runs):
        member = None if shipment is None else shipment.member(index)
        for _ in range(task.retries + 1):
            outcome = _outcome(_run, asdict(run), member)
            if outcome["ok"] or not outcome["transient"]:
                break
        outcomes.append(outcome)
    return {"runs": outcomes}


def _returned_file(path: Path, setting: str) -> dict[str, str]:
    return {
        "setting": setting,
        "suffix": path.suffix,
        "sha256": file_sha256(path),
        "data": base64.b64encode(path.read_bytes()).decode("ascii"),
    }


def _rescore(fields: dict[str, Any], shipment: Shipment | None) -> dict[str, Any]:
    task = RescoreTask(**fields)
    record = load_record(task.record, "the record to re-score")
    spec = load_spec(task.spec)
    ensure_benchmark(
        spec.benchmark,
        spec.version,
        task.benchmark_hash,
        shipment.benchmark if shipment is not None else None,
    )
    bench = _loaded_benchmark(spec, task.benchmark_hash)
    with run_directory("zsl-rescore-") as tmp:
        root = Path(task.archive_root)
        if shipment is not None:  # the driver's archive is not here: rebuild its files
            root = Path(tmp) / "archive"
            for setting in task.predictions:
                if setting not in shipment.attachments:
                    raise HarnessError(f"the {setting!r} prediction file was not shipped")
                path = Path(tmp) / f"{setting}{Path(task.predictions[setting]).suffix}"
                path.write_bytes(shipment.attachments[setting])
                archive_file(
                    path,
                    content_hash=record.predictions_hashes.get(setting, ""),
                    benchmark_hash=record.benchmark.hash,
                    setting=setting,
                    root=root,
                )
        rescored = rescore_record(record, spec, bench, reasons=task.reasons, archive_root=root)
    return {"record": dump_record(rescored)}


#: The task kinds a worker executes, by name: the task's fields (parsed JSON) and the shipment
#: in, the result's fields out.
TASKS: dict[str, Callable[[dict[str, Any], Shipment | None], dict[str, Any]]] = {
    "run": _run,
    "family": _run_family,
    "rescore": _rescore,
}

#: The last benchmark a rescore task of this process loaded: a pool worker re-scores many runs
#: of one benchmark in a row, and loading (and re-hashing) it each time would dominate.
_LOADED: dict[tuple[str, int, str], PreparedBenchmark] = {}


def _loaded_benchmark(spec: Spec, benchmark_hash: str) -> PreparedBenchmark:
    key = (spec.benchmark, spec.version, benchmark_hash)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load_benchmark(spec)
    return _LOADED[key]


def check_record(record: RunRecord, task: RunTask, *, where: str) -> None:
    """Refuse a record made from other files than the driver planned (package, data, spec)."""
    for what, got, want in (
        ("package hash", record.submission.package_hash, task.package_hash),
        ("benchmark hash", record.benchmark.hash, task.benchmark_hash),
        ("spec hash", record.benchmark.spec_hash, task.spec_hash),
    ):
        if got != want:
            raise IntegrityError(
                f"{where}: the run of {task.package} on {task.spec} has {what} {got}, the"
                f" driver planned {want}; every node must see the same files (a shared checkout)"
            )
