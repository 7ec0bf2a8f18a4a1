"""``leaderboard/ci.yaml``: which benchmarks CI scores a submission package on.

Contract: :func:`load_ci_config` reads the file through the harness's one YAML + pydantic loader
(:func:`harness.yamlio.load_model_file`: bounded, no repeated key), so every problem is reported as
``file:line: key.path: message``, like a spec's. :func:`config_spec_paths` turns the listed spec
files into paths under the repository that holds the configuration, refusing absolute paths,
``..`` and missing files at the line that names them. Reads files; runs nothing.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harness import yamlio
from harness.ci.git import find_repo_root
from harness.errors import HarnessError

__all__ = ["CI_CONFIG", "CIConfig", "config_root", "config_spec_paths", "load_ci_config"]

#: The CI configuration, relative to the repository root.
CI_CONFIG = PurePosixPath("leaderboard/ci.yaml")


class CIConfig(BaseModel):
    """``leaderboard/ci.yaml``: which benchmarks CI scores a submission package on."""

    model_config = ConfigDict(extra="forbid")

    specs: list[str] = Field(
        min_length=1, description="benchmark spec files, relative to the repository root"
    )
    _lines: dict[yamlio.Loc, int] = PrivateAttr(default_factory=dict)

    def where(self, path: Path, loc: yamlio.Loc) -> str:
        """``path:line: key.path`` for a problem at ``loc`` (no line: not read from a file)."""
        line = f":{yamlio.line_of(self._lines, loc)}" if self._lines else ""
        return f"{path}{line}: {yamlio.key_path(loc)}"


def load_ci_config(path: Path) -> CIConfig:
    """Read and validate the CI configuration at ``path``; errors name the file, line and key."""
    config, lines = yamlio.load_model_file(path, CIConfig, what="CI configuration")
    config._lines = lines
    return config


def config_spec_paths(config: CIConfig, repo_root: Path, config_path: Path) -> list[Path]:
    """The spec files of ``config`` as paths under ``repo_root``; each must exist."""
    paths = []
    for index, spec in enumerate(config.specs):
        path = repo_root / spec
        where = config.where(config_path, ("specs", index))
        if PurePosixPath(spec).is_absolute() or ".." in PurePosixPath(spec).parts:
            raise HarnessError(f"{where}: {spec!r} must be a relative path")
        if not path.is_file():
            raise HarnessError(f"{where}: {spec!r} not found under {repo_root}")
        paths.append(path)
    return paths


def config_root(config_path: Path, fallback: Path) -> Path:
    """The repository holding the CI configuration: its spec paths are relative to it."""
    try:
        return find_repo_root(Path(config_path).absolute().parent)
    except HarnessError:
        return fallback
