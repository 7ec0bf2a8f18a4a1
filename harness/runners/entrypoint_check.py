"""Does a model package's entrypoint run as a model? Checked inside a runner, never here.

See docs/runners.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import HarnessError, RunnerError
from harness.core.tempdirs import run_directory
from harness.core.yamlio import load_document
from harness.runners import default_runner, runners
from harness.runners.base import RunJob
from harness.runners.outputs import CHECK_JSON, CHECK_JSON_LIMIT, OutputDir
from harness.submission.package import MANIFEST
from harness.submission.resources import cap_resources, effective_caps

if TYPE_CHECKING:
    from harness.submission.package import Package

__all__ = [
    "EntrypointCheck",
    "EntrypointProblem",
    "check_entrypoint",
    "describe",
    "read_check",
]

#: The check's wall clock at most (importing a deep-learning framework takes a while).
CHECK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class EntrypointProblem:
    """One thing that keeps the entrypoint from running: where (package file, line) and what."""

    file: str | None
    line: int | None
    message: str

    def __str__(self) -> str:
        if self.file is None:
            return self.message
        return f"{self.file}{'' if self.line is None else f':{self.line}'}: {self.message}"


@dataclass(frozen=True)
class EntrypointCheck:
    """What the check found, and which runner ran it."""

    entrypoint: str
    runner: str
    problems: tuple[EntrypointProblem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def read_check(out: Path) -> list[EntrypointProblem]:
    """The findings in ``out/check.json``, checked field by field (model code could write
    there too; the worker refuses a planted file, this refuses a malformed one)."""
    with OutputDir(out) as folder:
        value = folder.read_json(CHECK_JSON, limit=CHECK_JSON_LIMIT)
    where = out / CHECK_JSON
    items = value.get("problems")
    if not isinstance(items, list):
        raise RunnerError(f"{where}: 'problems' must be a list")
    problems = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise RunnerError(f"{where}: problems[{index}] must be an object")
        file, line, message = item.get("file"), item.get("line"), item.get("message")
        if not isinstance(message, str) or not (file is None or isinstance(file, str)):
            raise RunnerError(f"{where}: problems[{index}] needs a message and a file or null")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 1):
            raise RunnerError(f"{where}: problems[{index}].line must be a positive integer")
        problems.append(EntrypointProblem(file, line, message))
    return problems


def _entrypoint_line(package: Package) -> int | None:
    """The line of ``model.entrypoint`` in the package's ``submission.yaml``."""
    try:
        text = (package.root / MANIFEST).read_text(encoding="utf-8")
        _, lines = load_document(text, MANIFEST)
    except (OSError, UnicodeDecodeError, HarnessError):  # loaded once already: unlikely
        return None
    return lines.get(("model", "entrypoint"))


def check_entrypoint(package: Package, runner: str | None = None) -> EntrypointCheck:
    """Import ``package``'s entrypoint in ``runner`` (default: the one a run would use) and
    check it against the model protocol (see docs/runners.md). A check that does not
    finish (an import that hangs past the wall clock, a crash) is a problem too."""
    model = package.manifest.model
    if model is None:
        raise ValueError(f"{package.root}: a predictions package has no entrypoint to check")
    runner = runner or default_runner(package)
    # Capped like a run's (this machine's caps): a declared 100000 GB must not size the check's
    # sandbox either. Its GPUs do not matter here (none is given), so they are not checked.
    resources = cap_resources(package.manifest.resources, effective_caps()).resources
    with run_directory("zsl-check-") as tmp:  # the check's out folder: whatever the model left
        bundle, out = tmp / "bundle", tmp / "out"
        bundle.mkdir()
        out.mkdir()
        job = RunJob(
            bundle=bundle,
            package=package.root,
            entrypoint=model.entrypoint,
            out=out,
            seed=package.manifest.seed,
            timeout_s=min(CHECK_TIMEOUT_S, float(resources.time_s)),
            memory_gb=resources.memory_gb,
            cpus=resources.cpus,
            # No data, so no GPU: a class whose __init__ needs one cannot be checked here.
            gpus=0,
            check=True,
        )
        outcome = runners.get(runner).run(job)
        if not outcome.ok:
            found = [EntrypointProblem(None, None, f"the check did not finish: {outcome.reason}")]
        else:
            found = read_check(out)
    line = _entrypoint_line(package)
    problems = tuple(
        EntrypointProblem(p.file, line, p.message) if p.file == MANIFEST and p.line is None else p
        for p in found
    )
    return EntrypointCheck(model.entrypoint, runner, problems)


def describe(check: EntrypointCheck) -> list[str]:
    """The check as lines for the user: one per problem, or that it passed."""
    where = f"checked in runner '{check.runner}'"
    if check.ok:
        name = check.entrypoint.split(":")[1]
        return [
            f"entrypoint {check.entrypoint}: imports, builds with {name}() and has fit(task),"
            f" save(directory), load(directory) and predict(features, candidates) ({where})"
        ]
    return [str(p) for p in check.problems]
