"""Declared resources are capped: by this machine for a run, by ``max_resources`` on CI.

A hostile ``submission.yaml`` asking for ``memory_gb: 100000, time_s: 1e8, cpus: 64`` must not
size a sandbox with those numbers: the caps, each note naming the declared value, the cap and
where it comes from, the machine's figures read from fake ``/proc`` and cgroup files, the CI
configuration's ``max_resources``, ``zsl submission validate``'s lines, the job a run gets, and
the manifest values that are refused outright.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.ci.config import CIConfig, MaxResources, load_ci_config
from harness.core.errors import HarnessError, SubmissionError
from harness.executors.task import FamilyTask, RunTask
from harness.submission import resources as caps_module
from harness.submission.package import Resources, load_package
from harness.submission.resources import (
    DEFAULT_MAX_TIME_S,
    CapNote,
    ResourceCaps,
    cap_resources,
    cgroup_memory_bytes,
    current_limits,
    effective_caps,
    limited_to,
    machine_caps,
    meminfo_total_bytes,
)
from tests import hostile

runner = CliRunner()
GIB = 1 << 30
HUGE = "resources:\n  cpus: 64\n  gpus: 0\n  memory_gb: 100000\n  time_s: 100000000\n"

#: Caps as :func:`machine_caps` gives them on a small machine.
MACHINE = ResourceCaps(
    cpus=2,
    memory_gb=23.5,
    time_s=DEFAULT_MAX_TIME_S,
    gpus=0,
    sources={
        "cpus": "this machine has 2 CPUs",
        "memory_gb": "this machine's memory",
        "time_s": "the harness's cap on a run's time; ZSL_MAX_TIME_S sets another",
        "gpus": "this machine has 0 GPUs",
    },
)


@pytest.fixture
def small_machine(monkeypatch: pytest.MonkeyPatch) -> ResourceCaps:
    """This machine, as the caps see it: :data:`MACHINE` (2 CPUs, 23.5 GB, no GPU)."""
    monkeypatch.setattr(caps_module, "machine_caps", lambda: MACHINE)
    return MACHINE


def _huge_package(tmp_path: Path, resources: str = HUGE) -> Path:
    """A copy of the ESZSL package whose manifest declares ``resources``."""
    root = hostile.copy_eszsl(tmp_path)
    manifest = root / "submission.yaml"
    text = manifest.read_text()
    start = text.index("resources:")
    end = text.index("declarations:")
    manifest.write_text(text[:start] + resources + text[end:])
    return root


# -- capping ------------------------------------------------------------------------------------


def test_each_field_above_its_cap_is_capped_with_a_note() -> None:
    declared = Resources(cpus=64, memory_gb=100000, time_s=100_000_000, gpus=0)
    capped = cap_resources(declared, MACHINE)
    assert capped.resources == Resources(cpus=2, memory_gb=23.5, time_s=DEFAULT_MAX_TIME_S, gpus=0)
    assert [str(note) for note in capped.notes] == [
        "resources.cpus: 64 declared, capped to 2 (this machine has 2 CPUs)",
        "resources.memory_gb: 100000 GB declared, capped to 23.5 GB (this machine's memory)",
        "resources.time_s: 100000000 s declared, capped to 86400 s (the harness's cap on a run's"
        " time; ZSL_MAX_TIME_S sets another)",
    ]
    assert capped.notes[1] == CapNote("memory_gb", 100000.0, 23.5, "this machine's memory")
    assert capped.refused == ()
    assert capped.check("submission.yaml") == capped.resources


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("cpus", 3, "resources.cpus: 3 declared, capped to 2 (this machine has 2 CPUs)"),
        (
            "memory_gb",
            23.75,
            "resources.memory_gb: 23.75 GB declared, capped to 23.5 GB (this machine's memory)",
        ),
        (
            "time_s",
            86401,
            "resources.time_s: 86401 s declared, capped to 86400 s (the harness's cap on a run's"
            " time; ZSL_MAX_TIME_S sets another)",
        ),
    ],
)
def test_one_field_over_its_cap_gets_one_note(field: str, value: float, line: str) -> None:
    capped = cap_resources(Resources(**{field: value}), MACHINE)
    assert [str(note) for note in capped.notes] == [line]
    assert getattr(capped.resources, field) == getattr(MACHINE, field)
    # The other fields are as declared (the defaults here).
    others = {f: getattr(Resources(), f) for f in ("cpus", "memory_gb", "time_s") if f != field}
    assert {f: getattr(capped.resources, f) for f in others} == others


def test_resources_within_the_caps_are_untouched() -> None:
    declared = Resources(cpus=2, memory_gb=23.5, time_s=600, gpus=0)
    capped = cap_resources(declared, MACHINE)
    assert capped.resources == declared and capped.notes == ()


def test_gpus_above_the_cap_are_refused_not_lowered() -> None:
    capped = cap_resources(Resources(gpus=2), MACHINE)
    assert capped.resources.gpus == 2  # never lowered: the model would fail on a missing GPU
    (note,) = capped.refused
    assert str(note) == (
        "resources.gpus: 2 declared, more than the 0 allowed (this machine has 0 GPUs): a GPU"
        " count is never lowered, so a run is refused"
    )
    with pytest.raises(SubmissionError) as info:
        capped.check("pkg/submission.yaml")
    assert str(info.value) == (
        f"pkg/submission.yaml: {note}; lower resources.gpus, or run it where 2 are allowed"
    )


def test_huge_declared_numbers_stay_short_in_notes() -> None:
    (note,) = cap_resources(Resources(memory_gb=1e300), MACHINE).notes
    assert str(note).startswith("resources.memory_gb: 1e+300 GB declared, capped to 23.5 GB")


def test_tighter_keeps_the_lower_cap_and_names_its_source() -> None:
    ci = CIConfig(specs=["s.yaml"], max_resources=MaxResources(cpus=4, memory_gb=8)).resource_caps()
    joined = ci.tighter(MACHINE)
    assert (joined.cpus, joined.memory_gb, joined.time_s, joined.gpus) == (2, 8.0, 3600, 0)
    assert joined.source("cpus") == "this machine has 2 CPUs"
    assert joined.source("memory_gb") == "the leaderboard's ci.yaml `max_resources.memory_gb`"
    # A tie is named as the first's (CI's): the cap the run is meant to get.
    assert joined.source("gpus") == "the leaderboard's ci.yaml `max_resources.gpus`"


# -- this machine -------------------------------------------------------------------------------


def _meminfo(tmp_path: Path, kib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {kib} kB\nMemFree:        1024 kB\n")
    return path


def _cgroup_v2(tmp_path: Path, limits: dict[str, str], own: str = "/a/b") -> tuple[Path, Path]:
    """A fake ``/proc/self/cgroup`` (v2, in ``own``) and a hierarchy with ``limits`` (folder
    relative to the root -> ``memory.max``)."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    for folder, value in limits.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "memory.max").write_text(value + "\n")
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text(f"0::{own}\n")
    return self_cgroup, root


