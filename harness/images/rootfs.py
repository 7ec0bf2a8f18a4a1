"""The offline image build (``zsl image build --rootfs DIR``): no registry, no ``ENGINE build``.

See docs/images.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.core.home import zsl_home
from harness.images.build import CONTAINER_UID, BuildInputs, _run
from harness.images.engine import ImageError

__all__ = [
    "assemble",
    "base_identity",
    "build_offline",
    "rootfs_python",
]

DEBIAN_SUITE = "bookworm"
KEEP = 3
# Left out of the tree: documentation, translations, apt's package caches and lists.
_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale")
_EMPTY = ("var/cache/apt", "var/lib/apt/lists")
ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
)


def make_base(dest: Path, *, suite: str = DEBIAN_SUITE, mirror: str | None = None) -> None:
    """``debootstrap`` a minimal Debian with Python into ``dest`` (made whole or not at all)."""
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageError(
            f"{dest}: no root file system there, and debootstrap is not installed to make one:"
            " `apt-get install debootstrap`, or pass --rootfs a folder holding a Debian root"
            " file system with python3"
        )
    if os.geteuid() != 0:
        raise ImageError(f"{dest}: debootstrap needs root to make a root file system; run as root")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    argv = [
        debootstrap,
        "--variant=minbase",
        "--include=python3,python-is-python3",
        suite,
        str(work),
    ]
    if mirror:
        argv.append(mirror)
    try:
        _run(argv, f"debootstrap {suite} into {dest}", quiet=True)
        if dest.exists():
            dest.rmdir()  # an empty folder the user named
        work.rename(dest)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def rootfs_python(base: Path) -> str:
    """The Python minor version (``3.11``) of the root file system at ``base``."""
    python3 = base / "usr" / "bin" / "python3"
    target = os.readlink(python3) if python3.is_symlink() else python3.name
    match = re.fullmatch(r"python(3\.\d+)", Path(target).name)
    if match is None or not (base / "usr" / "bin" / Path(target).name).exists():
        raise ImageError(
            f"{base}: not a root file system with Python (usr/bin/python3 -> python3.X): make"
            f" one with `debootstrap --variant=minbase --include=python3,python-is-python3"
            f" {DEBIAN_SUITE} {base}`, or pass an empty folder and the harness makes it"
        )
    return match[1]


def base_identity(base: Path) -> str:
    """What the base contributes to the image digest: its installed packages (dpkg's status
    file) and Python version. A missing or empty folder is the debootstrap it will get."""
    if not base.exists() or (base.is_dir() and not any(base.iterdir())):
        return f"debootstrap:{DEBIAN_SUITE}:minbase:python3,python-is-python3"
    version = rootfs_python(base)
    status = base / "var" / "lib" / "dpkg" / "status"
    listing = status.read_bytes() if status.is_file() else str(sorted(os.listdir(base))).encode()
    return f"rootfs:python{version}:sha256:{hashlib.sha256(listing).hexdigest()}"


def _pip_install(inputs: BuildInputs, site: Path, tmp: Path, *, quiet: bool) -> None:
    source = inputs.copy_source(tmp / "harness-src")
    constraints = tmp / "constraints.txt"
    constraints.write_text(inputs.constraints)
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site)]
    argv.append("--no-compile")
    argv += ["--no-warn-script-location", "--disable-pip-version-check", "--no-input"]
    if importlib.util.find_spec("setuptools") is not None:
        argv.append("--no-build-isolation")  # the harness builds with this environment's
    argv += ["-c", str(constraints), str(source), *inputs.requirements]
    _run(argv, "pip install into the root file system", quiet=quiet)
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: nothing runs them


def _add_user(tree: Path) -> None:
    passwd, group = tree / "etc" / "passwd", tree / "etc" / "group"
    line = f"zsl:x:{CONTAINER_UID}:{CONTAINER_UID}:zsl worker:/out:/usr/sbin/nologin\n"
    if f":{CONTAINER_UID}:" not in passwd.read_text():
        with passwd.open("a") as handle:
            handle.write(line)
    if f":{CONTAINER_UID}:" not in group.read_text():
        with group.open("a") as handle:
            handle.write(f"zsl:x:{CONTAINER_UID}:\n")


def _trim(tree: Path) -> None:
    for rel in _TRIM:
        shutil.rmtree(tree / rel, ignore_errors=True)
    for rel in _EMPTY:
        folder = tree / rel
        if folder.is_dir():
            for entry in folder.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)


def _compile(tree: Path, version: str) -> None:
    """Byte-compile the tree's Python with this interpreter (same minor version, so the same
    byte-code), paths as the image sees them."""
    folders = [tree / "usr" / "lib" / f"python{version}"]
    folders += [tree / "usr" / "local" / "lib" / f"python{version}" / "dist-packages"]
    argv = [sys.executable, "-m", "compileall", "-q", "-j", "0", "-s", str(tree), "-p", "/"]
    argv += ["--invalidation-mode", "unchecked-hash", *[str(f) for f in folders if f.is_dir()]]
    # Exit 1 when any file does not compile (test data with Python 2 syntax): not our concern.
    subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=1800)


def assemble(inputs: BuildInputs, base: Path, digest: str, *, quiet: bool = False) -> Path:
    """The image's file tree for ``inputs`` on ``base``, from the cache or made now."""
    cache = zsl_home() / "images" / "rootfs"
    tree = cache / digest
    if (tree / ".zsl-complete").is_file():
        os.utime(tree)
        return tree
    version = rootfs_python(base)
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    if version != mine:
        raise ImageError(
            f"{base}: its Python is {version}, this harness runs on {mine}: pip installs wheels"
            f" for {mine}. Use a root file system with Python {mine} (Debian {DEBIAN_SUITE} has"
            " 3.11) or run the harness on its Python"
        )
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}.", dir=cache))
    try:
        _run(["cp", "-a", "--", f"{base}/.", str(work)], f"copy of {base}", quiet=True)
        _trim(work)
        site = work / "usr" / "local" / "lib" / f"python{version}" / "dist-packages"
        site.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="zsl-pip-") as tmp:
            _pip_install(inputs, site, Path(tmp), quiet=quiet)
        _compile(work, version)
        python = work / "usr" / "bin" / "python"
        if not python.exists() and not python.is_symlink():
            python.symlink_to("python3")
        _add_user(work)
        (work / "out").mkdir(exist_ok=True)
        (work / ".zsl-complete").write_text(digest + "\n")
        shutil.rmtree(tree, ignore_errors=True)
        work.rename(tree)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    _prune(cache, keep=tree)
    return tree


