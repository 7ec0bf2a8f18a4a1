"""One option name per concept across the ``zsl`` commands, and the docs' list of them.

Issue 14 item 14: the records folder was ``--from`` in one command, ``--out`` in another and
``--results`` in a third, and ``--base`` meant a git revision in ``zsl ci`` but a base image in
``zsl image build``. These tests walk every command of the app and hold it to the "Option names"
table of ``docs/guides/cli.md``: every option declared is listed there, every option listed is declared,
and each option spelling is one parameter (one concept) wherever it appears.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.cli.main import COMMANDS, app, load_command

OPTION_NAMES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "cli.md"
#: Options every typer app has; not ours to name.
TYPER_OWN = {"--help", "--install-completion", "--show-completion"}


def _commands() -> dict[str, list[tuple[str, str]]]:
    """``"zsl results export"`` -> [(option spelling, parameter name)] for every command."""
    found: dict[str, list[tuple[str, str]]] = {}

    def walk(command: object, path: list[str]) -> None:
        children = getattr(command, "commands", None)
        if children:
            for name, sub in children.items():
                walk(sub, [*path, name])
        options = [
            (spelling, param.name)
            for param in getattr(command, "params", [])
            if not type(param).__name__.endswith("Argument")
            for spelling in [*param.opts, *param.secondary_opts]
            if spelling.startswith("--") and spelling not in TYPER_OWN
        ]
        found[" ".join(path)] = options

    walk(typer.main.get_command(app), ["zsl"])  # zsl's own options (its commands load lazily)
    for name in COMMANDS:
        walk(load_command(name), ["zsl", name])
    return found


def _documented_options() -> set[str]:
    """The options named in the first column of the docs' "Option names" table."""
    text = OPTION_NAMES_PAGE.read_text(encoding="utf-8")
    head = text.index("| option |", text.index("## Option names"))
    table = text[head : text.index("\n\n", head)]
    names: set[str] = set()
    for line in table.splitlines()[2:]:
        first_cell = line.split("|")[1]
        names.update(re.findall(r"--[a-z][a-z0-9-]*", first_cell))
    return names


def test_every_option_spelling_is_one_parameter_everywhere() -> None:
    params_of: dict[str, set[str]] = defaultdict(set)
    spellings_of: dict[str, set[str]] = defaultdict(set)
    for options in _commands().values():
        for spelling, param in options:
            params_of[spelling].add(param)
            spellings_of[param].add(spelling)
    assert {s: p for s, p in params_of.items() if len(p) > 1} == {}
    assert {p: s for p, s in spellings_of.items() if len(s) > 1} == {}


def test_the_docs_list_exactly_the_options_the_commands_declare() -> None:
    declared = {spelling for options in _commands().values() for spelling, _ in options}
    listed = _documented_options()
    assert sorted(declared - listed) == [], "options missing from docs/guides/cli.md's Option names"
    assert sorted(listed - declared) == [], "docs/guides/cli.md lists options no command declares"


def test_the_records_folder_is_results_in_every_command() -> None:
    commands = _commands()
    for name in ("results export", "results import", "leaderboard build", "ci pr", "ci publish"):
        assert ("--results", "results") in commands[f"zsl {name}"], name
    everywhere = {spelling for options in commands.values() for spelling, _ in options}
    # The old spellings of the same concepts are gone, with no alias left behind.
    assert everywhere.isdisjoint({"--from", "--dir", "--output", "--results-dir"})
    assert ("--base-image", "base_image") in commands["zsl image build"]
    assert ("--base", "base") in commands["zsl ci pr"]


@pytest.mark.parametrize(
    ("argv", "old"),
    [
        (["results", "import", "--from", "x"], "--from"),
        (["submission", "init", "pkg", "--dir", "x"], "--dir"),
        (["image", "build", "--base", "python:3.11-slim"], "--base"),
    ],
)
def test_old_spellings_are_refused_by_name(argv: list[str], old: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert f"No such option: {old}" in result.output
