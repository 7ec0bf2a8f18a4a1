"""The Python environment each runner gives model code, and whether it meets ``model.requirements``.

``sandbox`` and ``local`` run the worker with this harness's own interpreter
(``sys.executable``), whose site-packages the sandbox shows read-only: their environment is
what that interpreter has installed (:func:`~harness.submission.requirements.site_directories`).
``container`` runs the package's image: one ``zsl image build`` made carries the requirements it
was built with in its labels (checked by :meth:`ContainerRunner.resolve
<harness.runners.container.ContainerRunner.resolve>`), any other image is asked what it holds
(its Python lists its distributions' metadata, importing none, in a container without network).
:func:`check_requirements` decides, :func:`refuse_unmet` says what to do; ``zsl submission
validate`` and the plan of ``zsl run`` both call them, so a run is refused before it starts.

See docs/runners.md.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment

from harness.core.errors import HarnessError, RunnerError, SubmissionError
from harness.core.yamlio import load_document
from harness.images.build import CONTAINER_UID, build_command
from harness.images.engine import ImageError, ImageInfo, engine_path, inspect_image
from harness.runners.base import RunJob
from harness.runners.container import ContainerRunner
from harness.submission.package import MANIFEST, Package, check_requirement, default_worker_image
from harness.submission.requirements import (
    Distributions,
    UnmetRequirement,
    compare_requirements,
    site_directories,
)

__all__ = [
    "RequirementCheck",
    "check_requirements",
    "image_distributions",
    "image_for_package",
    "refuse_unmet",
]

#: The runners that run the worker with this harness's interpreter.
HOST_PYTHON_RUNNERS = ("sandbox", "local")
#: Listing an image's distributions: its wall clock, and the most its answer may hold.
LIST_TIMEOUT_S = 60.0
LIST_LIMIT_BYTES = 1 << 20
# Runs in the image as `python -I -S -c`: standard library only (any Python 3.8+), no site
# processing (no .pth file runs), nothing imported but importlib.metadata reading metadata.
# The marker environment is computed as packaging's default_environment() computes it.
LIST_DISTRIBUTIONS = """\
import importlib.metadata as m, json, os, platform, site, sys, sysconfig
paths = [*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
paths = [p for p in dict.fromkeys(paths) if os.path.isdir(p)]
found = [[d.metadata["Name"], d.version] for d in m.distributions(path=paths) if d.metadata["Name"]]
i = sys.implementation.version
iv = "%d.%d.%d" % (i.major, i.minor, i.micro)
iv += "" if i.releaselevel == "final" else i.releaselevel[0] + str(i.serial)
markers = {
    "implementation_name": sys.implementation.name, "implementation_version": iv,
    "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(), "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
}
print(json.dumps({"distributions": found, "markers": markers}))
"""
_MARKER_KEYS = frozenset(default_environment())
_listed: dict[tuple[str, str], Distributions] = {}  # (engine, image id): an id names content
_listed_lock = threading.Lock()


@dataclass(frozen=True)
class RequirementCheck:
    """A package's ``model.requirements`` against ``runner``'s environment.

    ``python``: the interpreter the runner runs (``sandbox``, ``local``), else None;
    ``image``: the container's image as the engine holds it (``reference@id``), else None;
    ``labelled``: the image was built by ``zsl image build`` with these requirements (its labels
    say so), so its metadata was not listed; ``not_here``: requirements whose marker does not
    hold in that environment (nothing to install there).
    """

    runner: str
    declared: tuple[str, ...]
    unmet: tuple[UnmetRequirement, ...]
    not_here: tuple[str, ...] = ()
    python: str | None = None
    image: str | None = None
    labelled: bool = False

    @property
    def ok(self) -> bool:
        return not self.unmet

    @property
    def environment(self) -> str:
        """Where the runner's Python is, in words."""
        if self.python is not None:
            return f"its Python: {self.python}"
        return f"image {self.image}"

    def summary(self) -> str:
        """One line for ``zsl submission validate``: what was found, where (met checks)."""
        unmet = {u.requirement for u in self.unmet}
        met = [r for r in self.declared if r not in unmet and r not in self.not_here]
        how = "built into" if self.labelled else "installed for"
        parts = []
        if met:
            parts.append(f"{', '.join(met)} {how} runner '{self.runner}' ({self.environment})")
        if self.not_here:
            parts.append(f"not for this environment (marker): {', '.join(self.not_here)}")
        return "model.requirements: " + "; ".join(parts)


def _python_environment(runner: str, declared: tuple[str, ...]) -> RequirementCheck:
    report = compare_requirements(declared, Distributions.installed(site_directories()))
    return RequirementCheck(runner, declared, report.unmet, report.not_here, python=sys.executable)


def _engine() -> str:
    """The container engine's executable (``ZSL_CONTAINER_ENGINE``, else docker)."""
    try:
        return engine_path(ContainerRunner().engine)
    except ImageError as err:
        raise RunnerError(f"runner 'container': {err}") from None


def _container_environment(package: Package, declared: tuple[str, ...]) -> RequirementCheck:
    engine = _engine()
    model = package.manifest.model
    assert model is not None
    job = RunJob(
        bundle=package.root,
        package=package.root,
        entrypoint=model.entrypoint,
        out=package.root,
        gpus=package.manifest.resources.gpus,
    )
    # Present, of this harness version, and (built by the harness) with these requirements:
    # the runner's own checks, each saying what to do.
    info = ContainerRunner().resolve(engine, job)
    if info.requirements is not None:
        return RequirementCheck("container", declared, (), image=info.pinned, labelled=True)
    report = compare_requirements(declared, image_distributions(engine, info))
    return RequirementCheck("container", declared, report.unmet, report.not_here, image=info.pinned)


def check_requirements(package: Package, runner: str) -> RequirementCheck | None:
    """``package``'s ``model.requirements`` against the environment ``runner`` gives it; None
    when it declares none (nothing is asked of any engine then), or for a runner added to the
    registry whose environment the harness does not know.

    Raises :class:`RunnerError` where the container's image is missing, of another harness
    version, built without them (what to build, as the runner says), or cannot be listed.
    """
    model = package.manifest.model
    if model is None or not model.requirements:
        return None
    declared = tuple(model.requirements)
    if runner in HOST_PYTHON_RUNNERS:
        return _python_environment(runner, declared)
    if runner == "container":
        return _container_environment(package, declared)
    return None


def _requirements_line(package: Package) -> int | None:
    """The line of ``model.requirements`` in the package's ``submission.yaml``."""
    try:
        text = (package.root / MANIFEST).read_text(encoding="utf-8")
        _, lines = load_document(text, MANIFEST)
    except (OSError, UnicodeDecodeError, HarnessError):  # loaded once already: unlikely
        return None
    return lines.get(("model", "requirements"))


def refuse_unmet(
    check: RequirementCheck | None,
    package: Package,
    *,
    shown: str | Path | None = None,
    spec: str | Path | None = None,
) -> None:
    """Raise a :class:`SubmissionError` listing every unmet requirement of ``check`` and what
    to do, unless all are met. ``shown``: the package as the user named it (default: its
    folder), in the commands the message gives; ``spec``: the spec of those commands."""
    if check is None or check.ok:
        return
    root = str(shown if shown is not None else package.root)
    line = _requirements_line(package)
    where = f"{Path(root) / MANIFEST}{'' if line is None else f':{line}'}"
    count = f"{len(check.unmet)} of {len(check.declared)}"
    lines = [
        f"{where}: model.requirements: {count} not met by runner '{check.runner}'"
        f" ({check.environment}):",
        *(f"  {unmet}" for unmet in check.unmet),
    ]
    wanted = " ".join(shlex.quote(u.requirement) for u in check.unmet)
    image = default_worker_image(package.manifest.resources.gpus)
    build = build_command(image, [Path(root)])
    run = f"zsl run {shlex.quote(root)} --spec {spec if spec is not None else 'SPEC'}"
    if check.python is not None:
        lines += [
            f"Run it in a container: `{build}`, then `{run} --runner container` (a run without"
            " --runner picks that image once it exists).",
            f"Or install them into the Python runner '{check.runner}' uses:"
            f" `{shlex.quote(check.python)} -m pip install {wanted}`",
        ]
    else:
        reference = (check.image or image).split("@", 1)[0]
        lines.append(
            f"Add them to image '{reference}', or build one with them:"
            f" `{build_command(reference, [Path(root)])}`"
        )
    raise SubmissionError("\n".join(lines))


def image_for_package(package: Package) -> str | None:
    """The image the container engine holds *for* ``package``, which a run without
    ``--runner`` then runs it in: its ``model.image``, or the harness's worker image when
    ``zsl image build --package`` built it with every requirement the package declares.
    None when there is none, or no engine answers."""
    model = package.manifest.model
    if model is None or not (model.image or model.requirements):
        return None
    reference = model.image or default_worker_image(package.manifest.resources.gpus)
    try:
        engine = _engine()
        info = inspect_image(engine, reference)
    except HarnessError:
        return None
    if info is None:
        return None
    if model.image:
        return reference
    held = info.requirements or []
    return reference if all(check_requirement(r) in held for r in model.requirements) else None


def image_distributions(engine: str, info: ImageInfo) -> Distributions:
    """What ``info``'s Python has installed (:data:`LIST_DISTRIBUTIONS`, run in a container
    without network, capabilities or a writable root), once per image id and engine."""
    key = (engine, info.id)
    with _listed_lock:
        if key in _listed:
            return _listed[key]
    name = f"zsl-list-{uuid.uuid4().hex}"
    argv = [
        engine, "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges", "--pids-limit", "64", "--memory", "512m",
        "--user", f"{CONTAINER_UID}:{CONTAINER_UID}", "--name", name,
        "--", info.id, "python", "-I", "-S", "-c", LIST_DISTRIBUTIONS,
    ]  # fmt: skip
    what = f"runner 'container': listing what image '{info.reference}' holds"
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors
            )
        except OSError as err:
            raise RunnerError(f"{what}: {err}") from None
        timer = threading.Timer(LIST_TIMEOUT_S, proc.kill)
        timer.start()
        data = b""
        try:
            assert proc.stdout is not None
            data = proc.stdout.read(LIST_LIMIT_BYTES + 1)
        finally:
            timer.cancel()
            if proc.poll() is None and len(data) > LIST_LIMIT_BYTES:
                proc.kill()
            proc.wait()
            if proc.returncode != 0:  # killed or failed: the container may outlive its client
                subprocess.run(
                    [engine, "rm", "-f", name], stdin=subprocess.DEVNULL, capture_output=True,
                    timeout=60, check=False,
                )  # fmt: skip
        errors.seek(0)
        tail = errors.read()[-2000:].decode("utf-8", "replace").strip().splitlines()[-3:]
    if proc.returncode != 0 or len(data) > LIST_LIMIT_BYTES:
        why = "answered more than 1 MiB" if len(data) > LIST_LIMIT_BYTES else (
            f"exit code {proc.returncode}" + (f": {' | '.join(tail)}" if tail else "")
        )  # fmt: skip
        raise RunnerError(
            f"{what} failed ({why}): the image needs a `python` (3.8 or later) on its PATH"
        )
    listed = _parse_listing(data, what)
    with _listed_lock:
        _listed[key] = listed
    return listed


def _parse_listing(data: bytes, what: str) -> Distributions:
    """The listing's JSON, checked field by field (the image is not the harness's)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # nesting: RecursionError
        raise RunnerError(f"{what}: unreadable answer {data[:200]!r}") from None
    pairs = value.get("distributions") if isinstance(value, dict) else None
    markers = value.get("markers") if isinstance(value, dict) else None
    if not isinstance(pairs, list) or not isinstance(markers, dict):
        raise RunnerError(f"{what}: the answer lacks 'distributions' or 'markers'")
    found = []
    for pair in pairs:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(p, str) and 0 < len(p) <= 200 for p in pair)
        ):
            raise RunnerError(f"{what}: a distribution is not a [name, version] pair: {pair!r:.80}")
        found.append((pair[0], pair[1]))
    kept = {k: v for k, v in markers.items() if k in _MARKER_KEYS and isinstance(v, str)}
    return Distributions.from_pairs(found, kept)
