"""``zsl image build``: the worker image the container runner runs packages in.

An image holds Python 3.11 (``python`` on PATH), this harness at its exact version (built from
the harness's own source tree, so the worker inside is the worker that scores), the declared
requirements of the packages it is built for (``model.requirements``, checked by
:func:`harness.submission.package.check_requirement`) under the harness's pins
(``constraints.txt``), every module compiled ahead of time (the root file system is read-only at
run time), and a non-root user (uid :data:`CONTAINER_UID`). Its labels say the harness version,
the requirements and a digest of all of that (:data:`~harness.images.engine.LABEL_INPUTS`): an
image already built from the same inputs is not built again.

See docs/images.md.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import harness
from harness.core.errors import SubmissionError
from harness.images.engine import (
    LABEL_INPUTS,
    LABEL_REQUIREMENTS,
    LABEL_VERSION,
    ImageError,
    ImageInfo,
    engine_path,
    inspect_image,
)
from harness.submission.package import (
    MANIFEST,
    check_image_reference,
    check_requirement,
    default_worker_image,
    load_package,
)

__all__ = [
    "CONTAINER_UID",
    "BuildInputs",
    "build_command",
    "build_image",
    "collect_requirements",
    "source_tree",
]

CONTAINERFILE = Path(__file__).with_name("Containerfile")
#: The user model code runs as inside the image (not root; no name needed by the worker).
CONTAINER_UID = 10001
CPU_BASE = "python:3.11-slim"
GPU_BASE = "python:3.11-slim"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
BUILD_TIMEOUT_S = 3600
# Files of the source tree that make the harness (README.md: pyproject.toml's readme).
_TOP_FILES = ("pyproject.toml", "README.md")


@dataclass(frozen=True)
class BuildInputs:
    """Everything an image is made of besides its base: hashed into :meth:`digest`."""

    source: Path  # the harness source tree (pyproject.toml + harness/)
    requirements: tuple[str, ...]
    constraints: str  # the text of constraints.txt ("" without one)
    gpu: bool

    def files(self) -> list[Path]:
        """The source files that go into the image, sorted (no byte-code)."""
        files = [self.source / name for name in _TOP_FILES if (self.source / name).is_file()]
        for path in sorted((self.source / "harness").rglob("*")):
            if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                continue
            if path.is_file() and not path.is_symlink():
                files.append(path)
        return files

    def digest(self, base: str) -> str:
        """sha256 over the base, the harness version and files, requirements and pins."""
        h = hashlib.sha256()
        head = {
            "base": base,
            "version": harness.__version__,
            "requirements": sorted(self.requirements),
            "constraints": self.constraints,
            "gpu": self.gpu,
            "uid": CONTAINER_UID,
        }
        h.update(json.dumps(head, sort_keys=True).encode())
        for path in self.files():
            h.update(str(path.relative_to(self.source)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
        return h.hexdigest()

    def copy_source(self, dest: Path) -> Path:
        """Copy the harness's source files (only them) to ``dest``: pip builds from the copy, so
        the build never writes into the source tree."""
        for path in self.files():
            target = dest / path.relative_to(self.source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        return dest

    def labels(self, base: str) -> dict[str, str]:
        return {
            LABEL_VERSION: harness.__version__,
            LABEL_REQUIREMENTS: json.dumps(sorted(self.requirements)),
            LABEL_INPUTS: self.digest(base),
        }


def source_tree() -> Path:
    """The source tree of the running harness (``pyproject.toml`` beside the ``harness``
    package: a clone, or an editable install of one)."""
    root = Path(harness.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not (pyproject.is_file() and 'name = "zsl-harness"' in pyproject.read_text()):
        raise ImageError(
            f"{root}: no zsl-harness source tree here (pyproject.toml beside the harness"
            " package): `zsl image build` installs the harness from its source; run it from a"
            " clone (`pip install -e .`)"
        )
    return root


def _package_dirs(path: Path) -> list[Path]:
    if (path / MANIFEST).is_file():
        return [path]
    found = sorted(p.parent for p in path.glob(f"*/{MANIFEST}"))
    if not found:
        raise ImageError(
            f"{path}: neither a package ({MANIFEST}) nor a folder of packages: pass a"
            " submission folder, or a folder holding some"
        )
    return found


def collect_requirements(packages: Iterable[Path], *, gpu: bool = False) -> tuple[str, ...]:
    """The sorted, de-duplicated ``model.requirements`` of ``packages`` (package folders or
    folders of packages), each checked; ``torch`` too for a GPU image (pinned by the
    constraints)."""
    found: set[str] = {"torch"} if gpu else set()
    for path in packages:
        for folder in _package_dirs(Path(path)):
            try:
                model = load_package(folder).manifest.model
            except SubmissionError as err:
                raise ImageError(f"zsl image build --package {folder}: {err}") from None
            if model is not None:
                found.update(model.requirements)
    try:
        return tuple(sorted(check_requirement(r) for r in found))
    except ValueError as err:
        raise ImageError(f"requirement {err}") from None


def _reference(value: str, what: str) -> str:
    try:
        return check_image_reference(value)
    except ValueError as err:
        raise ImageError(f"{what}: {err}") from None


def build_command(image: str, packages: Iterable[Path] = (), *, offline: bool = False) -> str:
    """The ``zsl image build`` command line that makes ``image`` for ``packages`` (for error
    messages: the exact command to run)."""
    gpu = image.endswith("-gpu")
    parts = ["zsl image build"]
    if gpu:
        parts.append("--gpu")
    if image not in (default_worker_image(0), default_worker_image(1)):
        parts.append(f"--tag {image}")
    parts += [f"--package {p}" for p in packages]
    if offline:
        parts.append("--rootfs DIR")
    return " ".join(parts)


def _run(argv: list[str], what: str, *, quiet: bool, cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=quiet,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            cwd=cwd,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise ImageError(f"{what}: {err}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or "").strip().splitlines()[-15:]) if quiet else ""
        raise ImageError(
            f"{what} failed (exit code {done.returncode})" + (f":\n{tail}" * bool(tail))
        )


def build_online(
    engine: str, inputs: BuildInputs, base: str, tag: str, *, quiet: bool = False
) -> None:
    """``ENGINE build`` of the shipped Containerfile (needs the base image and a package index)."""
    with tempfile.TemporaryDirectory(prefix="zsl-image-") as tmp:
        context = Path(tmp)
        shutil.copyfile(CONTAINERFILE, context / "Containerfile")
        inputs.copy_source(context / "harness-src")
        (context / "constraints.txt").write_text(inputs.constraints)
        (context / "requirements.txt").write_text("".join(f"{r}\n" for r in inputs.requirements))
        argv = [engine, "build", "--file", str(context / "Containerfile"), "--tag", tag]
        argv += ["--build-arg", f"BASE={base}", "--build-arg", f"UID={CONTAINER_UID}"]
        argv += ["--build-arg", f"TORCH_INDEX={'' if inputs.gpu else TORCH_CPU_INDEX}"]
        for key, value in inputs.labels(base).items():
            argv += ["--label", f"{key}={value}"]
        _run([*argv, str(context)], f"{Path(engine).name} build of {tag}", quiet=quiet)


def build_image(
    *,
    tag: str | None = None,
    base: str | None = None,
    gpu: bool = False,
    rootfs: Path | None = None,
    packages: Iterable[Path] = (),
    engine: str | None = None,
    quiet: bool = False,
) -> tuple[ImageInfo, bool]:
    """Build the worker image ``tag`` (default: the harness's for CPU or GPU) and return it with
    whether it was built (False: an image from the same inputs was already there).

    ``rootfs``: build offline from the Debian root file system in that folder (made with
    debootstrap when missing or empty; see :mod:`harness.images.rootfs`); ``base`` is then not
    used. Otherwise ``ENGINE build`` from ``base`` (default :data:`CPU_BASE` /
    :data:`GPU_BASE`).
    """
    from harness.images import rootfs as offline  # rootfs imports this module

    tag = _reference(tag or default_worker_image(1 if gpu else 0), "--tag")
    if base is not None:
        _reference(base, "--base-image")
    path = engine_path(engine)
    source = source_tree()
    constraints = source / "constraints.txt"
    inputs = BuildInputs(
        source=source,
        requirements=collect_requirements(packages, gpu=gpu),
        constraints=constraints.read_text() if constraints.is_file() else "",
        gpu=gpu,
    )
    if rootfs is not None:
        base_id = offline.base_identity(Path(rootfs))
    else:
        base_id = _reference(base or (GPU_BASE if gpu else CPU_BASE), "--base-image")
    digest = inputs.digest(base_id)
    current = inspect_image(path, tag)
    if current is not None and current.labels.get(LABEL_INPUTS) == digest:
        return current, False
    if rootfs is not None:
        offline.build_offline(path, inputs, Path(rootfs), tag, quiet=quiet)
    else:
        build_online(path, inputs, base_id, tag, quiet=quiet)
    built = inspect_image(path, tag)
    if built is None:
        raise ImageError(f"{tag}: the build ended but the engine has no such image")
    return built, True
