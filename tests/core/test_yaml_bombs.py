"""YAML bombs are refused fast, in every YAML the harness reads.

Attack (issue 10, item 13): a ~1 KB "billion laughs" spec (anchors whose aliases nest nine deep)
ran ``zsl spec validate`` past 60 s and 3.3 GB. Rule: every YAML the harness reads (specs,
``submission.yaml``, ``leaderboard/ci.yaml``, manifests read out of git) goes through
:mod:`harness.core.yamlio`, which refuses a document whose alias expansion, nesting depth, node or
alias count, or size passes a bound, with ``file:line: what; refused``, before anything walks or
constructs it. Each case runs in-process twice: once timed, once under ``tracemalloc``; an alarm
turns a loader that does not stop into a failure instead of a hung test.
"""

from __future__ import annotations

import os
import signal
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.ci import load_ci_config
from harness.cli.main import app
from harness.core import yamlio
from harness.core.errors import HarnessError, SpecError, SubmissionError
from harness.spec import load_spec, parse_spec
from harness.submission.package import load_package
from tests import hostile
from tests.conftest import REPO, SPECS, SUBMISSIONS

MAX_SECONDS = 3.0
MAX_PEAK_BYTES = 64 * 1024 * 1024
ALARM_SECONDS = 30
DEMO_TEXT = (SPECS / "demo.yaml").read_text()
MANIFEST = (SUBMISSIONS / "eszsl" / "submission.yaml").read_text()
CI_TEXT = "specs:\n  - specs/demo.yaml\n"
LAUGHS_LINE = hostile.first_level_over(yamlio.MAX_NODES) + 1


@contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the loader was still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _refused_fast(load: Callable[[], object], error: type[HarnessError]) -> str:
    """Run ``load`` (which must raise ``error``) timed, then under tracemalloc; its message."""
    with _alarm(ALARM_SECONDS):
        start = time.perf_counter()
        with pytest.raises(error) as info:
            load()
        elapsed = time.perf_counter() - start
        tracemalloc.start()
        try:
            with pytest.raises(error):
                load()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert elapsed < MAX_SECONDS, f"refused, but only after {elapsed:.1f} s"
    assert peak < MAX_PEAK_BYTES, f"refused, but after allocating {peak / 2**20:.0f} MiB"
    return str(info.value)


# The three kinds of YAML file, each with the loader that reads it: (prefix text, write, load).
def _spec(tmp_path: Path, text: str) -> tuple[Path, Callable[[], object], type[HarnessError]]:
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    return path, lambda: load_spec(path), SpecError


def _manifest(tmp_path: Path, text: str) -> tuple[Path, Callable[[], object], type[HarnessError]]:
    root = hostile.copy_eszsl(tmp_path)
    path = root / "submission.yaml"
    path.write_text(text)
    return path, lambda: load_package(root), SubmissionError


def _ci(tmp_path: Path, text: str) -> tuple[Path, Callable[[], object], type[HarnessError]]:
    path = tmp_path / "ci.yaml"
    path.write_text(text)
    return path, lambda: load_ci_config(path), HarnessError


