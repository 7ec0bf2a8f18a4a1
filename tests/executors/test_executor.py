"""The executors (harness/executors): local process pool, inline, and Ray.

Fast tests cover the frozen-benchmark shipping and its verification, how a worker reports a
failure (transient or not, one line, the trace apart), the retry policy and the missing-extra
error. The end-to-end ones (marked slow) run real matrices: the local pool and a real two-node
local Ray cluster give identical records on 4 packages × 2 specs; a node killed while it runs a
model has its run retried on the other node; an interrupted `zsl run` resumes; stale runs are
re-scored alike inline, on the pool and on Ray (whose node gets the benchmark and the
prediction files shipped).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.audit import AuditStatus, LeakageAudit
from harness.cli.main import app
from harness.core.errors import HarnessError, IntegrityError, RunnerError, error_text
from harness.data.artifacts import FrozenBenchmark, benchmark_dir, write_frozen
from harness.data.sources import RawSource, source_manifest
from harness.executors import Job, Outcome
from harness.executors import task as task_module
from harness.executors.matrix import MatrixReport, RunRequest, run_matrix
from harness.executors.task import benchmark_files, ensure_benchmark, execute
from harness.records import RunRecord
from harness.store import load_runs, open_store
from tests.conftest import REPO, SPECS, SUBMISSIONS, needs_bwrap

QUICK = ("eszsl", "sae", "dap", "nearest-seen-class-transfer")


# -- frozen benchmarks by content hash ----------------------------------------------------------


def _tiny(root: Path, value: int = 1) -> FrozenBenchmark:
    return write_frozen(
        root,
        {"a": np.arange(4) * value, "b/c": np.ones((2, 2))},
        benchmark="tiny",
        version=1,
        spec_data_hash="sha256:x",
        audit=LeakageAudit(source="none", status=AuditStatus.NOT_APPLICABLE),
        raw_inputs=source_manifest(RawSource("generated", "a test's arrays")),
    )


def test_shipped_benchmark_is_verified_and_placed(tmp_path: Path) -> None:
    made = _tiny(tmp_path / "driver")
    root = ensure_benchmark("tiny", 1, made.hash, benchmark_files(made.root))
    assert root == benchmark_dir("tiny", 1)
    assert FrozenBenchmark(root).verify() == ["a", "b/c"]
    # a second task on the node uses the copy it has (nothing shipped)
    assert ensure_benchmark("tiny", 1, made.hash, None) == root


def test_tampered_shipment_is_refused_and_nothing_placed(tmp_path: Path) -> None:
    made = _tiny(tmp_path / "driver")
    files = benchmark_files(made.root)
    other = benchmark_files(_tiny(tmp_path / "other", value=2).root)
    files["a.npy"] = other["a.npy"]  # a different artifact under the same manifest
    with pytest.raises(IntegrityError, match="does not match the manifest"):
        ensure_benchmark("tiny", 1, made.hash, files)
    assert not benchmark_dir("tiny", 1).exists()
    with pytest.raises(IntegrityError, match="not a plain path"):
        ensure_benchmark("tiny", 1, made.hash, {"../x": b"", **benchmark_files(made.root)})


def test_node_with_other_data_or_none_is_refused(tmp_path: Path) -> None:
    made = _tiny(tmp_path / "driver")
    with pytest.raises(HarnessError, match=r"no frozen benchmark.*Share ZSL_HOME"):
        ensure_benchmark("tiny", 1, made.hash, None)
    _tiny(benchmark_dir("tiny", 1), value=3)  # this node froze other data
    with pytest.raises(IntegrityError, match=r"has hash sha256:\w+, but the driver prepared"):
        ensure_benchmark("tiny", 1, made.hash, benchmark_files(made.root))


def test_ray_executor_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(SUBMISSIONS / "eszsl"),
            "--spec",
            str(SPECS / "demo.yaml"),
            "--executor",
            "ray",
        ],
    )
    assert result.exit_code == 1
    assert "pip install 'zsl-harness[ray]'" in result.output


# -- how a worker reports a failure ---------------------------------------------------------------


class _BrokenMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("a hostile __str__")


def test_error_text_names_unmeant_exceptions_and_survives_a_broken_message() -> None:
    assert error_text(RunnerError("model exited 3")) == "model exited 3"
    assert error_text(KeyError("scores")) == "KeyError: 'scores'"
    assert error_text(ValueError()) == "ValueError"
    assert error_text(_BrokenMessage()) == "_BrokenMessage"
    assert error_text(IntegrityError("")) == "IntegrityError"


#: (what the task raises, transient?, exit code, the error it reports, a trace comes back?)
FAILURES = [
    (RunnerError("model exited 3"), False, 1, "model exited 3", False),
    (IntegrityError("hash differs"), False, 2, "hash differs", False),
    (OSError(errno.EAGAIN, "Resource temporarily unavailable"), True, 1, None, False),
    (OSError(errno.ENOMEM, "Cannot allocate memory"), True, 1, None, False),
    (
        OSError(errno.ELOOP, "Too many levels of symbolic links", "/proc/self/environ"),
        False,
        1,
        None,
        False,
    ),
    (FileNotFoundError(errno.ENOENT, "No such file", "/x"), False, 1, None, False),
    (KeyError("scores"), False, 1, "KeyError: 'scores'", True),
    (_BrokenMessage(), False, 1, "_BrokenMessage", True),
]


@pytest.mark.parametrize(
    ("error", "transient", "code", "message", "traced"),
    FAILURES,
    ids=[f"{type(f[0]).__name__}-{getattr(f[0], 'errno', '')}" for f in FAILURES],
)
def test_a_worker_reports_each_failure_classified_on_one_line(
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    transient: bool,
    code: int,
    message: str | None,
    traced: bool,
) -> None:
    def task(fields: dict[str, Any], shipment: Any) -> dict[str, Any]:
        raise error

    monkeypatch.setitem(task_module.TASKS, "boom", task)
    outcome = execute("boom", "{}")
    json.dumps(outcome)  # it crosses as JSON
    assert outcome["ok"] is False and outcome["transient"] is transient
    assert outcome["exit_code"] == code
    assert outcome["error"] == (message or f"{type(error).__name__}: {error}")
    assert "\n" not in outcome["error"] and outcome["node"]
    assert ("trace" in outcome) is traced
    if traced:
        assert "in task" in outcome["trace"]  # where it happened, apart from the message


def test_an_unknown_task_kind_is_refused() -> None:
    outcome = execute("format-disk", "{}")
    assert outcome["ok"] is False and "unknown task kind 'format-disk'" in outcome["error"]


def test_a_worker_refuses_a_package_the_driver_did_not_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker plans again from the task's paths; a package whose snapshot hashes to other
    than the driver's hash is refused before any of it runs."""
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec

    spec = load_spec(SPECS / "demo.yaml")
    bench = load_benchmark(spec)
    package = tmp_path / "eszsl"
    shutil.copytree(SUBMISSIONS / "eszsl", package)
    task = task_module.RunTask(
        package=str(package),
        spec=str(SPECS / "demo.yaml"),
        runner="local",
        package_hash="sha256:" + "0" * 64,
        benchmark_hash=bench.hash,
        spec_hash=spec.spec_hash(),
    )

    def ran(*args: object, **kwargs: object) -> None:
        raise AssertionError("the package ran")

    monkeypatch.setattr(task_module, "run_planned", ran)
    outcome = execute("run", task.to_json())
    assert outcome["ok"] is False and outcome["exit_code"] == 2
    assert f"{package} has package hash sha256:" in outcome["error"]
    assert "the driver planned sha256:000" in outcome["error"]


