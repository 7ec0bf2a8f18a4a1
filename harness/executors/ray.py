"""The Ray executor: one Ray task per job, on whichever node has the resources.

Ray is imported here only (``pip install 'zsl-harness[ray]'``). :class:`RayCluster` connects to
the cluster at ``address`` (``ray start --head`` on one machine, ``ray start --address HEAD:6379``
on the others) or, without one, starts a Ray instance on this machine. Each job is a task
asking for its resources (a run: its package's): ``num_cpus`` = ``resources.cpus``,
``num_gpus`` = ``resources.gpus``, ``memory`` = ``resources.memory_gb`` in bytes. A job no
alive node could ever hold fails at once instead of waiting forever.

See docs/executors.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.executors import BackendKind, Job, Outcome
from harness.executors.task import Shipment, benchmark_files, execute_json, node_name

__all__ = ["BACKEND", "RayCluster", "import_ray"]

_GIB = 1 << 30


def import_ray() -> Any:
    """The ``ray`` module, or a clear error naming the extra that installs it."""
    try:
        import ray
    except ImportError as err:
        raise HarnessError(
            f"--executor ray needs Ray, which is not installed ({err}): "
            "pip install 'zsl-harness[ray]' (ray==2.60.0), or use --executor local"
        ) from None
    return ray


def run_on_node(
    kind: str,
    task_json: str,
    benchmark: dict[str, bytes] | None,
    attachments: dict[str, bytes],
    *member_benchmarks: dict[str, bytes] | None,
) -> str:
    """The body of every Ray task (module level: Ray finds it by name on the nodes).

    ``member_benchmarks``: a family task's, one per member run (top-level arguments, so Ray
    fetches each from the object store before the task starts)."""
    shipment = Shipment(benchmark, attachments, list(member_benchmarks))
    outcome = json.loads(execute_json(kind, task_json, shipment))
    node_id = import_ray().get_runtime_context().get_node_id()
    outcome["node"] = f"{outcome.get('node') or node_name()} ray:{node_id[:12]}"
    return json.dumps(outcome, sort_keys=True)


def resources_of(job: Job) -> dict[str, float]:
    """Ray's resource names and amounts for the job's ``resources``."""
    need: dict[str, float] = {
        "CPU": float(job.resources.cpus),
        "memory": float(int(job.resources.memory_gb * _GIB)),
    }
    if job.resources.gpus:
        need["GPU"] = float(job.resources.gpus)
    return need


class RayCluster:
    """Runs tasks on a Ray cluster; shuts down only a Ray instance it started itself."""

    def __init__(
        self, *, address: str | None = None, jobs: int | None = None, ship_benchmarks: bool = True
    ) -> None:
        ray = import_ray()
        self._ray = ray
        os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")  # the harness works offline
        self._started = not ray.is_initialized()
        if self._started:
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, logging_level="WARNING")
                else:
                    # "local": a new instance. Without it Ray joins the cluster RAY_ADDRESS names,
                    # else the last one started on this machine (/tmp/ray/ray_current_cluster),
                    # and refuses num_cpus for it: two runs side by side collided there.
                    ray.init(
                        address="local",
                        num_cpus=jobs,
                        include_dashboard=False,
                        log_to_driver=False,
                        logging_level="WARNING",
                    )
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise HarnessError(
                    f"cannot connect to the Ray cluster at {address or 'a new local instance'}:"
                    f" {err}"
                ) from None
        self._remote = ray.remote(run_on_node)
        self._ship = ship_benchmarks
        self._files: dict[Path, Any] = {}  # frozen benchmark root → object ref of its files
        self._refs: dict[Any, int] = {}

    def has_room(self, job: Job) -> bool:
        return True  # Ray queues what the cluster cannot run yet

    def infeasible(self, job: Job) -> str | None:
        need = resources_of(job)
        for node in self._ray.nodes():
            have = node.get("Resources", {})
            if node.get("Alive") and all(have.get(k, 0.0) >= v for k, v in need.items()):
                return None
        wanted = ", ".join(
            f"{k} {v / _GIB:g} GiB" if k == "memory" else f"{k} {v:g}" for k, v in need.items()
        )
        return (
            f"no alive node of the Ray cluster offers {wanted} (the resources asked for);"
            " add such a node or lower resources in submission.yaml"
        )

    def _benchmark_ref(self, root: Path | None) -> Any:
        """The object ref of the files of the frozen benchmark at ``root`` (put once), or None
        when benchmarks are not shipped."""
        if not self._ship or root is None:
            return None
        ref = self._files.get(root)
        if ref is None:
            ref = self._files[root] = self._ray.put(benchmark_files(root))
        return ref

    def submit(self, ticket: int, job: Job) -> None:
        benchmark = self._benchmark_ref(job.benchmark)
        members = [self._benchmark_ref(root) for root in job.member_benchmarks]
        attachments = {name: path.read_bytes() for name, path in job.attachments}
        need = resources_of(job)
        ref = self._remote.options(
            num_cpus=need["CPU"],
            num_gpus=need.get("GPU", 0.0),
            memory=need["memory"],
            max_retries=0,
            retry_exceptions=False,
            name=f"zsl {job.kind} {job.label}",
        ).remote(job.kind, job.task, benchmark, attachments, *members)
        self._refs[ref] = ticket

    def wait(self) -> list[tuple[int, Outcome]]:
        ray = self._ray
        ready, _ = ray.wait(list(self._refs), num_returns=1)
        finished = []
        for ref in ready:
            ticket = self._refs.pop(ref)
            try:
                outcome = Outcome(result=json.loads(ray.get(ref)))
            except ray.exceptions.RayTaskError as err:  # the task body raised: a bug, not Ray
                outcome = Outcome(
                    result={"ok": False, "transient": False, "error": _first_line(err)}
                )
            except ray.exceptions.RayError as err:  # worker or node died, object lost
                outcome = Outcome(system_error=f"{type(err).__name__}: {_first_line(err)}")
            finished.append((ticket, outcome))
        return finished

    def close(self) -> None:
        for ref in list(self._refs):
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        self._files.clear()
        if self._started:
            self._ray.shutdown()


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


BACKEND = BackendKind(
    make=lambda jobs, address, ship: RayCluster(address=address, jobs=jobs, ship_benchmarks=ship),
    check=import_ray,
)
