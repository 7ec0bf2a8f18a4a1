"""What ``zsl`` imports to start (issue 14 item 15, issue 28 item 3).

The time itself is measured in ``bench/cli_startup.py`` (targets: 0.3 s for every ``--help``,
0.8 s to import ``harness.cli.run``); here, what makes it: which modules a fresh process imports
for ``zsl --version``, ``zsl --help`` and each command's ``--help`` (its cli module, none of its
implementation: :func:`harness.core.lazy.lazy_module` binds that), that loading a spec imports
no ``scipy.stats``, and that every lazy entry (commands, metric families, data adapters, the
modules the CLI binds lazily) resolves to what it names, so a typo in a ``"module:object"``
string cannot hide until a user runs that command.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.core import TyperCommand, TyperGroup
from typer.testing import CliRunner

from harness.cli import ci, hierarchy, results
from harness.cli.main import COMMANDS, app, commands, load_command
from harness.data import ADAPTERS, adapters
from harness.metrics import FAMILIES, Metric, metrics

#: Libraries that cost from a tenth of a second to seconds to import; none is needed to print
#: the version, the list of commands or a command's help.
HEAVY = ("numpy", "scipy", "nltk", "sqlalchemy", "sqlmodel", "jinja2", "pydantic", "torch")
#: What no command's ``--help`` needs: NumPy, SciPy (scoring), NLTK (opening WordNet), torch
#: (extracting features), the store's SQLAlchemy and SQLModel, the site's Jinja2. (pydantic
#: itself is Typer's: it builds every option's converter with it.)
NEVER_FOR_HELP = (
    "numpy",
    "scipy",
    "nltk",
    "torch",
    "torchvision",
    "sqlalchemy",
    "sqlmodel",
    "jinja2",
)
#: Beside the CLI itself, the only harness packages a command's ``--help`` may import from.
LIGHT_HARNESS = ("harness.cli", "harness.core")
#: Single modules outside those a ``--help`` may import too, and why (each imports no NumPy).
LIGHT_MODULES = {
    "harness": "the package's __init__: the version",
    "harness.runners": "names the backends for --runner's help and imports none",
    # what `zsl embeddings build --help` lists: the text models and --normalize's choices
    "harness.features": "the package of harness.features.text_models; imports nothing",
    "harness.features.text_models": "the text models' catalogue",
}

_PROBE = """
import json, sys
from harness.cli.main import main
sys.argv = ["zsl", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def _imported(words: list[str]) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(words)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _top(modules: list[str], names: tuple[str, ...]) -> set[str]:
    return {m.split(".")[0] for m in modules} & set(names)


@pytest.mark.parametrize("words", [["--version"], ["--help"], []], ids=["version", "help", "bare"])
def test_version_and_help_import_no_command_module(words: list[str]) -> None:
    modules = _imported(words)
    assert _top(modules, HEAVY) == set()
    assert [m for m in modules if m.startswith("harness.cli.") and m != "harness.cli.main"] == []
    assert [m for m in modules if m.startswith("harness.metrics")] == []


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_commands_help_imports_only_its_own_module_and_nothing_heavy(name: str) -> None:
    modules = _imported([name, "--help"])
    own = COMMANDS[name].target.partition(":")[0]
    assert own in modules
    others = {c.target.partition(":")[0] for c in COMMANDS.values()} - {own}
    # submission reuses run's --runner help; classmap and embeddings the WordNet options.
    shared = {"harness.cli.run", "harness.cli.hierarchy"}
    assert sorted(others & set(modules) - shared) == []
    assert _top(modules, NEVER_FOR_HELP) == set()
    implementation = [m for m in modules if m.startswith("harness.") and not _light(m)]
    assert implementation == []


def _light(module: str) -> bool:
    return module in LIGHT_MODULES or any(
        module == p or module.startswith(p + ".") for p in LIGHT_HARNESS
    )


def _lazy_bindings() -> list[str]:
    """The module names every ``lazy_module("...")`` call under harness/cli binds."""
    names = []
    for path in sorted(Path("harness/cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "lazy_module"
            ):
                assert isinstance(node.args[0], ast.Constant), f"{path}: a literal name"
                names.append(node.args[0].value)
    return sorted(set(names))


def test_the_cli_binds_its_implementation_lazily_and_every_name_resolves() -> None:
    # A misspelt lazy_module name would fail only when its command runs: import each here.
    names = _lazy_bindings()
    assert "harness.pipeline" in names and "harness.store" in names
    for name in names:
        importlib.import_module(name)


def test_what_the_cli_spells_to_stay_light_equals_its_source() -> None:
    # Option help and defaults the CLI spells itself, so defining them imports no implementation.
    from harness.ci import pr
    from harness.hierarchy import wordnet
    from harness.results import reproduction, store_io

    assert hierarchy.WORDNET_DIR_ENV == wordnet.ENV_DIR
    assert hierarchy.WORDNET_LEXNAMES_ENV == wordnet.ENV_LEXNAMES
    assert results.RUN_NAME_FORM == store_io.RUN_NAME_FORM
    assert results.SCORE_TOLERANCE == reproduction.SCORE_TOLERANCE
    assert ci.SITE_DIRNAME == pr.SITE_DIRNAME
    assert ci.DIFF_FILENAME == pr.DIFF_FILENAME


def test_loading_a_spec_imports_no_scipy_stats() -> None:
    code = (
        "import sys, harness.cli.run\n"
        "from harness.spec import load_spec\n"
        "load_spec('specs/demo.yaml')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'nltk', 'torch')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_entry_resolves(name: str) -> None:
    target = commands.get(name)
    module, _, attribute = COMMANDS[name].target.partition(":")
    assert target is getattr(importlib.import_module(module), attribute)
    assert isinstance(target, typer.Typer) or callable(target)
    command = load_command(name)
    assert isinstance(command, TyperGroup | TyperCommand) and command.name == name
    if isinstance(target, typer.Typer):
        # A sub-app's help is the table's line, held there only.
        assert isinstance(command, TyperGroup) and command.help == COMMANDS[name].help
        assert not isinstance(target.info.help, str)
    else:
        assert _first_paragraph(target) == COMMANDS[name].help


def _first_paragraph(function: Callable[..., object]) -> str:
    doc = (function.__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def test_every_metric_family_registers_metrics_and_no_other_module_does() -> None:
    # Reading the registry imports every family: each registers at least one metric, and each
    # built-in metric's function is in a listed family (a test's toy metrics are not built in).
    modules = set()
    for name, metric in metrics.items():
        assert isinstance(metric, Metric) and metric.name == name
        modules.add(getattr(metric.compute, "func", metric.compute).__module__)
    assert {m for m in modules if m.startswith("harness.")} == set(FAMILIES)
    # A module that registers metrics but is missing from FAMILIES registers them only when
    # something else happens to import it: find every module that imports register_metric.
    registering = set()
    for path in Path("harness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and any(
                alias.name == "register_metric" for alias in node.names
            ):
                registering.add(".".join(path.with_suffix("").parts))
    assert registering - {"harness.metrics.__init__"} == set(FAMILIES)


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_every_adapter_entry_resolves_to_the_adapter_its_module_registers(name: str) -> None:
    adapter = adapters.get(name)
    assert adapter.name == name and type(adapter).__module__ == ADAPTERS[name]


def test_zsl_help_lists_every_command_with_its_line() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name, command in COMMANDS.items():
        assert f" {name} " in result.output
        assert command.help[:60] in result.output


def test_an_unknown_command_is_refused_as_before() -> None:
    result = CliRunner().invoke(app, ["nonsense"])
    assert result.exit_code == 2 and "No such command 'nonsense'" in result.output
    result = CliRunner().invoke(app, ["spce"])
    assert result.exit_code == 2 and "Did you mean 'spec'?" in result.output
