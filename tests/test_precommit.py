"""The pre-commit hooks run what `make lint` and `make typecheck` run, and download nothing."""

from __future__ import annotations

import os
import re
import subprocess

import yaml

from tests.conftest import REPO


def _make_recipe(target: str) -> list[str]:
    """The commands of ``target`` in the Makefile, with ``$(BIN)`` spelled ``.venv/bin``."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert found is not None, f"no `{target}` target in the Makefile"
    return [line.strip().replace("$(BIN)/", ".venv/bin/") for line in found[1].splitlines()]


def test_the_hooks_are_the_makefile_lint_and_typecheck_commands() -> None:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # nothing to download
    hooks = config["repos"][0]["hooks"]
    assert [hook["entry"] for hook in hooks] == _make_recipe("lint") + _make_recipe("typecheck")
    for hook in hooks:
        assert hook["language"] == "system", hook["id"]
        assert hook["pass_filenames"] is False, hook["id"]  # the whole tree, as make does


def _make_commands(target: str, *variables: str) -> list[str]:
    """What ``make TARGET VARIABLES`` runs, its variables expanded (``make -n``), the install
    steps it depends on left out."""
    # Run under `make test` too: not as a sub-make of it (no MAKEFLAGS, no "Entering directory").
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    found = subprocess.run(
        ["make", "-n", "--no-print-directory", "-o", "install-features", target, *variables],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.strip() for line in found.stdout.splitlines()]


def test_the_suite_runs_on_two_workers_and_test_fast_leaves_out_only_the_slow_marker() -> None:
    # the same tests on pytest-xdist workers (PYTEST_WORKERS=0: in one process)
    workers = "-n 2 --dist worksteal"
    assert _make_commands("pytest") == [f".venv/bin/python -m pytest -q {workers}"]
    assert _make_commands("test-fast") == [f'.venv/bin/python -m pytest -q -m "not slow" {workers}']
    assert _make_commands("pytest", "PYTEST_WORKERS=0") == [".venv/bin/python -m pytest -q"]
    assert _make_commands("pytest", "PYTEST_WORKERS=3") == [
        ".venv/bin/python -m pytest -q -n 3 --dist worksteal"
    ]
