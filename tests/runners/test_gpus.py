"""GPUs (``harness.core.gpus``): discovery, refusal, leases, and what the local and sandbox
runners hand a run, on fake device nodes in a temporary folder (``ZSL_DEV_DIR``): no GPU needed.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import harness.runners.sandbox as sandbox_module
from harness.core import gpus as gpus_module
from harness.core.errors import RunnerError
from harness.core.gpus import (
    Gpu,
    check_request,
    container_gpu_args,
    cuda_env,
    device_nodes,
    lease,
    list_gpus,
    parse_smi,
)
from harness.runners.base import RunJob
from harness.runners.local import LocalRunner, local_env
from harness.runners.sandbox import SandboxRunner, library_address_space, sandbox_argv
from tests.conftest import REPO, needs_bwrap

SMI = "0, 0, GPU-aaaa-0000\n1, 1, GPU-bbbb-1111\n2, 3, GPU-cccc-3333\n"


def _fake_dev(root: Path, gpus: int = 3, *, uvm: bool = True) -> Path:
    """A device folder like a host's with ``gpus`` NVIDIA GPUs (regular files stand in)."""
    dev = root / "dev"
    dev.mkdir()
    names = ["nvidiactl", "nvidia-modeset", "nvidia-uvm-tools", "null", "nvme0"]
    names += ["nvidia-uvm"] if uvm else []
    names += [f"nvidia{i}" for i in range(gpus)]
    for name in names:
        (dev / name).write_text("")
    (dev / "nvidia-caps").mkdir()
    return dev


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three fake GPUs under ``ZSL_DEV_DIR``; no GPU restriction in the environment."""
    folder = _fake_dev(tmp_path)
    monkeypatch.setenv("ZSL_DEV_DIR", str(folder))
    monkeypatch.delenv("ZSL_GPUS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return folder


def _job(tmp_path: Path, gpus: int = 0, memory_gb: float = 4.0) -> RunJob:
    return RunJob(
        tmp_path / "b", tmp_path / "p", "model:M", tmp_path / "o", gpus=gpus, memory_gb=memory_gb
    )


def _setenv(argv: list[str]) -> dict[str, str]:
    return {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}


def _binds(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


# --- discovery ---------------------------------------------------------------------------------


def test_gpus_are_the_numbered_device_nodes(dev: Path) -> None:
    assert list_gpus() == [Gpu(0, 0), Gpu(1, 1), Gpu(2, 2)]
    assert list_gpus(dev, env={}) == list_gpus()


def test_nvidia_smi_names_index_minor_and_uuid() -> None:
    found = list_gpus(Path("/nonexistent"), smi=lambda: SMI, env={})
    assert found == [Gpu(0, 0, "GPU-aaaa-0000"), Gpu(1, 1, "GPU-bbbb-1111"), Gpu(2, 3, "GPU-cccc-3333")]  # fmt: skip
    assert [g.node for g in found] == ["nvidia0", "nvidia1", "nvidia3"]
    assert parse_smi("No devices were found\n") == []
    assert parse_smi("0, [N/A], GPU-x\n") == [Gpu(0, 0, "GPU-x")]


def test_no_gpu_where_no_node(tmp_path: Path) -> None:
    assert list_gpus(_fake_dev(tmp_path, gpus=0), env={}) == []
    assert list_gpus(tmp_path / "missing", env={}) == []


def test_zsl_gpus_restricts_by_index_or_uuid(dev: Path) -> None:
    assert list_gpus(env={"ZSL_DEV_DIR": str(dev), "ZSL_GPUS": "2,0"}) == [Gpu(0, 0), Gpu(2, 2)]
    assert list_gpus(env={"ZSL_DEV_DIR": str(dev), "ZSL_GPUS": ""}) == []
    by_uuid = list_gpus(Path("/x"), smi=lambda: SMI, env={"ZSL_GPUS": "GPU-cccc-3333"})
    assert by_uuid == [Gpu(2, 3, "GPU-cccc-3333")]
    # ZSL_GPUS wins over the harness's own CUDA_VISIBLE_DEVICES.
    env = {"ZSL_DEV_DIR": str(dev), "ZSL_GPUS": "1", "CUDA_VISIBLE_DEVICES": "0"}
    assert list_gpus(env=env) == [Gpu(1, 1)]


def test_zsl_gpus_naming_a_missing_gpu_is_refused(dev: Path) -> None:
    with pytest.raises(RunnerError, match=r"ZSL_GPUS='0,7' names 7, which this machine does not"):
        list_gpus(env={"ZSL_DEV_DIR": str(dev), "ZSL_GPUS": "0,7"})


def test_the_harness_own_cuda_visible_devices_is_its_allocation(dev: Path) -> None:
    """Inside a Ray task or a Slurm job, the harness uses only the GPUs it was given."""
    assert list_gpus(env={"ZSL_DEV_DIR": str(dev), "CUDA_VISIBLE_DEVICES": "1"}) == [Gpu(1, 1)]
    assert list_gpus(env={"ZSL_DEV_DIR": str(dev), "CUDA_VISIBLE_DEVICES": ""}) == []
    assert list_gpus(env={"ZSL_DEV_DIR": str(dev), "CUDA_VISIBLE_DEVICES": "-1"}) == []


# --- refusal -----------------------------------------------------------------------------------


def test_asking_for_more_gpus_than_the_machine_has_is_refused() -> None:
    with pytest.raises(RunnerError) as err:
        check_request(2, [Gpu(0, 0)], env={})
    message = str(err.value)
    assert "asks for 2 GPU(s) (resources.gpus in submission.yaml)" in message
    assert "offers 1 GPU(s): 0" in message
    assert "run it on a machine with at least 2" in message and "lower resources.gpus" in message
    with pytest.raises(RunnerError, match=r"offers no GPU \(ZSL_GPUS=''\)"):
        check_request(1, [], env={"ZSL_GPUS": ""})
    check_request(1, [Gpu(0, 0)], env={})
    check_request(0, [], env={})


@pytest.mark.parametrize("runner", [SandboxRunner(), LocalRunner()], ids=["sandbox", "local"])
def test_runners_refuse_before_anything_starts(
    runner: SandboxRunner | LocalRunner, dev: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(sandbox_module, "available", lambda bwrap="bwrap": True)
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox_module, "run_job", started)
    monkeypatch.setattr("harness.runners.local.run_job", started)
    (tmp_path / "o").mkdir()
    with pytest.raises(RunnerError, match=r"asks for 4 GPU\(s\).*offers 3 GPU\(s\): 0, 1, 2"):
        runner.run(_job(tmp_path, gpus=4))


# --- what runs see -----------------------------------------------------------------------------


def test_cuda_env_hides_every_gpu_from_a_run_that_asked_for_none() -> None:
    assert cuda_env([]) == {"CUDA_VISIBLE_DEVICES": ""}
    env = cuda_env([Gpu(0, 0), Gpu(2, 2)])
    assert env == {
        "CUDA_VISIBLE_DEVICES": "0,2",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    }
    assert cuda_env([Gpu(0, 0), Gpu(2, 2)], renumbered=True)["CUDA_VISIBLE_DEVICES"] == "0,1"
    with_uuids = [Gpu(1, 1, "GPU-b"), Gpu(2, 3, "GPU-c")]
    assert cuda_env(with_uuids, renumbered=True)["CUDA_VISIBLE_DEVICES"] == "GPU-b,GPU-c"


def test_sandbox_binds_the_control_nodes_and_only_the_assigned_gpus(dev: Path, tmp_path: Path) -> None:  # fmt: skip
    argv = sandbox_argv(_job(tmp_path, gpus=2), as_root=False, assigned=(Gpu(0, 0), Gpu(2, 2)))
    binds = _binds(argv, "--dev-bind")
    assert binds == [
        (str(dev / n), f"/dev/{n}")
        for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0", "nvidia2")
    ]  # fmt: skip
    assert argv.index("--dev") < argv.index("--dev-bind")  # bound into the fresh /dev
    assert ("/sys", "/sys") in _binds(argv, "--ro-bind")
    env = _setenv(argv)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # only its own nodes: the driver counts from 0
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert env["CUDA_CACHE_PATH"].startswith("/tmp/")
    tail = argv[argv.index("-c") + 2 :]
    assert tail[0] == "-1"  # no address-space rlimit: CUDA reserves far more than it uses
    assert tail[1:6] == ["1810", "256", str(1 << 30), "1024", "-1"]


def test_sandbox_without_gpus_binds_no_device_and_hides_all(dev: Path, tmp_path: Path) -> None:
    argv = sandbox_argv(_job(tmp_path, memory_gb=1), as_root=True)
    assert "--dev-bind" not in argv and not [a for a in argv if "nvidia" in a]
    assert ("/sys", "/sys") not in _binds(argv, "--ro-bind")
    assert _setenv(argv)["CUDA_VISIBLE_DEVICES"] == ""
    # the run's memory plus the address space the environment's libraries may take
    assert argv[argv.index("-c") + 2] == str((1 << 30) + library_address_space())


def test_sandbox_names_gpus_by_uuid_where_known(dev: Path, tmp_path: Path) -> None:
    assigned = (Gpu(1, 1, "GPU-bbbb-1111"),)
    argv = sandbox_argv(_job(tmp_path, gpus=1), as_root=True, assigned=assigned)
    assert _setenv(argv)["CUDA_VISIBLE_DEVICES"] == "GPU-bbbb-1111"
    assert (str(dev / "nvidia1"), "/dev/nvidia1") in _binds(argv, "--dev-bind")


def test_sandbox_binds_driver_libraries_outside_usr(
    dev: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = tmp_path / "opt" / "nvidia" / "lib64"
    driver.mkdir(parents=True)
    cache = (
        "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
        f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {driver}/libnvidia-ml.so.1\n"
        f"\tlibz.so.1 (libc6,x86-64) => {tmp_path}/other/libz.so.1\n"
    )
    monkeypatch.setattr(gpus_module, "_ldconfig_cache", lambda: cache)
    argv = sandbox_argv(_job(tmp_path, gpus=1), as_root=True, assigned=(Gpu(0, 0),))
    ro = _binds(argv, "--ro-bind")
    assert (str(driver), str(driver)) in ro
    assert not [b for b in ro if b[0].startswith((f"{tmp_path}/other", "/usr/lib/"))]


def test_a_missing_uvm_node_is_a_clear_error(tmp_path: Path) -> None:
    folder = _fake_dev(tmp_path, gpus=1, uvm=False)
    with pytest.raises(RunnerError, match=r"nvidia-uvm, which do\(es\) not exist.*nvidia-modprobe"):
        device_nodes([Gpu(0, 0)], folder)
    assert device_nodes([], folder) == []


def test_argv_and_env_refuse_a_job_without_its_gpus(dev: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="asks for 1 GPU"):
        sandbox_argv(_job(tmp_path, gpus=1), as_root=True)
    with pytest.raises(ValueError, match="asks for 0 GPU"):
        local_env(_job(tmp_path), assigned=(Gpu(0, 0),))


def test_local_env_names_the_assigned_gpus_or_none(tmp_path: Path) -> None:
    caller = {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0,1,2"}
    assert local_env(_job(tmp_path), caller)["CUDA_VISIBLE_DEVICES"] == ""
    env = local_env(_job(tmp_path, gpus=1), caller, assigned=(Gpu(2, 2),))
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_container_flags_name_exact_devices() -> None:
    two = [Gpu(0, 0, "GPU-a"), Gpu(2, 2, "GPU-c")]
    assert container_gpu_args("/usr/bin/docker", two) == [
        "--gpus",
        '"device=GPU-a,GPU-c"',
        "-e",
        "CUBLAS_WORKSPACE_CONFIG=:4096:8",
    ]
    assert container_gpu_args("podman", two)[:4] == [
        "--device",
        "nvidia.com/gpu=0",
        "--device",
        "nvidia.com/gpu=2",
    ]
    none = container_gpu_args("docker", [])
    assert none == ["-e", "NVIDIA_VISIBLE_DEVICES=void", "-e", "CUDA_VISIBLE_DEVICES="]


# --- leases ------------------------------------------------------------------------------------

TWO = [Gpu(0, 0), Gpu(1, 1)]


def test_leases_are_disjoint_and_all_or_nothing(tmp_path: Path) -> None:
    with lease(1, gpus=TWO, home=tmp_path) as first:
        with lease(1, gpus=TWO, home=tmp_path) as second:
            assert first == (Gpu(0, 0),) and second == (Gpu(1, 1),)
            with (
                pytest.raises(RunnerError, match=r"came free within 0\.3 s"),
                lease(1, gpus=TWO, home=tmp_path, wait_s=0.3, poll_s=0.05),
            ):
                pass
        # One GPU is free, but a run asking for two takes none of them while it waits.
        with (
            pytest.raises(RunnerError, match="no 2 of this machine's 2 GPU"),
            lease(2, gpus=TWO, home=tmp_path, wait_s=0.2, poll_s=0.05),
        ):
            pass
        with lease(1, gpus=TWO, home=tmp_path, wait_s=0) as again:
            assert again == (Gpu(1, 1),)
    with lease(2, gpus=TWO, home=tmp_path, wait_s=0) as both:
        assert both == tuple(TWO)
    with lease(0, gpus=[], home=tmp_path) as none:
        assert none == ()


def test_a_waiting_run_gets_the_gpu_when_its_holder_ends(tmp_path: Path) -> None:
    got: list[tuple[Gpu, ...]] = []

    def wait() -> None:
        with lease(1, gpus=TWO[:1], home=tmp_path, poll_s=0.02) as assigned:
            got.append(assigned)

    with lease(1, gpus=TWO[:1], home=tmp_path):
        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        assert not got  # still waiting
    waiter.join(10)
    assert got == [(Gpu(0, 0),)]


LEASE_CHILD = """
import sys, time
from pathlib import Path
from harness.core.gpus import Gpu, lease
home = Path(sys.argv[1])
print("ready", flush=True)
while len(sys.argv) > 3 and not (home / "go").exists():  # all children contend at once
    time.sleep(0.005)