# -- the local pool admits runs by the CPUs they ask for -----------------------------------------


@pytest.mark.slow  # up to 7 s in `make test-fast` on a busy 2-core machine (issue 28)
def test_the_local_pool_admits_runs_while_their_cpus_fit() -> None:
    from harness.executors.local import LocalPool
    from harness.submission.package import Resources

    def job(cpus: int) -> Job:
        return Job("no-such-kind", "{}", f"{cpus} cpus", Resources(cpus=cpus))

    pool = LocalPool(jobs=3, cpus=4)
    try:
        assert pool.has_room(job(8))  # alone, even more than the machine has
        pool.submit(0, job(2))
        assert pool.has_room(job(2)) and not pool.has_room(job(3))
        pool.submit(1, job(2))
        assert not pool.has_room(job(1))  # 4 of 4 CPUs asked for
        finished = []
        while len(finished) < 2:
            finished += pool.wait()
        assert sorted(t for t, _ in finished) == [0, 1]
        assert all("unknown task kind" in o.error for _, o in finished)
        assert pool.has_room(job(4))
    finally:
        pool.close()
    many = LocalPool(jobs=4, cpus=2)  # --jobs above the CPU count: N one-CPU runs at once
    try:
        for ticket in range(3):
            assert many.has_room(job(1))
            many.submit(ticket, job(1))
        assert many.has_room(job(1)) and not many.has_room(job(2))
    finally:
        many.close()


