"""Shared fixtures: every test gets its own ZSL_HOME and never touches the user's cache or DB."""

from __future__ import annotations

import compileall
import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

# A pytest-xdist worker starts with COLUMNS=80 in its environment; rich fixes the width of the
# harness's consoles (made on import, below) to it, and the ``terminal_width`` fixture could not
# widen them. Without it they read COLUMNS as they print, as in a run without xdist.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

from harness.runners.sandbox import available as sandbox_available
from harness.store import count_runs, create_tables, make_engine

if TYPE_CHECKING:
    from harness.records import RunRecord

# Tests import reference submissions' model.py files; byte-code cached into submissions/* would
# make those packages invalid (packages may hold no byte-code). Set before any test module loads.
sys.dont_write_bytecode = True

REPO = Path(__file__).resolve().parents[1]

# The harness's own byte-code, written here once (pytest-xdist's controller loads this file
# before it starts the workers; a worker finds it current and only reads the times). Nothing
# else would write it: the line above stops this session's imports, and every model process
# runs with PYTHONDONTWRITEBYTECODE=1 (as may the whole machine: this one sets it for every
# process). On a clean checkout each of the suite's ~2,000 model processes compiled the
# worker's modules from source again (60-100 ms of its ~300).
compileall.compile_dir(REPO / "harness", quiet=2)  # a read-only tree: no cache, no noise

SPECS = REPO / "specs"
SUBMISSIONS = REPO / "submissions"
SHARED_DATA = Path(os.environ.get("ZSL_SHARED_DATA", REPO.parent / "shared" / "data"))
#: A stand-in container engine CLI that runs the worker on this machine (runner 'container').
FAKE = Path(__file__).with_name("fake_container_cli.py")

#: The terminal width the command line renders for (rich reads ``COLUMNS``): wide and fixed, so
#: a message that names a temporary path is not wrapped where the path happens to be long (under
#: pytest-xdist every path gains a ``popen-gwN`` folder). Tests of wrapping set their own.
COLUMNS = "200"


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM/SIGHUP (a CI timeout, `kill`, SIGTERM to `make test`, which make passes on)
    end the session as Ctrl-C does: pytest then tears its fixtures down, and the servers the
    session started stop (store_fixtures' PostgreSQL cluster, container_fixture's dockerd);
    Python's default action for SIGTERM exits at once and left both running. Further signals
    are ignored while it winds down (whoever sent them can still SIGKILL)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    raise KeyboardInterrupt(f"{signal.Signals(signum).name}: tearing the session down")


def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGHUP, _interrupt)


@dataclass(frozen=True)
class DemoRun:
    """One `zsl demo` over every shipped submission (a copy of them), into a site and a store."""

    exit_code: int
    output: str
    site: Path
    database_url: str


def made_once(
    tmp_path_factory: pytest.TempPathFactory,
    worker_id: str,
    name: str,
    make: Callable[[Path], object],
) -> Path:
    """The folder ``make(folder)`` fills, made once for the whole session, pytest-xdist workers
    included: the first worker to ask makes it under a file lock, the others wait for it and get
    the same folder. Tests only read it (a test that changes it works on a copy)."""
    # pytest-xdist workers share the parent of their base temporary folders.
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    root, done = shared / name, shared / f"{name}.done"
    with FileLock(shared / f"{name}.lock"):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)  # a worker interrupted while making it
            root.mkdir()
            make(root)
            done.touch()
    return root


def _run_demo(root: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli.main import app

    # A copy: a prediction-file package's generator writes its files into the package.
    submissions = root / "submissions"
    shutil.copytree(SUBMISSIONS, submissions)
    site, url = root / "site", f"sqlite:///{root / 'runs.sqlite3'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_HOME", str(root / "zsl-home"))
        patch.setenv("COLUMNS", COLUMNS)
        patch.delenv("ZSL_DATABASE_URL", raising=False)
        result = CliRunner().invoke(
            app,
            [
                "demo",
                "--spec",
                str(SPECS / "demo.yaml"),
                "--submissions",
                str(submissions),
                "--out",
                str(site),
                "--database-url",
                url,
            ],
        )
    fields = {"exit_code": result.exit_code, "output": result.output, "site": str(site)}
    (root / "demo-run.json").write_text(json.dumps({**fields, "url": url}))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> DemoRun:
    """`zsl demo` run once for the whole session, pytest-xdist workers included (about 90 s):
    the tests that check its site and its records only read them (tests/cli/test_cli.py,
    tests/test_demo_records.py, and through :func:`demo_record` the reference packages'
    tests)."""
    root = made_once(tmp_path_factory, worker_id, "demo-run", _run_demo)
    fields = json.loads((root / "demo-run.json").read_text())
    return DemoRun(fields["exit_code"], fields["output"], Path(fields["site"]), fields["url"])


@pytest.fixture(scope="session")
def demo_record(demo_run: DemoRun) -> Callable[[str], RunRecord]:
    """``demo_record(name)``: the record `zsl demo` (:func:`demo_run`, default runner) stored
    for shipped package ``name``; the tests that compare another run with it (determinism,
    local vs sandbox) only read it."""
    from harness.store import load_runs

    assert demo_run.exit_code == 0, demo_run.output
    engine = make_engine(demo_run.database_url)
    records = {record.submission.name: record for record in load_runs(engine)}
    engine.dispose()

    def record(name: str) -> RunRecord:
        return records[name]

    return record


