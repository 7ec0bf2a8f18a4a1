"""Totals a run may not pass, whatever it does per process: logs, memory, /tmp, /out, processes.

Each hostile model is a generated package (see ``tests.runners.test_sandbox._package``) and runs for
real: under the sandbox (bubblewrap) and the local runner, with what the machine offers (cgroups
where they are writable), and with cgroups hidden (``cgroup.MOUNTINFO`` pointed at a missing
file) to exercise the fallback. Sizes stay small (memory_gb 0.5, writes of a few hundred MiB)
for a 2-core CI machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.errors import RunnerError
from harness.pipeline import run_submission
from harness.runners import base
from harness.runners.base import RunJob, run_process, truncate
from harness.runners.sandbox import library_address_space, sandbox_argv
from tests.conftest import REPO, SPECS, needs_bwrap
from tests.runners.test_sandbox import _package

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"
GIB = 1 << 30


NO_MOUNTINFO = Path("/nonexistent/zsl-no-mountinfo")


def _hide_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cgroup file system in sight: the fallback (subreaper and watchdog) takes over."""
    monkeypatch.setattr("harness.runners.cgroup.MOUNTINFO", NO_MOUNTINFO)


@pytest.fixture
def cgroups() -> None:
    """Tests of the cgroup path itself need a writable memory cgroup (root, or delegation)."""
    from harness.runners.cgroup import Containment

    box = Containment.start(memory_bytes=GIB, pids_max=64)
    writable = box.memory_group is not None
    box.close()
    if not writable:
        pytest.skip("no writable memory cgroup here (not root, nothing delegated)")