def test_meminfo_total(tmp_path: Path) -> None:
    assert meminfo_total_bytes(_meminfo(tmp_path, 24_684_084)) == 24_684_084 * 1024
    assert meminfo_total_bytes(tmp_path / "missing") is None
    (tmp_path / "odd").write_text("MemFree: 3 kB\n")
    assert meminfo_total_bytes(tmp_path / "odd") is None


def test_cgroup_limit_is_the_lowest_on_the_way_up(tmp_path: Path) -> None:
    self_cgroup, root = _cgroup_v2(tmp_path, {"a/b": "max", "a": str(6 * GIB)})
    assert cgroup_memory_bytes(self_cgroup, root) == 6 * GIB
    (root / "a" / "b" / "memory.max").write_text(f"{4 * GIB}\n")
    assert cgroup_memory_bytes(self_cgroup, root) == 4 * GIB


def test_cgroup_without_a_limit_or_files(tmp_path: Path) -> None:
    self_cgroup, root = _cgroup_v2(tmp_path, {"a/b": "max"})
    assert cgroup_memory_bytes(self_cgroup, root) is None
    assert cgroup_memory_bytes(tmp_path / "no-such-file", root) is None


def test_cgroup_path_outside_the_mount_reads_the_mount_itself(tmp_path: Path) -> None:
    # A container's sub-tree mounted at the root: /proc/self/cgroup names a path the mount
    # does not show, and the limit is the mount's own.
    self_cgroup, root = _cgroup_v2(tmp_path, {}, own="/docker/0123abcd")
    (root / "memory.max").write_text(f"{3 * GIB}\n")
    assert cgroup_memory_bytes(self_cgroup, root) == 3 * GIB