def _prune(cache: Path, keep: Path) -> None:
    trees = [p for p in cache.iterdir() if p.is_dir() and (p / ".zsl-complete").is_file()]
    trees.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in trees if p != keep][KEEP - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def _label(key: str, value: str) -> str:
    """A ``LABEL`` instruction for ``--change``: the value double-quoted, quotes escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'LABEL {key}="{escaped}"'


def import_tree(engine: str, tree: Path, tag: str, labels: dict[str, str]) -> None:
    """``tar -C TREE -c . | ENGINE import`` with the image's user, workdir, env and labels."""
    changes = [f"USER {CONTAINER_UID}:{CONTAINER_UID}", "WORKDIR /out"]
    changes += [f"ENV {item}" for item in ENV]
    changes += [_label(k, v) for k, v in labels.items()]
    argv = [engine, "import"]
    for change in changes:
        argv += ["--change", change]
    argv += ["-", tag]
    tar_argv = ["tar", "--numeric-owner", "--exclude", "./.zsl-complete", "-C", str(tree)]
    tar_argv += ["-c", "."]
    with tempfile.TemporaryFile() as errors:
        tar = subprocess.Popen(tar_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            done = subprocess.run(argv, stdin=tar.stdout, stdout=subprocess.DEVNULL, stderr=errors)
        finally:
            tar.stdout.close()
            tar_code = tar.wait()
        errors.seek(0)
        message = errors.read().decode("utf-8", "replace").strip()
    if tar_code != 0 or done.returncode != 0:
        raise ImageError(
            f"{Path(engine).name} import of {tree} as {tag} failed (tar exit {tar_code},"
            f" import exit {done.returncode}): {message[-500:]}"
        )


def build_offline(
    engine: str, inputs: BuildInputs, base: Path, tag: str, *, quiet: bool = False
) -> None:
    """The offline build, steps 1-3 of docs/images.md."""
    if not base.exists() or (base.is_dir() and not any(base.iterdir())):
        make_base(base)
    identity = base_identity(base)
    tree = assemble(inputs, base, inputs.digest(identity), quiet=quiet)
    import_tree(engine, tree, tag, inputs.labels(identity))