@pytest.fixture(params=["machine", "no-cgroups"])
def containment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with what the machine offers (cgroups here and in CI), then with no cgroup
    in sight (the fallback): either way the run must be stopped."""
    if request.param == "no-cgroups":
        _hide_cgroups(monkeypatch)
    return str(request.param)


def _run(package: Path, runner: str, match: str) -> None:
    with pytest.raises(RunnerError, match=match):
        run_submission(package, DEMO, runner=runner, store=False, quiet=True)


# -- logs (issue 10, item 4) ----------------------------------------------------------------------


def test_logs_keep_head_and_tail_exactly_like_truncate(tmp_path: Path) -> None:
    """Streaming keeps what truncate() kept of the whole: head half, tail half, bytes cut."""
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'HEAD' + bytes(range(256)) * 4000 + b'TAIL')\n"
        "sys.stderr.write('only a little')\n"
    )
    outcome = run_process([sys.executable, "-c", code], env={}, cwd=tmp_path, timeout_s=30)
    data = b"HEAD" + bytes(range(256)) * 4000 + b"TAIL"
    assert outcome.ok and outcome.stdout == truncate(data)
    assert f"[... {len(data) - 64 * 1024} bytes cut ...]" in outcome.stdout
    assert outcome.stderr == "only a little"


def test_closing_both_streams_neither_escapes_the_time_limit_nor_delays_the_end(
    tmp_path: Path,
) -> None:
    """Once stdout and stderr are closed the harness waits on the process itself (not a sleep):
    a process that closes them and runs on is still stopped at its time limit, its whole group
    killed, and one that closes them and exits ends the run without waiting out the poll."""
    runs_on = "import os, time\nos.close(1); os.close(2)\nwhile True: time.sleep(0.01)\n"
    began = time.monotonic()
    outcome = run_process([sys.executable, "-c", runs_on], env={}, cwd=tmp_path, timeout_s=1)
    assert not outcome.ok and "timed out after 1 s" in (outcome.reason or "")
    assert time.monotonic() - began < 10
    quits = "import os\nos.close(1); os.close(2)\n"
    outcome = run_process([sys.executable, "-c", quits], env={}, cwd=tmp_path, timeout_s=30)
    assert outcome.ok, outcome.reason


def test_harness_memory_stays_flat_while_a_model_prints_gigabytes(tmp_path: Path) -> None:
    """512 MiB on stdout and 256 MiB on stderr: the harness keeps ~64 KiB of each.

    The harness runs in its own process so its peak RSS is its own; buffered
    communicate() held every byte (6.3 GiB of RSS for 3 GiB printed, issue 10)."""
    flood = (
        "import sys\n"
        "chunk = b'y' * (1 << 20)\n"
        "for i in range(512):\n"
        "    sys.stdout.buffer.write(chunk)\n"
        "    if i % 2: sys.stderr.buffer.write(chunk)\n"
    )
    harness_side = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from harness.runners.base import run_process\n"
        f"o = run_process([sys.executable, '-c', {flood!r}], env={{}}, cwd=Path('.'),"
        " timeout_s=120)\n"
        "print(json.dumps({'ok': o.ok, 'out': len(o.stdout), 'err': len(o.stderr),"
        " 'tail': o.stdout[-20:], 'cut': '[... ' in o.stdout,"
        " 'hwm': open('/proc/self/status').read().split('VmHWM:')[1].split()[0]}))\n"
    )
    # cwd: the checkout under test comes first on sys.path (python -c), not an installed copy.
    done = subprocess.run(
        [sys.executable, "-c", harness_side], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["cut"] and report["tail"] == "y" * 20
    assert report["out"] < 70_000 and report["err"] < 70_000
    # Peak resident memory of this process image (VmHWM; ru_maxrss would also count the forked
    # copy of pytest before exec). A Python holding the harness: ~30-40 MiB.
    assert int(report["hwm"]) < 128 * 1024, report


# -- the run's memory: processes and /tmp together (item 6) -----------------------------------


def test_tmp_is_sized_and_file_size_follows_memory(tmp_path: Path) -> None:
    job = RunJob(tmp_path, tmp_path, "model:M", tmp_path, memory_gb=0.25)
    argv = sandbox_argv(job, as_root=True)
    i = argv.index("--tmpfs")
    assert argv[i + 1] == "/tmp" and argv[i - 2 : i] == ["--size", str(GIB // 4)]
    tail = argv[argv.index("-c") + 2 :]
    # RLIMIT_AS: the run's memory plus the environment's shared libraries; RLIMIT_FSIZE
    assert tail[0] == str(GIB // 4 + library_address_space()) and tail[3] == str(GIB // 4)


def test_the_address_space_allowance_covers_the_installed_libraries() -> None:
    """A CUDA build of torch maps ~3 GiB of libraries on import, GPU or not (the sandboxed
    import itself: `test_validate_cli.py::test_shipped_package_validates[ale]`); the allowance
    holds every shared library of torch and numpy, and grows with what is installed."""
    import numpy
    import torch

    libraries = [
        p
        for package in (torch, numpy)
        for p in Path(package.__file__).parent.rglob("*")
        if p.is_file() and (p.name.endswith(".so") or ".so." in p.name)
    ]
    assert len(libraries) > 2
    assert library_address_space() >= sum(p.stat().st_size for p in libraries)


@needs_bwrap
def test_writing_tmp_past_memory_kills_the_run(tmp_path: Path, containment: str) -> None:
    """1 GiB into /tmp with memory_gb 0.5: tmpfs pages count against the run's memory."""
    package = _package(
        tmp_path,
        """
import time
chunk = b"t" * (16 << 20)
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(chunk)
            f.flush()
except OSError as err:
    print("tmp refused:", err)
time.sleep(60)  # hold what /tmp got
""",
        memory_gb=0.5,
        time_s=40,
    )
    _run(package, "sandbox", r"memory limit of 0\.5 GiB for the whole run reached")


@needs_bwrap
@pytest.mark.parametrize("runner", ["sandbox", "local"])
def test_processes_over_memory_together_are_stopped(
    tmp_path: Path, containment: str, runner: str
) -> None:
    """Four processes of 150 MiB each, every one under RLIMIT_AS, 600 MiB > memory_gb 0.5."""
    package = _package(
        tmp_path,
        """
import subprocess, sys
hog = "import time; b = b'm' * (150 << 20); time.sleep(60)"
procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(4)]
for p in procs:
    p.wait()
""",
        memory_gb=0.5,
        time_s=40,
    )
    _run(package, runner, r"memory limit of 0\.5 GiB for the whole run reached")


# -- /out, on the host's disk (item 6) -------------------------------------------------------


@pytest.fixture
def run_folders_on_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The harness's run folders (``run_directory``, in the temporary folder) on a disk.

    On a tmpfs (.ci/run mounts one for TMPDIR) what a model writes to /out is memory, charged
    to the run's cgroup: the memory limit stops the writer before the out folder's bound can,
    which is right there but is not what the test checks."""
    path = Path(tempfile.mkdtemp(prefix="zsl-out-bound-", dir="/var/tmp"))
    kind = subprocess.run(
        ["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    if kind == "tmpfs":
        shutil.rmtree(path)
        pytest.fail("/var/tmp is a tmpfs here: this test needs a folder on a disk")
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_bwrap
@pytest.mark.parametrize("runner", ["sandbox", "local"])
def test_out_folder_past_its_bound_is_stopped(
    tmp_path: Path, runner: str, run_folders_on_disk: Path
) -> None:
    """Three files just under RLIMIT_FSIZE (memory_gb 0.5): each allowed, 1.35 GiB together."""
    package = _package(
        tmp_path,
        """
