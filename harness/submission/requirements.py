"""Does a Python environment meet a package's ``model.requirements``? Decided from metadata.

A requirement (PEP 508, checked by :func:`harness.submission.package.check_requirement`) is met
when the environment holds a distribution of that name (compared canonically: ``Scikit_Learn``
is ``scikit-learn``) whose version its specifier allows; one whose marker does not hold there
(``; python_version < "3"``) asks for nothing. The environment is what its installed
distributions' metadata says (:class:`Distributions`), never what importing them would do:
nothing here imports a package. Extras (``name[extra]``) are not followed: the distribution
itself is checked. Which environment a runner gives a model is
:mod:`harness.runners.environments`' business.

See docs/submission.md.
"""

from __future__ import annotations

import site
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = [
    "Distributions",
    "RequirementReport",
    "UnmetRequirement",
    "compare_requirements",
    "site_directories",
]


@dataclass(frozen=True)
class Distributions:
    """A Python environment as the check sees it: ``versions``, the version of each installed
    distribution by canonical name (the first found where several are, as imports resolve),
    and ``markers``, its PEP 508 marker environment (``python_version``, ``sys_platform``...)."""

    versions: Mapping[str, str]
    markers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_pairs(
        cls, pairs: Iterable[tuple[str, str]], markers: Mapping[str, str] | None = None
    ) -> Distributions:
        """From ``(name, version)`` pairs in path order; the first of each name wins."""
        versions: dict[str, str] = {}
        for name, version in pairs:
            versions.setdefault(canonicalize_name(name), version)
        return cls(versions, dict(markers or {}))

    @classmethod
    def installed(cls, paths: Sequence[str]) -> Distributions:
        """The distributions whose metadata lies in the folders ``paths`` (read, not imported),
        with this interpreter's marker environment."""
        pairs = []
        for dist in metadata.distributions(path=list(paths)):
            name = dist.metadata["Name"]
            if isinstance(name, str) and name:
                pairs.append((name, dist.version))
        return cls.from_pairs(pairs, {k: str(v) for k, v in default_environment().items()})


def site_directories() -> list[str]:
    """The folders this interpreter installs distributions into and imports them from by
    default: its site-packages (a venv's, and the system's where the venv includes them),
    without the user's (every runner sets ``PYTHONNOUSERSITE``) and without ``PYTHONPATH``
    (no runner passes it on)."""
    found = [*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class UnmetRequirement:
    """A declared requirement the environment does not meet: ``installed`` is the version it
    holds (outside the specifier), None when it holds no such distribution."""

    requirement: str
    name: str
    installed: str | None

    def __str__(self) -> str:
        if self.installed is None:
            return f"{self.requirement}: {self.name} is not installed"
        return f"{self.requirement}: {self.name} {self.installed} is installed"


def _allows(requirement: Requirement, version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:  # not PEP 440: no specifier can be said to allow it
        return not requirement.specifier
    # As `pip check` decides: a pre-release installed counts if the range holds it.
    return requirement.specifier.contains(parsed, prereleases=True)


@dataclass(frozen=True)
class RequirementReport:
    """Declared requirements against one environment: ``unmet``, every one it does not meet
    (in declared order), and ``not_here``, those whose marker does not hold there."""

    unmet: tuple[UnmetRequirement, ...]
    not_here: tuple[str, ...]


def compare_requirements(declared: Sequence[str], env: Distributions) -> RequirementReport:
    """``declared`` (PEP 508 strings, already checked) against ``env``: all of them, not up
    to the first unmet one."""
    unmet, not_here = [], []
    for text in declared:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(dict(env.markers)):
            not_here.append(text)  # pip would not install it there either
            continue
        installed = env.versions.get(canonicalize_name(requirement.name))
        if installed is None or not _allows(requirement, installed):
            unmet.append(UnmetRequirement(text, requirement.name, installed))
    return RequirementReport(tuple(unmet), tuple(not_here))
