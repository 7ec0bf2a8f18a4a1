"""How long the command line takes to start, from a fresh process each time (issue 28 item 3).

Measured: ``zsl --version``, ``zsl --help``, ``--help`` of every command and subcommand (the
tree walked from :data:`harness.cli.main.COMMANDS`, nested groups included), each target
< 0.3 s; and ``python -c "import harness.cli.run"`` (what ``zsl run`` imports before it does
anything), target < 0.8 s. Each runs ``repeat`` times as its own process (the console script
beside this Python); the best time is reported, as the other benchmarks do.

``python bench/cli_startup.py [--repeat N] [--only WORD ...]`` prints the JSON report;
``--only`` keeps the commands whose words include one of those given (``--only run spec``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HELP_TARGET_SECONDS = 0.3
IMPORT_RUN_TARGET_SECONDS = 0.8


def _zsl() -> str:
    return str(Path(sys.executable).with_name("zsl"))


def command_paths() -> list[list[str]]:
    """The words of every command of ``zsl``, groups before their subcommands."""
    from harness.cli.main import COMMANDS, load_command

    paths: list[list[str]] = []

    def walk(command: object, words: list[str]) -> None:
        paths.append(words)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*words, name])

    for name in COMMANDS:
        walk(load_command(name), [name])
    return paths


def _best(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return round(min(times), 3)


def measure(repeat: int = 3, only: list[str] | None = None) -> dict[str, Any]:
    runs: list[tuple[str, list[str], float]] = [
        ("zsl --version", [_zsl(), "--version"], HELP_TARGET_SECONDS),
        ("zsl --help", [_zsl(), "--help"], HELP_TARGET_SECONDS),
    ]
    for words in command_paths():
        if only is None or set(words) & set(only):
            runs.append(
                (
                    " ".join(["zsl", *words, "--help"]),
                    [_zsl(), *words, "--help"],
                    HELP_TARGET_SECONDS,
                )
            )
    runs.append(
        (
            'python -c "import harness.cli.run"',
            [sys.executable, "-c", "import harness.cli.run"],
            IMPORT_RUN_TARGET_SECONDS,
        )
    )
    results = {
        name: {"seconds": _best(argv, repeat), "target_seconds": target}
        for name, argv, target in runs
    }
    missed = sorted(name for name, r in results.items() if r["seconds"] >= r["target_seconds"])
    return {
        "repeat": repeat,
        "commands": results,
        "missed": missed,
        "targets_met": not missed,
    }


if __name__ == "__main__":
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="+", default=None)
    args = parser.parse_args()
    print(json.dumps(measure(args.repeat, args.only), indent=1))
