"""The ``zsl`` command: composes one sub-app per module (spec, data, hierarchy, …).

:data:`COMMANDS` is the table of commands: each name, its ``"module:object"`` (a sub-app or a
command function) and its one-line help, the help ``zsl --help`` lists. :data:`commands` holds
them as lazy registry entries, so a command's module is imported only when that command runs
(or prints its own ``--help``): ``zsl --version`` and ``zsl --help`` import none, and ``zsl
spec --help`` imports ``harness.cli.spec`` and what it needs, not the store, the site builder,
NLTK or torch. :class:`LazyCommands` is the click group that does it: it lists every command
from the table and loads one when click resolves it. ``app`` is the same whether a test drives
it or the ``zsl`` script runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer import _click as click  # Typer vendors click: its groups are this click's classes
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo

import harness
from harness.core.lazy import lazy_module
from harness.core.registry import Registry

if TYPE_CHECKING:
    from harness.cli import _common
else:
    # Holds --debug for every command: imported when a command runs, so that `zsl --help` and
    # `zsl --version` import no command module (Rich's console among them).
    _common = lazy_module("harness.cli._common")

__all__ = ["COMMANDS", "Command", "LazyCommands", "app", "commands", "main"]


@dataclass(frozen=True)
class Command:
    """A ``zsl`` command: ``target`` (``"module:object"``) is a ``typer.Typer`` sub-app or a
    command function; ``help`` is its one line in ``zsl --help``, and a sub-app's own help."""

    target: str
    help: str


COMMANDS: dict[str, Command] = {
    "run": Command(
        "harness.cli.run:run", "Prepare, validate, run, score and store submissions on benchmarks."
    ),
    "demo": Command(
        "harness.cli.run:demo",
        "Run every shipped submission on the demo benchmark and build the leaderboard site.",
    ),
    "spec": Command(
        "harness.cli.spec:app", "Validate benchmark specs and print their JSON Schema."
    ),
    "data": Command("harness.cli.data:app", "Freeze benchmarks under ZSL_HOME and verify them."),
    "hierarchy": Command(
        "harness.cli.hierarchy:app", "Build and inspect frozen class hierarchies."
    ),
    "submission": Command(
        "harness.cli.submission:app",
        "Start and validate submission packages; write their prediction files.",
    ),
    "metrics": Command(
        "harness.cli.metrics:app", "List the registered metrics and their parameters."
    ),
    "classmap": Command(
        "harness.cli.classmap:app", "Draft, check and freeze class → WordNet maps."
    ),
    "leaderboard": Command(
        "harness.cli.board:app", "Build the static leaderboard site from the store."
    ),
    "ci": Command(
        "harness.cli.ci:app",
        "The leaderboard CI's steps: changed packages, score a pull request, publish the site.",
    ),
    "results": Command(
        "harness.cli.results:app",
        "Run records in git (export, import), re-scoring, and managing stored runs (list, "
        "delete, hide, unhide).",
    ),
    "image": Command("harness.cli.image:app", "Build worker images for runner 'container'."),
    "features": Command(
        "harness.cli.features:app",
        "Extract image features with torchvision backbones into frozen, hashed feature sets.",
    ),
    "embeddings": Command(
        "harness.cli.embeddings:app",
        "Build frozen class embeddings from class names and glosses with offline text models.",
    ),
    "doctor": Command(
        "harness.cli.doctor:doctor",
        "Show where every input and optional component is found, and how to provide the rest.",
    ),
}

#: Each command's sub-app or function, imported on first use.
commands: Registry[typer.Typer | Callable[..., Any]] = Registry("command")
for _name, _command in COMMANDS.items():
    commands.add_lazy(_name, _command.target)

HELP = "Declarative zero-shot learning benchmarks, honest scoring, a static leaderboard."

#: Each loaded command as click sees it, built once per process (tests invoke ``app`` often).
_loaded: dict[str, click.Command] = {}


def load_command(name: str) -> click.Command:
    """Command ``name`` as click runs it: its module imported, its sub-app or function built."""
    if name not in _loaded:
        target = commands.get(name)
        if isinstance(target, typer.Typer):
            # A group even with one command (``zsl leaderboard build``), as add_typer makes it.
            command: click.Command = typer.main.get_group(target)
            command.help = COMMANDS[name].help
        else:
            command = typer.main.get_command_from_info(
                CommandInfo(name=name, callback=target),
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
        command.name = name
        _loaded[name] = command
    return _loaded[name]


class LazyCommands(TyperGroup):
    """The ``zsl`` group: lists every command of :data:`COMMANDS` with its one-line help, and
    imports a command's module only when click resolves that command to run it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Stand-ins (name and help, nothing imported) for listing, completion and "did you
        # mean"; a command that runs replaces its stand-in.
        for name, command in COMMANDS.items():
            self.commands[name] = _loaded.get(name) or TyperCommand(name, help=command.help)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in COMMANDS:
            self.commands[args[0]] = load_command(args[0])
        return super().resolve_command(ctx, args)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"zsl-harness {harness.__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="zsl",
    help=HELP,
    cls=LazyCommands,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks of known errors")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Declarative zero-shot learning benchmarks, honest scoring, a static leaderboard."""
    _common.state.debug = debug


def main() -> None:
    app()


if __name__ == "__main__":
    main()