with lease(1, gpus=[Gpu(0, 0), Gpu(1, 1)], home=home, poll_s=0.01) as got:
    start = time.time()
    time.sleep(float(sys.argv[2]))
    print(got[0].index, start, time.time(), flush=True)
"""


@pytest.mark.slow
def test_concurrent_processes_get_disjoint_gpus(tmp_path: Path) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", LEASE_CHILD, str(tmp_path), "0.1", "wait"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(5)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    (tmp_path / "go").touch()
    spans: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        index, start, end = out.split()
        spans[int(index)].append((float(start), float(end)))
    assert sum(len(s) for s in spans.values()) == 5
    for held in spans.values():
        held.sort()
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(held)), held


@pytest.mark.slow
def test_a_killed_holder_leaves_no_stale_lease(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", LEASE_CHILD, str(tmp_path), "600"], cwd=REPO)
    lock = gpus_module.lease_dir(tmp_path) / "nvidia0.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().startswith(f"pid {child.pid}")):
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.05)
    with lease(1, gpus=TWO, home=tmp_path, wait_s=0) as other:
        assert other == (Gpu(1, 1),)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)
    with lease(2, gpus=TWO, home=tmp_path, wait_s=5, poll_s=0.05) as both:
        assert both == tuple(TWO)


# --- real runs on fake nodes ---------------------------------------------------------------------

REPORT = """
import json, os, sys
out = sys.argv[2]
seen = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
json.dump({"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "dev": seen,
           "sys": os.path.isdir("/sys/devices")}, open(os.path.join(out, "env.json"), "w"))