KINDS = {"spec": (_spec, DEMO_TEXT), "submission.yaml": (_manifest, MANIFEST), "ci": (_ci, CI_TEXT)}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_billion_laughs(tmp_path: Path, kind: str) -> None:
    make, honest = KINDS[kind]
    bomb = hostile.billion_laughs()
    assert len(bomb) < 1024
    path, load, error = make(tmp_path, bomb + honest)
    assert _refused_fast(load, error) == (
        f"{path}:{LAUGHS_LINE}: this YAML node expands to more than {yamlio.MAX_NODES} nodes"
        " with its aliases expanded (an alias bomb?); refused"
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_deep_nesting(tmp_path: Path, kind: str) -> None:
    make, _ = KINDS[kind]
    path, load, error = make(tmp_path, "x: " + hostile.deep_nesting(100_000))
    assert _refused_fast(load, error) == (
        f"{path}:1: YAML nested more than {yamlio.MAX_DEPTH} levels deep; refused"
    )


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_huge_document(tmp_path: Path, kind: str) -> None:
    make, honest = KINDS[kind]
    filler = "# " + "x" * 1000 + "\n"
    path, load, error = make(tmp_path, honest + filler * 8 * 1024)  # 8 MiB of comments
    assert _refused_fast(load, error) == (
        f"{path}: larger than the {yamlio.MAX_BYTES}-byte limit for YAML; refused"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("a: &a [x, *a]\n", 1, "a YAML alias refers to a node that contains it"),
        (
            "a: &a {k: v}\nb: [" + ", ".join(["*a"] * (yamlio.MAX_ALIASES + 1)) + "]\n",
            2,
            f"more than {yamlio.MAX_ALIASES} YAML aliases",
        ),
        (
            # a chain of aliases, each one level deeper: few nodes, deep once expanded
            "\n".join(
                ["l0: &l0 [x]"]
                + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, 2 * yamlio.MAX_DEPTH)]
            )
            + "\n",
            yamlio.MAX_DEPTH,
            f"YAML nested more than {yamlio.MAX_DEPTH} levels deep with its aliases expanded",
        ),
        (
            "x: [" + ", ".join(["1"] * 200_000) + "]\n",
            1,
            f"more than {yamlio.MAX_NODES} YAML nodes",
        ),
    ],
    ids=["recursive-alias", "too-many-aliases", "alias-chain-depth", "too-many-nodes"],
)
def test_other_bounds(text: str, line: int, what: str) -> None:
    assert _refused_fast(lambda: parse_spec(text, "bomb.yaml"), SpecError) == (
        f"bomb.yaml:{line}: {what}; refused"
    )


def test_zsl_spec_validate_refuses_the_bomb_fast(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(hostile.billion_laughs() + DEMO_TEXT)
    with _alarm(ALARM_SECONDS):
        start = time.perf_counter()
        result = CliRunner().invoke(app, ["spec", "validate", str(path)])
        elapsed = time.perf_counter() - start
    assert result.exit_code == 1
    assert "alias bomb" in result.output and "Traceback" not in result.output
    assert elapsed < MAX_SECONDS


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    root = hostile.copy_eszsl(tmp_path)
    (root / "submission.yaml").unlink()
    os.mkfifo(root / "submission.yaml")
    spec = tmp_path / "spec.yaml"
    os.mkfifo(spec)
    with _alarm(10):
        with pytest.raises(SubmissionError) as info:
            load_package(root)
        assert str(info.value) == f"{root / 'submission.yaml'}: not a regular file; refused"
        with pytest.raises(SpecError) as spec_info:
            load_spec(spec)
        assert str(spec_info.value) == f"{spec}: not a regular file; refused"


def test_duplicate_keys_in_submission_yaml(tmp_path: Path) -> None:
    # safe_load keeps the last value silently: a reviewer would read one entrypoint, the harness
    # would run another.
    root = hostile.copy_eszsl(tmp_path)
    path = root / "submission.yaml"
    path.write_text(MANIFEST.replace("seed: 0\n", "seed: 0\nkind: model\n"))
    line = len(MANIFEST.splitlines()) + 1
    first = MANIFEST.splitlines().index("kind: model") + 1
    with pytest.raises(SubmissionError) as info:
        load_package(root)
    assert (
        str(info.value) == f"{path}:{line}: duplicate key 'kind' (first at line {first}); refused"
    )


SHIPPED = sorted(
    [*SPECS.rglob("*.yaml"), *SUBMISSIONS.glob("*/submission.yaml"), REPO / "leaderboard/ci.yaml"]
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_shipped_yaml_loads_as_before(path: Path) -> None:
    text = path.read_text()
    assert yamlio.load(yamlio.read_text(path), str(path)) == yaml.safe_load(text)


def test_merge_keys_and_shared_anchors_still_load() -> None:
    text = "base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  c: 3\ny: [*b, *b]\n"
    assert yamlio.load(text, "ok.yaml") == yaml.safe_load(text)