@pytest.fixture(scope="session")
def xlsa17_release(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Callable[..., Path]:
    """``xlsa17_release(root, dataset, dim=64)``: ``root/dataset`` as
    :func:`tests.xlsa17_fixture.make_release` writes it, copied from one made once per session
    for each dataset and dimension (:func:`made_once`): the same arguments write the same
    bytes, and writing the synthetic res101.mat took 1-2 s of CPU at each of the suite's
    ~30 calls. The copy is the caller's to change."""
    from tests.xlsa17_fixture import make_release

    def release(root: Path, dataset: str, *, dim: int = 64) -> Path:
        made = made_once(
            tmp_path_factory,
            worker_id,
            f"xlsa17-{dataset}-{dim}d",
            lambda folder: make_release(folder, dataset, dim=dim),
        )
        return Path(shutil.copytree(made / dataset, Path(root) / dataset))

    return release


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("zsl-home")
    monkeypatch.setenv("ZSL_HOME", str(home))
    monkeypatch.delenv("ZSL_DATABASE_URL", raising=False)
    return home


@pytest.fixture(autouse=True)
def terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", COLUMNS)


# bwrap is probed once; CI installs it, so sandbox tests run there.
needs_bwrap = pytest.mark.skipif(
    not sandbox_available(),
    reason="bubblewrap (bwrap) is missing or cannot create a sandbox here",
)


def stored_runs(url: str) -> int:
    """How many runs the store at ``url`` holds (0 for a store never written)."""
    engine = make_engine(url)
    create_tables(engine)
    return count_runs(engine)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A fresh SQLite store for one test."""
    return f"sqlite:///{tmp_path / 'runs.sqlite3'}"


WORDNET_DIR = Path(os.environ.get("ZSL_WORDNET_DIR", "/usr/share/wordnet"))
WORDNET_LEXNAMES = Path(
    os.environ.get("ZSL_WORDNET_LEXNAMES", SHARED_DATA / "wordnet" / "lexnames")
)


@pytest.fixture
def wordnet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """WordNet 3.0 for the code under test (Debian's wordnet-base + the shared lexnames)."""
    if not ((WORDNET_DIR / "data.noun").is_file() and WORDNET_LEXNAMES.is_file()):
        pytest.skip("WordNet 3.0 (apt-get install wordnet-base) or the shared lexnames absent")
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(WORDNET_DIR))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(WORDNET_LEXNAMES))


@pytest.fixture(scope="session")
def docker_session() -> Iterator[object]:
    """A real docker engine with the worker image (``tests/container_fixture.py``), or why not."""
    from tests.container_fixture import docker_engine

    with docker_engine() as engine:
        yield engine


@pytest.fixture
def docker(docker_session: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The session's engine for one test (``DOCKER_HOST`` set); skips without one (fails under
    ``ZSL_REQUIRE_DOCKER=1``), and checks that the test left no ``zsl-`` container behind."""
    from tests.container_fixture import Engine, containers_left_behind, unavailable, zsl_containers

    if not isinstance(docker_session, Engine):
        unavailable(str(docker_session))
    assert isinstance(docker_session, Engine)
    monkeypatch.setenv("DOCKER_HOST", docker_session.docker_host)
    monkeypatch.delenv("ZSL_CONTAINER_ENGINE", raising=False)
    before = zsl_containers(docker_session.docker_host)
    yield docker_session
    left = containers_left_behind(docker_session.docker_host, before)
    assert left == [], f"containers left behind: {left}"


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the fake engine CLI (:data:`FAKE`) on PATH as ``docker``; returns its argv log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "docker.log"
    wrapper = bin_dir / "docker"
    wrapper.write_text(
        f'#!/bin/sh\nexport FAKE_CONTAINER_LOG="{log}"\nexec "{sys.executable}" "{FAKE}" "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("ZSL_CONTAINER_ENGINE", raising=False)
    monkeypatch.delenv("FAKE_CONTAINER_MODE", raising=False)
    return log


@pytest.fixture(autouse=True)
def audit_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leakage audit's inputs from the shared data, where present and not set already.

    A benchmark whose features were pre-trained on ImageNet classes is frozen with its leakage
    audit, which needs the class lists and WordNet 3.0 (``harness.audit.plan_audit``); like the
    other shared data, tests find them through their variables with these defaults. Tests of
    their absence remove them with ``monkeypatch.delenv``.
    """
    set_audit_inputs(monkeypatch)


def set_audit_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """What :func:`audit_inputs` sets, for fixtures of a wider scope (which run before it)."""
    defaults = {
        "ZSL_IMAGENET_DIR": SHARED_DATA / "imagenet" / "ilsvrc2012_synsets.txt",
        "ZSL_WORDNET_DIR": WORDNET_DIR / "data.noun",
        "ZSL_WORDNET_LEXNAMES": WORDNET_LEXNAMES,
    }
    if not all(path.is_file() for path in defaults.values()):
        return
    for name, path in defaults.items():
        if not os.environ.get(name):
            monkeypatch.setenv(name, str(path if name == "ZSL_WORDNET_LEXNAMES" else path.parent))