def test_cgroup_v1_memory_limit(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    group = root / "memory" / "job"
    group.mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # none
    (group / "memory.limit_in_bytes").write_text(f"{2 * GIB}\n")
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text("5:cpu,cpuacct:/job\n4:memory:/job\n0::/\n")
    assert cgroup_memory_bytes(self_cgroup, root) == 2 * GIB


def _fake_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, cpus: int = 3, gpus: int = 1
) -> dict[str, str]:
    """``cpus`` CPUs for this process and ``gpus`` fake GPU nodes; the environment to pass."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    dev = tmp_path / "dev"
    dev.mkdir()
    for index in range(gpus):
        (dev / f"nvidia{index}").touch()
    return {"ZSL_DEV_DIR": str(dev)}


def test_machine_caps_from_fake_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _fake_machine(tmp_path, monkeypatch)
    self_cgroup, root = _cgroup_v2(tmp_path, {"a/b": "max"})
    caps = machine_caps(
        meminfo=_meminfo(tmp_path, 24_684_084), self_cgroup=self_cgroup, cgroup_root=root, env=env
    )
    assert (caps.cpus, caps.memory_gb, caps.time_s, caps.gpus) == (3, 23.5, 86400, 1)
    assert caps.source("cpus") == "this machine has 3 CPUs for this process (of 8)"
    assert caps.source("memory_gb") == "this machine's memory"
    assert caps.source("gpus") == "this machine has 1 GPU"


def test_a_lower_cgroup_limit_is_the_memory_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _fake_machine(tmp_path, monkeypatch, gpus=0)
    self_cgroup, root = _cgroup_v2(tmp_path, {"a/b": str(int(5.55 * GIB))})
    caps = machine_caps(
        meminfo=_meminfo(tmp_path, 24_684_084), self_cgroup=self_cgroup, cgroup_root=root, env=env
    )
    assert caps.memory_gb == 5.5  # floored to a tenth
    assert caps.source("memory_gb") == "this process's cgroup memory limit"
    (note,) = cap_resources(Resources(memory_gb=100000), caps).notes
    assert str(note) == (
        "resources.memory_gb: 100000 GB declared, capped to 5.5 GB (this process's cgroup"
        " memory limit)"
    )


def test_time_cap_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _fake_machine(tmp_path, monkeypatch, gpus=0)
    files = {"meminfo": _meminfo(tmp_path, 1 << 20), "self_cgroup": tmp_path / "none"}
    caps = machine_caps(**files, env={**env, "ZSL_MAX_TIME_S": "7200"})
    assert caps.time_s == 7200 and caps.source("time_s") == "ZSL_MAX_TIME_S=7200"
    assert machine_caps(**files, env=env).time_s == DEFAULT_MAX_TIME_S
    for bad in ("1e4", "-5", "0", "soon"):
        with pytest.raises(HarnessError, match=r"^ZSL_MAX_TIME_S=.*a whole number of seconds"):
            machine_caps(**files, env={**env, "ZSL_MAX_TIME_S": bad})


def test_machine_gpus_restricted_by_zsl_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _fake_machine(tmp_path, monkeypatch, gpus=2)
    files = {"meminfo": _meminfo(tmp_path, 1 << 20), "self_cgroup": tmp_path / "none"}
    caps = machine_caps(**files, env={**env, "ZSL_GPUS": ""})
    assert caps.gpus == 0 and caps.source("gpus") == "this machine has 0 GPUs (ZSL_GPUS='')"
    assert machine_caps(**files, env=env).gpus == 2


def test_the_real_machine_caps_are_sane() -> None:
    caps = machine_caps()
    assert 1 <= caps.cpus <= (os.cpu_count() or 1)
    assert caps.memory_gb > 0 and caps.time_s > 0 and caps.gpus >= 0


# -- the caps of a block of runs ----------------------------------------------------------------


def test_limited_to_nests_and_effective_caps_add_the_machine(small_machine: ResourceCaps) -> None:
    ci = CIConfig(specs=["s.yaml"]).resource_caps()
    assert current_limits() is None
    assert effective_caps() == small_machine
    with limited_to(ci):
        assert current_limits() == ci
        inner = ResourceCaps(cpus=1, memory_gb=16, time_s=7200, gpus=0)
        with limited_to(inner):
            got = current_limits()
            assert got is not None and (got.cpus, got.memory_gb, got.time_s) == (1, 8.0, 3600)
        with limited_to(None):
            assert current_limits() == ci
        effective = effective_caps()
        assert (effective.cpus, effective.memory_gb, effective.time_s) == (2, 8.0, 3600)
        assert (
            effective.source("memory_gb") == "the leaderboard's ci.yaml `max_resources.memory_gb`"
        )
    assert current_limits() is None


def test_run_task_carries_caps_through_json() -> None:
    caps = CIConfig(specs=["s.yaml"]).resource_caps("leaderboard/ci.yaml")
    task = RunTask("p", "s", None, "h1", "h2", "h3", caps=caps)
    back = RunTask(**json.loads(task.to_json()))
    assert back == task and back.caps is not None
    assert back.caps.sources == caps.sources
    family = FamilyTask("f", (task,), retries=1)
    assert FamilyTask.from_fields(json.loads(family.to_json())).runs[0].caps == caps
    # Without caps, as before.
    plain = RunTask("p", "s", None, "h1", "h2", "h3")
    assert RunTask(**json.loads(plain.to_json())) == plain


# -- the CI configuration -----------------------------------------------------------------------


def test_ci_config_max_resources(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(
        "specs:\n  - specs/demo.yaml\nmax_resources:\n  cpus: 4\n  memory_gb: 16\n  time_s: 7200\n"
    )
    caps = load_ci_config(path).resource_caps("leaderboard/ci.yaml")
    assert (caps.cpus, caps.memory_gb, caps.time_s, caps.gpus) == (4, 16.0, 7200, 0)
    (note,) = cap_resources(Resources(memory_gb=100000), caps).notes
    assert str(note) == (
        "resources.memory_gb: 100000 GB declared, capped to 16 GB (the leaderboard's"
        " leaderboard/ci.yaml `max_resources.memory_gb`)"
    )


def test_ci_config_defaults_and_the_shipped_file() -> None:
    from tests.conftest import REPO

    default = CIConfig(specs=["s.yaml"]).resource_caps()
    assert (default.cpus, default.memory_gb, default.time_s, default.gpus) == (2, 8.0, 3600, 0)
    shipped = load_ci_config(REPO / "leaderboard" / "ci.yaml").resource_caps()
    assert dataclasses.astuple(shipped)[:4] == (2, 8.0, 3600, 0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("  memory_gb: .inf", "max_resources.memory_gb: Input should be a finite number"),
        ("  time_s: 1.5", "max_resources.time_s: Input should be a valid integer"),
        ("  network: true", "max_resources.network: unknown key 'network'"),
    ],
)
def test_ci_config_bad_max_resources(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(f"specs:\n  - specs/demo.yaml\nmax_resources:\n{line}\n")
    with pytest.raises(HarnessError) as info:
        load_ci_config(path)
    assert f"{path}:4: {message}" in str(info.value)


def test_ci_validation_caps_and_refuses_gpus(tmp_path: Path) -> None:
    from harness.ci.pr import _FileRule, _validate

    root = _huge_package(tmp_path / "big")
    caps = CIConfig(specs=["s.yaml"]).resource_caps("leaderboard/ci.yaml")
    rule = _FileRule(allowed=(), config_shown="leaderboard/ci.yaml")
    outcome, notes, uses = _validate(root.relative_to(tmp_path).as_posix(), tmp_path, caps, rule)
    assert outcome is None and uses == "default"  # its declarations.class_embedding
    assert [n.field for n in notes] == ["cpus", "memory_gb", "time_s"]
    assert str(notes[0]) == (
        "resources.cpus: 64 declared, capped to 2 (the leaderboard's leaderboard/ci.yaml"
        " `max_resources.cpus`)"
    )
    gpu = _huge_package(tmp_path / "gpu", "resources:\n  gpus: 1\n")
    outcome, notes, _ = _validate(gpu.relative_to(tmp_path).as_posix(), tmp_path, caps, rule)
    assert outcome is not None and outcome.status == "invalid" and notes == ()
    assert outcome.detail == (
        "gpu/eszsl/submission.yaml: resources.gpus: 1 declared, more than the 0 allowed (the"
        " leaderboard's leaderboard/ci.yaml `max_resources.gpus`): a GPU count is never lowered,"
        " so a run is refused; lower resources.gpus, or run it where 1 are allowed"
    )


# -- the manifest's own values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("  time_s: .inf", "resources.time_s: Input should be a finite number; got inf"),
        ("  time_s: .nan", "resources.time_s: Input should be a finite number; got nan"),
        (
            "  time_s: 1.5",
            "resources.time_s: Input should be a valid integer, got a number with a fractional"
            " part; got 1.5",
        ),
        ("  memory_gb: .inf", "resources.memory_gb: Input should be a finite number; got inf"),
        ("  memory_gb: .nan", "resources.memory_gb: Input should be a finite number; got nan"),
        ("  cpus: true", "resources.cpus: expected a number, got a boolean (true)"),
    ],
)
def test_manifest_values_that_are_refused(tmp_path: Path, line: str, message: str) -> None:
    root = _huge_package(tmp_path, f"resources:\n{line}\n")
    with pytest.raises(SubmissionError) as info:
        load_package(root)
    manifest = root / "submission.yaml"
    number = manifest.read_text().splitlines().index(line) + 1
    assert f"{manifest}:{number}: {message}" in str(info.value)


def test_time_s_written_as_a_whole_float_is_a_whole_number(tmp_path: Path) -> None:
    root = _huge_package(tmp_path, "resources:\n  time_s: 100000000.0\n  memory_gb: 1.0e+5\n")
    resources = load_package(root).manifest.resources
    assert resources.time_s == 100_000_000 and isinstance(resources.time_s, int)
    assert resources.memory_gb == 100000.0


# -- where the caps take effect -----------------------------------------------------------------


def test_validate_prints_each_capped_field(tmp_path: Path, small_machine: ResourceCaps) -> None:
    from harness.cli.main import app

    root = _huge_package(tmp_path)
    result = runner.invoke(app, ["submission", "validate", str(root)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"ok {root}")
    lines = result.output.splitlines()
    for line in (
        "  resources.cpus: 64 declared, capped to 2 (this machine has 2 CPUs)",
        "  resources.memory_gb: 100000 GB declared, capped to 23.5 GB (this machine's memory)",
        "  resources.time_s: 100000000 s declared, capped to 86400 s (the harness's cap on a"
        " run's time; ZSL_MAX_TIME_S sets another)",
    ):
        assert line in lines, result.output


def test_validate_result_carries_the_notes(tmp_path: Path, small_machine: ResourceCaps) -> None:
    from harness.cli.submission import validate_package

    found = validate_package(_huge_package(tmp_path))
    assert [note.field for note in found.resources.notes] == ["cpus", "memory_gb", "time_s"]
    assert found.resources.resources == Resources(cpus=2, memory_gb=23.5, time_s=86400)
    assert found.entrypoint is not None and found.entrypoint.ok


def test_package_job_is_capped_by_the_machine(tmp_path: Path, small_machine: ResourceCaps) -> None:
    from harness.pipeline import _package_job

    package = load_package(_huge_package(tmp_path))
    job = _package_job(package, tmp_path / "bundle", tmp_path / "out", 100_000_000)
    assert (job.memory_gb, job.cpus, job.timeout_s, job.gpus) == (23.5, 2, 86400.0, 0)
    # A shorter wall clock asked by the caller (a generator's --timeout) is kept.
    assert _package_job(package, tmp_path / "b", tmp_path / "o", 60).timeout_s == 60.0


def test_package_job_is_capped_by_ci(tmp_path: Path, small_machine: ResourceCaps) -> None:
    from harness.pipeline import _package_job

    package = load_package(_huge_package(tmp_path))
    with limited_to(CIConfig(specs=["s.yaml"]).resource_caps()):
        job = _package_job(package, tmp_path / "bundle", tmp_path / "out", 100_000_000)
    assert (job.memory_gb, job.cpus, job.timeout_s) == (8.0, 2, 3600.0)


def test_package_job_refuses_gpus_the_machine_lacks(
    tmp_path: Path, small_machine: ResourceCaps
) -> None:
    from harness.pipeline import _package_job

    package = load_package(_huge_package(tmp_path, "resources:\n  gpus: 1\n"))
    with pytest.raises(SubmissionError, match=r"submission\.yaml: resources\.gpus: 1 declared"):
        _package_job(package, tmp_path / "bundle", tmp_path / "out", 600)
