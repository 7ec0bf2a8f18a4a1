"""``leaderboard/ci.yaml``: which benchmarks CI scores a submission package on.

Contract: :func:`load_ci_config` reads the file through the harness's one YAML + pydantic loader
(:func:`harness.core.yamlio.load_model_file`: bounded, no repeated key), so every problem is
reported as
``file:line: key.path: message``, like a spec's. :func:`config_spec_paths` turns the listed spec
files into paths under the repository that holds the configuration, refusing absolute paths,
``..`` and missing files at the line that names them. ``max_resources`` caps what any package
gets on CI, whatever its ``resources`` declare (:meth:`CIConfig.resource_caps`, applied by
``zsl ci pr`` together with the CI machine's own caps: :mod:`harness.submission.resources`).
``allowed_data_suffixes`` widens what a package may hold beyond source and the harness's
declared data formats (:meth:`harness.submission.package.Package.undeclared_files`).
Reads files; runs nothing.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from harness.ci.git import find_repo_root
from harness.core import yamlio
from harness.core.errors import HarnessError
from harness.submission.resources import ResourceCaps

__all__ = [
    "CI_CONFIG",
    "CIConfig",
    "MaxResources",
    "config_root",
    "config_spec_paths",
    "load_ci_config",
]

#: The CI configuration, relative to the repository root.
CI_CONFIG = PurePosixPath("leaderboard/ci.yaml")
_SUFFIX = re.compile(r"\.[a-z0-9_+-]+")


def _check_suffix(value: str) -> str:
    """``value`` if it is one file suffix as :attr:`pathlib.PurePath.suffix` gives it, lowercase
    (``.xyz``); a ValueError naming it otherwise."""
    if not _SUFFIX.fullmatch(value):
        raise ValueError(
            f"{value[:40]!r} is not a file suffix: a dot, then lowercase letters, digits, _, + or"
            " - ('.h5'; the last suffix only, so '.gz' rather than '.tar.gz')"
        )
    return value


Suffix = Annotated[str, AfterValidator(_check_suffix)]


class MaxResources(BaseModel):
    """``max_resources`` of the CI configuration: the most any package's run gets on CI.

    The defaults fit a GitHub-hosted runner (2 CPUs, 7 GB of memory, no GPU) and a pull
    request that should finish within the hour; a leaderboard on bigger runners raises them.
    A package declaring more CPUs, memory or time than these runs with these (CI's report and
    ``zsl submission validate`` say so); one declaring more GPUs is refused.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: int = Field(2, gt=0, description="CPUs (math-library threads) of one run")
    memory_gb: float = Field(
        8.0, gt=0, allow_inf_nan=False, description="memory of one run, its /tmp included, in GB"
    )
    time_s: int = Field(3600, gt=0, description="wall clock of one run, in seconds")
    gpus: int = Field(0, ge=0, description="GPUs of one run (0: GPU packages are refused)")


class CIConfig(BaseModel):
    """``leaderboard/ci.yaml``: which benchmarks CI scores a submission package on, the most
    resources a package's run gets there, and the file suffixes a package may hold besides
    source and declared data."""

    model_config = ConfigDict(extra="forbid")

    specs: list[str] = Field(
        min_length=1, description="benchmark spec files, relative to the repository root"
    )
    allowed_data_suffixes: list[Suffix] = Field(
        default_factory=list,
        description="suffixes of files a package may hold besides source and the harness's"
        " declared data formats (.npy, .npz, .safetensors, .csv, .tsv)",
    )
    max_resources: MaxResources = Field(
        default_factory=MaxResources,
        description="the most CPUs, memory (GB), time (s) and GPUs any package's run gets",
    )
    _lines: dict[yamlio.Loc, int] = PrivateAttr(default_factory=dict)

    def resource_caps(self, shown: str = CI_CONFIG.name) -> ResourceCaps:
        """``max_resources`` as caps, each naming its key in the configuration ``shown`` (how
        the report names the file) as its source."""
        limits = self.max_resources
        return ResourceCaps(
            cpus=limits.cpus,
            memory_gb=limits.memory_gb,
            time_s=limits.time_s,
            gpus=limits.gpus,
            sources={
                name: f"the leaderboard's {shown} `max_resources.{name}`"
                for name in ("cpus", "memory_gb", "time_s", "gpus")
            },
        )

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