# -- the retry policy, with a backend that fails on purpose ---------------------------------------


class FailingBackend:
    """Every task fails as told: a system error (worker died) or a harness error."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.submitted: list[int] = []
        self._queue: list[int] = []

    def has_room(self, job: Job) -> bool:
        return len(self._queue) < 2

    def infeasible(self, job: Job) -> str | None:
        return None

    def submit(self, ticket: int, job: Job) -> None:
        self.submitted.append(ticket)
        self._queue.append(ticket)

    def wait(self) -> list[tuple[int, Outcome]]:
        done, self._queue = self._queue, []
        return [(t, self.outcome) for t in done]

    def close(self) -> None:
        pass


@pytest.mark.slow  # prepares the demo benchmark
def test_transient_failures_are_retried_model_errors_are_not(db: str) -> None:
    requests = [RunRequest(SUBMISSIONS / "eszsl", SPECS / "demo.yaml", "local")]
    died = FailingBackend(Outcome(system_error="WorkerCrashedError: the worker died"))
    report = run_matrix(requests, database_url=db, max_retries=2, backend=died, progress=False)
    assert died.submitted == [0, 0, 0]
    assert report.results[0].status == "failed" and report.results[0].attempts == 3
    assert "gave up after 3 attempts" in str(report.results[0].error)

    error = {"ok": False, "transient": False, "error": "model failed", "exit_code": 1}
    model = FailingBackend(Outcome(result=error))
    report = run_matrix(requests, database_url=db, max_retries=2, backend=model, progress=False)
    assert model.submitted == [0] and report.results[0].error == "model failed"
    assert report.exit_code == 1


# -- end to end ---------------------------------------------------------------------------------


def _second_spec(folder: Path) -> Path:
    """A second small benchmark: the demo's generator with another seed, fewer bootstraps."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SPECS / "demo", folder / "demo", dirs_exist_ok=True)
    text = (SPECS / "demo.yaml").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("checksum:")]
    text = "\n".join(lines) + "\n"
    for old, new in (("benchmark: demo", "benchmark: demo-b"), ("seed: 0", "seed: 1")):
        text = text.replace(old, new, 1)
    text = text.replace("n_boot: 1000", "n_boot: 100")
    path = folder / "demo-b.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def matrix_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[Path]]:
    """4 quick packages (3 model code, 1 prediction files) × demo and demo-b specs."""
    from harness.data.prepare import load_benchmark
    from harness.pipeline import generate_prediction_files
    from harness.spec import load_spec
    from harness.submission.package import load_package

    root = tmp_path_factory.mktemp("matrix")
    second = _second_spec(root / "specs")
    packages = []
    for name in QUICK:
        shutil.copytree(
            SUBMISSIONS / name,
            root / "submissions" / name,
            ignore=shutil.ignore_patterns("__pycache__", "predictions"),
        )
        packages.append(root / "submissions" / name)
    with pytest.MonkeyPatch.context() as patch:  # (module scope: before isolated_home)
        patch.setenv("ZSL_HOME", str(root / "generate-home"))
        # The prediction-file package's files are generated, for both specs: a clean clone
        # has none (they are not tracked).
        for spec in (SPECS / "demo.yaml", second):
            bench = load_benchmark(load_spec(spec))
            generate_prediction_files(load_package(packages[-1]), bench, runner="local")
    return packages, [SPECS / "demo.yaml", second]