import os, time
chunk = b"o" * (15 << 20)
for n in range(3):
    with open(os.path.join(os.getcwd(), "big%d" % n), "wb") as f:
        for _ in range(30):  # 450 MiB < 512 MiB
            f.write(chunk)
            f.flush()
time.sleep(60)
""",
        memory_gb=0.5,
        time_s=40,
    )
    _run(package, runner, r"output folder exceeded its bound of 0\.5 GiB")


def test_out_bound_holds_after_a_quick_exit(tmp_path: Path) -> None:
    """A writer that exits before the next poll is still judged on what it left."""
    out = tmp_path / "out"
    out.mkdir()
    code = "open('f', 'wb').write(b'x' * (3 << 20))"
    limits = base.RunLimits(out_dir=out, out_bytes=1 << 20)
    outcome = run_process(
        [sys.executable, "-c", code], env={}, cwd=out, timeout_s=30, limits=limits
    )
    assert not outcome.ok and outcome.reason.startswith("output folder exceeded its bound")


def test_out_links_are_not_followed(tmp_path: Path) -> None:
    """A link to a big file elsewhere counts as a link, not as the file."""
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 << 20))
    out = tmp_path / "out"
    out.mkdir()
    code = f"import os; os.symlink({str(big)!r}, 'link'); os.symlink('/', 'root')"
    limits = base.RunLimits(out_dir=out, out_bytes=1 << 20)
    outcome = run_process(
        [sys.executable, "-c", code], env={}, cwd=out, timeout_s=30, limits=limits
    )
    assert outcome.ok, outcome.reason


# -- degrading where cgroups are missing --------------------------------------------------------


def test_without_cgroups_the_run_says_what_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.runners import cgroup

    _hide_cgroups(monkeypatch)
    limits = base.RunLimits(memory_bytes=GIB, pids=64)
    outcome = run_process(["true"], env={}, cwd=tmp_path, timeout_s=30, limits=limits)
    held = outcome.details["containment"]
    assert isinstance(held, dict)
    assert held["memory"] == "watchdog every 0.1 s"
    assert held["kill"] == "process tree (subreaper)"
    notes = " | ".join(held["notes"])
    assert "cgroups unavailable" in notes and "polled instead" in notes
    assert cgroup.prctl(cgroup.PR_GET_CHILD_SUBREAPER) == 0  # restored after the run


def test_cgroups_hold_the_run_and_are_removed_after(tmp_path: Path, cgroups: None) -> None:
    limits = base.RunLimits(memory_bytes=GIB // 2, pids=64)
    code = "print(open('/proc/self/cgroup').read())"
    outcome = run_process(
        [sys.executable, "-c", code], env={}, cwd=tmp_path, timeout_s=30, limits=limits
    )
    assert outcome.ok, outcome.stderr
    held = outcome.details["containment"]
    assert isinstance(held, dict) and str(held["memory"]).startswith("cgroup v")
    group = Path(str(held["memory"]).split(" ", 2)[2])
    assert f"/{group.name}" in outcome.stdout  # the process really ran inside it
    assert not group.exists()  # removed at the end


def test_out_size_skips_entries_that_vanish_during_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model renaming its own files mid-poll is not 'a folder that cannot be measured'."""
    (tmp_path / "sub").mkdir()
    for name in ("a", "b", "sub/c"):
        (tmp_path / name).write_bytes(b"x" * 1000)
    real_scandir = base.os.scandir

    def vanishing(path):  # type: ignore[no-untyped-def]
        entries = list(real_scandir(path))
        for entry in entries:  # everything listed is gone before it is looked at
            if entry.is_file():
                Path(entry.path).unlink()
        if Path(path) == tmp_path:
            (tmp_path / "sub").rename(tmp_path / "moved")

        class Listing:  # what os.scandir returns: a context manager that iterates
            def __enter__(self):  # type: ignore[no-untyped-def]
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def __iter__(self):  # type: ignore[no-untyped-def]
                return iter(entries)

        return Listing()

    monkeypatch.setattr(base.os, "scandir", vanishing)
    size, entries = base.folder_size(tmp_path)
    assert entries == 3 and size < 3000
    with pytest.raises(FileNotFoundError):
        base.folder_size(tmp_path / "no-such-folder")