"""


def _script_job(tmp_path: Path, gpus: int) -> RunJob:
    package, bundle, out = tmp_path / "pkg", tmp_path / "bundle", tmp_path / "out"
    for folder in (package, bundle, out):
        folder.mkdir()
    (package / "report.py").write_text(textwrap.dedent(REPORT))
    return RunJob(
        bundle, package, "", out, timeout_s=60, memory_gb=1, gpus=gpus, script="report.py"
    )


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("gpus", [0, 1])
def test_a_sandboxed_run_sees_only_its_own_gpu_nodes(dev: Path, tmp_path: Path, gpus: int) -> None:
    job = _script_job(tmp_path, gpus)
    outcome = SandboxRunner().run(job)
    assert outcome.ok, outcome.stderr
    seen = json.loads((job.out / "env.json").read_text())
    if gpus:
        assert seen["cuda"] == "0" and seen["sys"]
        assert seen["dev"] == ["nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"]  # fmt: skip
        assert outcome.details["gpus"] == "0"
    else:
        assert seen == {"cuda": "", "dev": [], "sys": False}
        assert "gpus" not in outcome.details


@pytest.mark.slow
def test_a_local_run_is_shown_its_leased_gpu(dev: Path, tmp_path: Path) -> None:
    job = _script_job(tmp_path, 1)
    with lease(1):  # another run holds GPU 0
        outcome = LocalRunner().run(job)
    assert outcome.ok, outcome.stderr
    assert json.loads((job.out / "env.json").read_text())["cuda"] == "1"
    assert outcome.details["gpus"] == "1"