def _requests(inputs: tuple[list[Path], list[Path]], runner: str) -> list[RunRequest]:
    packages, specs = inputs
    return [RunRequest(p, s, runner) for s in specs for p in packages]


def _comparable(record: RunRecord) -> dict[str, Any]:
    """What two executors must agree on: everything but timings, dates, logs, environment."""
    data = record.model_dump(mode="json")
    for key in ("timings", "created_at", "environment", "logs"):
        data.pop(key)
    return data


def _stored(db: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.benchmark.id, r.submission.name): _comparable(r) for r in load_runs(open_store(db))}


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            cmdline = (Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        found.append((child, cmdline.decode(errors="replace")))
        todo.extend(children.get(child, []))
    return found


@pytest.fixture
def ray_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A real local Ray cluster: a head and one worker node, 2 CPUs each (what the closed-form
    packages ask for), 100 MB object stores.

    Its nodes get their own ZSL_HOME (empty): the driver's benchmarks reach them through the
    object store and are verified there. Shut down afterwards, with no raylet left.
    """
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_DISABLE_USAGE_STATS", "1")
    driver_home = os.environ["ZSL_HOME"]
    monkeypatch.setenv("ZSL_HOME", str(tmp_path / "node-home"))  # what the nodes inherit
    store = 100 * 1024 * 1024
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "object_store_memory": store, "include_dashboard": False},
    )
    worker = cluster.add_node(num_cpus=2, object_store_memory=store)
    raylets = [n.all_processes["raylet"][0].process.pid for n in (cluster.head_node, worker)]
    monkeypatch.setenv("ZSL_HOME", driver_home)
    try:
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        cluster.wait_for_nodes()
        yield cluster, worker
    finally:
        ray.shutdown()
        cluster.shutdown()
    for pid in raylets:  # gone, or a zombie of this process
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.slow
@needs_bwrap
def test_local_and_ray_executors_give_identical_records(
    matrix_inputs: tuple[list[Path], list[Path]], ray_cluster: Any, tmp_path: Path
) -> None:
    local_db = f"sqlite:///{tmp_path / 'local.sqlite3'}"
    ray_db = f"sqlite:///{tmp_path / 'ray.sqlite3'}"
    requests = _requests(matrix_inputs, "sandbox")

    local = run_matrix(requests, executor="local", jobs=2, database_url=local_db)
    assert (local.count("done"), local.count("failed")) == (8, 0), local.results
    remote = run_matrix(requests, executor="ray", database_url=ray_db)
    assert (remote.count("done"), remote.count("failed")) == (8, 0), remote.results

    expected, got = _stored(local_db), _stored(ray_db)
    assert len(expected) == 8 and got == expected
    # both nodes ran runs; the worker node got the benchmarks through the object store
    nodes = {str(r.node).split("ray:")[1] for r in remote.results}
    assert len(nodes) == 2
    assert (tmp_path / "node-home" / "benchmarks" / "demo-b" / "v1" / "manifest.json").is_file()
    # the prediction files came back: the driver's archive holds every scored file
    from harness.results.prediction_archive import archived_paths

    for record in load_runs(open_store(ray_db)):
        paths = archived_paths(record.predictions_hashes, benchmark_hash=record.benchmark.hash)
        assert len(paths) == len(record.predictions_hashes)


@pytest.mark.slow
@needs_bwrap
def test_a_node_killed_mid_run_has_its_run_retried_elsewhere(
    matrix_inputs: tuple[list[Path], list[Path]], ray_cluster: Any, tmp_path: Path
) -> None:
    cluster, worker = ray_cluster
    raylet = worker.all_processes["raylet"][0].process.pid
    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    killed: list[str] = []

    def kill_worker_node_when_a_model_runs() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any("harness.worker.phases" in cmd for _, cmd in _descendants(raylet)):
                killed.append(worker.node_id)
                cluster.remove_node(worker, allow_graceful=False)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_worker_node_when_a_model_runs, daemon=True)
    watcher.start()
    packages, specs = matrix_inputs
    report: MatrixReport = run_matrix(
        [RunRequest(p, specs[0], "sandbox") for p in packages[:3]],
        executor="ray",
        database_url=db,
        max_retries=2,
    )
    watcher.join(timeout=5)
    assert killed, "no model ever ran on the worker node"
    assert report.count("done") == 3, report.results
    retried = [r for r in report.results if r.attempts > 1]
    assert retried, "the killed run was not retried"
    head = cluster.head_node.node_id[:12]
    assert killed[0][:12] != head
    assert all(str(r.node).endswith(f"ray:{head}") for r in retried)  # elsewhere
    assert len(load_runs(open_store(db))) == 3


@pytest.mark.slow
@needs_bwrap
def test_an_interrupted_matrix_resumes(
    matrix_inputs: tuple[list[Path], list[Path]], tmp_path: Path
) -> None:
    packages, specs = matrix_inputs
    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    argv = [str(p) for p in packages] + ["--spec", str(specs[0]), "--spec", str(specs[1])]
    argv += ["--runner", "sandbox", "--jobs", "1", "--database-url", db]
    zsl = Path(sys.executable).with_name("zsl")
    proc = subprocess.Popen(
        [str(zsl), "run", *argv],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:  # interrupt it once the first two records are stored
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if len(load_runs(open_store(db))) >= 2:
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stored = len(load_runs(open_store(db)))
    assert 2 <= stored < 8

    result = CliRunner().invoke(app, ["run", *argv[:-4], "--jobs", "2", "--database-url", db])
    assert result.exit_code == 0, result.output
    assert f"{8 - stored} done, 0 failed, {stored} skipped" in result.output
    assert len(load_runs(open_store(db))) == 8
    again = CliRunner().invoke(app, ["run", *argv])
    assert "0 done, 0 failed, 8 skipped" in again.output


@pytest.mark.slow
def test_ray_without_an_address_starts_an_instance_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--executor ray` without `--ray-address` starts a Ray instance here, as its help says:
    not the cluster RAY_ADDRESS names, nor the one last started on the machine (Ray's own
    default, which refused `--jobs` with a ValueError when another run's instance was up)."""
    ray = pytest.importorskip("ray")
    from harness.executors.ray import RayCluster

    monkeypatch.setenv("RAY_DISABLE_USAGE_STATS", "1")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")  # nothing listens there
    cluster = RayCluster(jobs=1)
    try:
        assert ray.is_initialized()
        assert ray.cluster_resources()["CPU"] == 1.0  # --jobs reached the instance it started
    finally:
        cluster.close()
    assert not ray.is_initialized()


# -- re-scoring on every executor -----------------------------------------------------------------


@pytest.mark.slow
def test_stale_runs_are_rescored_alike_inline_on_the_pool_and_on_ray(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """A stored run whose metric version is outdated is re-scored by a task on each executor;
    the Ray node (its own empty ZSL_HOME) gets the benchmark and the prediction files shipped.
    All three give the record a fresh run scores, byte for byte the same."""
    from harness.executors.rescore import rescore_store
    from harness.pipeline import run_submission
    from harness.results.records_io import dump_record
    from harness.store import save_run

    source = f"sqlite:///{tmp_path / 'source.sqlite3'}"
    fresh = run_submission(
        SUBMISSIONS / "eszsl", SPECS / "demo.yaml", runner="local", database_url=source, quiet=True
    )
    outdated = [
        e.model_copy(update={"version": "0"}) if e.metric == "top1" else e for e in fresh.scores
    ]
    stale = fresh.model_copy(update={"scores": outdated})
    rescored: dict[str, str] = {}
    for executor in ("inline", "local", "ray"):
        db = f"sqlite:///{tmp_path / f'{executor}.sqlite3'}"
        engine = open_store(db)
        save_run(engine, stale)
        (outcome,) = rescore_store(engine, SPECS, executor=executor, jobs=1)
        assert outcome.status == "rescored", outcome.message
        assert any("top1" in c and "v0 -> " in c for c in outcome.changes), outcome.changes
        (stored,) = load_runs(engine)
        assert stored.scores == fresh.scores
        top1 = fresh.score("zsl", "top1")
        assert top1 is not None and f"version 0 -> {top1.version}" in stored.logs["rescore"]
        rescored[executor] = dump_record(stored)
    assert rescored["local"] == rescored["inline"] == rescored["ray"]
