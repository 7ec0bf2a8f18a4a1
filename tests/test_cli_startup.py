"""``zsl --version`` and ``zsl --help`` import no command module (issue 14, item 15).

The time itself is measured in ``bench/cli_startup.py`` (target < 0.5 s); here, what makes it:
which modules a fresh process imports, that the registry's one-line helps are each module's
own, and that the lazily built command lists and runs the same commands as the whole one.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from harness.cli.main import COMMANDS, build_app, invoked_command

#: Libraries that cost seconds to import on a cold disk; none is needed to print the version
#: or the list of commands.
HEAVY = ("numpy", "scipy", "nltk", "sqlalchemy", "sqlmodel", "jinja2", "pydantic", "torch")

_PROBE = """
import json, sys
from harness.cli.main import main
sys.argv = ["zsl", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("harness.", "numpy", "scipy",
    "nltk", "sqlalchemy", "sqlmodel", "jinja2", "pydantic", "torch")))))
"""


def _imported(words: list[str]) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(words)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("words", [["--version"], ["--help"], []], ids=["version", "help", "bare"])
def test_version_and_help_import_no_command_module(words: list[str]) -> None:
    modules = _imported(words)
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []
    assert [m for m in modules if m.startswith("harness.cli.") and m != "harness.cli.main"] == []


def test_a_command_imports_only_its_own_module() -> None:
    modules = _imported(["spec", "--help"])
    commands = {m for m in modules if m.startswith("harness.cli.")}
    assert "harness.cli.spec" in commands
    assert not commands & {"harness.cli.board", "harness.cli.ci", "harness.cli.results"}


def _own_help(name: str) -> str:
    entry = COMMANDS[name]
    target = getattr(importlib.import_module(entry.module), entry.attribute)
    if isinstance(target, typer.Typer):
        return str(target.info.help)
    doc = inspect.getdoc(target) or ""
    return " ".join(doc.split("\n\n")[0].split())


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_registry_help_is_the_modules_own(name: str) -> None:
    assert COMMANDS[name].help == _own_help(name)


def test_the_lazy_command_lists_every_command_the_whole_one_has() -> None:
    runner = CliRunner()
    env = {"COLUMNS": "200"}
    lazy = runner.invoke(build_app([]), ["--help"], env=env)
    whole = runner.invoke(build_app(), ["--help"], env=env)
    assert lazy.exit_code == whole.exit_code == 0
    assert lazy.output == whole.output
    for name in COMMANDS:
        assert f" {name} " in lazy.output


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], None),
        (["--version"], None),
        (["--debug", "run", "x"], "run"),
        (["results", "export"], "results"),
        (["nonsense"], None),
        (["--", "run"], None),
    ],
)
def test_invoked_command(argv: list[str], expected: str | None) -> None:
    assert invoked_command(argv) == expected


def test_an_unknown_command_is_refused_as_before() -> None:
    result = CliRunner().invoke(build_app([]), ["nonsense"])
    assert result.exit_code == 2 and "No such command 'nonsense'" in result.output
