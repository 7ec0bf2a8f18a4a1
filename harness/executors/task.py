"""One run of a matrix, as a worker executes it: JSON in, JSON out, nothing stored.

The driver (:mod:`harness.executors`) hands a worker — a process of the local pool or a Ray task
on any node — a :class:`TaskSpec` as JSON, and, for Ray, the frozen benchmark's files. The
worker:

1. checks that the spec it loads has the spec hash the driver saw;
2. makes sure the frozen benchmark its node will load is the one the driver prepared: a copy
   already under the node's ``ZSL_HOME`` must have the expected benchmark hash; else the shipped
   files are unpacked beside it, verified (every artifact re-hashed, the manifest hash compared
   with the expected one) and moved into place; a mismatch is refused, never rebuilt;
3. runs :func:`harness.pipeline.run_submission` with ``store=False``, archiving the prediction
   files (into the shared archive for the local pool, into a temporary folder whose files go
   back with the record for Ray);
4. checks the record against the driver's hashes (package, benchmark, spec) and returns the
   record as its JSON export (:func:`harness.results.records_io.dump_record`).

Every failure comes back as JSON too, classified: ``transient`` (an ``OSError``, say the runner
could not start: worth another try) or not (a :class:`~harness.errors.HarnessError` — the
model failed, the package was refused, the data did not match — or a bug). No exception object
and no pickle of anything a submission made crosses back.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import tempfile
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from harness.data.artifacts import MANIFEST, FrozenBenchmark, benchmark_dir
from harness.errors import HarnessError, IntegrityError
from harness.hashing import file_sha256
from harness.records import RunRecord

__all__ = [
    "TaskSpec",
    "benchmark_files",
    "ensure_benchmark",
    "execute",
    "execute_json",
    "node_name",
]

#: Where the worker archives prediction files: the archive itself (same machine as the driver)
#: or a temporary folder whose files are returned with the record (another machine).
ARCHIVE_SHARED = "shared"
ARCHIVE_RETURN = "return"


@dataclass(frozen=True)
class TaskSpec:
    """What a worker needs to run one package on one spec, and the hashes it must reproduce."""

    package: str
    spec: str
    runner: str | None
    package_hash: str
    benchmark_hash: str
    spec_hash: str
    archive: str = ARCHIVE_SHARED

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TaskSpec:
        return cls(**json.loads(text))


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


# -- the run ------------------------------------------------------------------------------------


def execute(task: TaskSpec, files: dict[str, bytes] | None = None) -> dict[str, Any]:
    """Run ``task`` here; the outcome as a JSON-ready dict (see the module docstring)."""
    try:
        return {"ok": True, **_execute(task, files)}
    except HarnessError as err:
        return _failure(str(err), transient=False, exit_code=err.exit_code)
    except OSError as err:
        return _failure(f"{type(err).__name__}: {err}", transient=True, exit_code=1)
    except Exception as err:  # a bug: keep where it happened
        tail = traceback.format_exc().strip().splitlines()[-6:]
        return _failure(
            f"{type(err).__name__}: {err} ({' | '.join(tail)})", transient=False, exit_code=1
        )


def execute_json(task_json: str, files: dict[str, bytes] | None = None) -> str:
    """:func:`execute` with the task and its outcome as JSON text (the pool's and Ray's form)."""
    return json.dumps(execute(TaskSpec.from_json(task_json), files), sort_keys=True)


def _failure(message: str, *, transient: bool, exit_code: int) -> dict[str, Any]:
    return {
        "ok": False,
        "error": f"[{node_name()}] {message}",
        "transient": transient,
        "exit_code": exit_code,
    }


def _execute(task: TaskSpec, files: dict[str, bytes] | None) -> dict[str, Any]:
    from harness.pipeline import run_submission
    from harness.results.prediction_archive import archived_path, predictions_dir
    from harness.results.records_io import dump_record
    from harness.spec import load_spec

    spec = load_spec(task.spec)
    if spec.spec_hash() != task.spec_hash:
        raise IntegrityError(
            f"node {node_name()}: {task.spec} has spec hash {spec.spec_hash()}, the driver's has"
            f" {task.spec_hash}; every node must see the same spec files"
        )
    ensure_benchmark(spec.benchmark, spec.version, task.benchmark_hash, files)
    with tempfile.TemporaryDirectory(prefix="zsl-task-") as tmp:
        root = predictions_dir() if task.archive == ARCHIVE_SHARED else Path(tmp) / "archive"
        record = run_submission(
            task.package, task.spec, runner=task.runner, store=False, quiet=True, archive_to=root
        )
        check_record(record, task, where=f"node {node_name()}")
        result: dict[str, Any] = {"record": dump_record(record), "node": node_name()}
        if task.archive == ARCHIVE_RETURN:
            result["predictions"] = [
                _shipped_file(
                    archived_path(
                        content, benchmark_hash=record.benchmark.hash, setting=setting, root=root
                    ),
                    setting,
                )
                for setting, content in sorted(record.predictions_hashes.items())
            ]
    return result


def _shipped_file(path: Path, setting: str) -> dict[str, str]:
    return {
        "setting": setting,
        "suffix": path.suffix,
        "sha256": file_sha256(path),
        "data": base64.b64encode(path.read_bytes()).decode("ascii"),
    }


def check_record(record: RunRecord, task: TaskSpec, *, where: str) -> None:
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
