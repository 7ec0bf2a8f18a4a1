"""Temporary folders of runs are removed whatever a model left in them (harness.core.tempdirs).

A hostile model made 1,200 nested folders in its ``/out``: ``shutil.rmtree`` raised
``RecursionError`` after scoring, and the run's folder stayed in ``/tmp``. These trees are built
with directory descriptors (their paths outgrow ``PATH_MAX``), on ``/dev/shm`` where there is one:
a disk's file system may take seconds to make 20,000 files. The permission tests drop to an
unprivileged user when run as root, since root ignores the modes a model sets.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
import traceback
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import harness.core.tempdirs
from harness.cli._common import reports_errors
from harness.core.errors import RunnerError, SubmissionError
from harness.core.tempdirs import OPEN_LIMIT, remove_tree, run_directory
from harness.submission.unpack import unpack_package

#: The user and group the permission tests run as when the tests run as root.
NOBODY = 65534

#: Where the trees are made: a file system in memory when there is one, else the default.
SCRATCH_ROOT = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None


def _nest(root: Path, depth: int, *, files: bool = False) -> None:
    """``root``/d/d/…/d, ``depth`` folders below ``root``, each with a file ``f`` if asked."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            if files:
                os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
    finally:
        os.close(fd)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short-named folder (a socket's path has room for 107 bytes), owned by the unprivileged
    user when the tests run as root, and the temporary folder of ``tempfile`` meanwhile."""
    folder = Path(tempfile.mkdtemp(prefix="zsl-t-", dir=SCRATCH_ROOT))
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    try:
        yield folder
    finally:
        monkeypatch.undo()  # a test's broken os.rmdir included
        remove_tree(folder)


def _unprivileged(body: Callable[[], None]) -> None:
    """Run ``body`` as an unprivileged user: in a forked child dropped to nobody when root
    (its failure's traceback comes back in the assertion), else right here."""
    if os.geteuid() != 0:
        body()
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            body()
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report


# -- deep trees --------------------------------------------------------------------------------


def test_rmtree_recurses_out_on_1200_levels_and_remove_tree_does_not(scratch: Path) -> None:
    deep = scratch / "out"
    _nest(deep, 1200)
    with pytest.raises(RecursionError):
        shutil.rmtree(deep)  # the bug: Python 3.11's rmtree recurses once per level
    remove_tree(deep)
    assert list(scratch.iterdir()) == []


def test_5000_levels_beyond_path_max_are_removed_with_few_descriptors(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = scratch / "out"
    _nest(deep, 5000, files=True)  # "d/" * 5000: 10,000 bytes, over PATH_MAX
    before = _open_fds()
    # Descriptors are tracked by what remove_tree itself opens and closes in this thread:
    # the process-wide count also moves with other threads' files (a CI run saw 88 -> 84).
    caller = threading.get_ident()
    live: set[int] = set()
    peak = [0]
    real_open, real_close = os.open, os.close

    def counting_open(*args: object, **kwargs: object) -> int:
        fd = real_open(*args, **kwargs)  # type: ignore[arg-type]
        if threading.get_ident() == caller:
            live.add(fd)
            peak[0] = max(peak[0], len(live))
        return fd

    def counting_close(fd: int) -> None:
        real_close(fd)
        if threading.get_ident() == caller:
            live.discard(fd)

    monkeypatch.setattr(harness.core.tempdirs.os, "open", counting_open)
    monkeypatch.setattr(harness.core.tempdirs.os, "close", counting_close)
    remove_tree(deep)
    monkeypatch.undo()
    assert not deep.exists()
    assert live == set()  # none leaked
    assert peak[0] <= OPEN_LIMIT + 4  # not one per level
    assert _open_fds() <= before


def test_20000_files_in_one_folder_are_removed(scratch: Path) -> None:
    wide = scratch / "out"
    wide.mkdir()
    fd = os.open(wide, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(20_000):
            os.close(os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    start = time.perf_counter()
    remove_tree(wide)
    assert not wide.exists()
    assert time.perf_counter() - start < 5


# -- what a model leaves: modes, links, special files ------------------------------------------


def _hostile_tree(scratch: Path) -> None:
    """A tree with folders chmod 000 and 0500, a read-only folder, a fifo, a socket and links
    out of the tree; then removed. What the links point to must survive."""
    outside = scratch / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    (outside / "folder").mkdir()
    (outside / "folder" / "inner.txt").write_text("inner")
    (outside / "hard.txt").write_text("hard")
    tree = scratch / "tree"
    for locked, mode in (("none", 0o000), ("readonly", 0o500)):
        folder = tree / locked / "sub"
        folder.mkdir(parents=True)
        (folder / "file.txt").write_text("x")
        (folder / "ro.txt").write_text("x")
        (folder / "ro.txt").chmod(0o400)
        folder.chmod(mode)
        (tree / locked).chmod(mode)
    os.mkfifo(tree / "fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tree / "sock"))
    (tree / "to_file").symlink_to(outside / "kept.txt")
    (tree / "to_folder").symlink_to(outside / "folder")
    (tree / "dangling").symlink_to(scratch / "nowhere")
    os.link(outside / "hard.txt", tree / "hard.txt")
    with pytest.raises(PermissionError):  # the modes bite: this user cannot list it
        os.listdir(tree / "none")

    remove_tree(tree)

    assert not os.path.lexists(tree)
    assert (outside / "kept.txt").read_text() == "kept"
    assert (outside / "folder" / "inner.txt").read_text() == "inner"
    assert (outside / "hard.txt").read_text() == "hard"
    assert (outside / "hard.txt").stat().st_nlink == 1


def test_modes_special_files_and_links_left_by_a_model(scratch: Path) -> None:
    _unprivileged(lambda: _hostile_tree(scratch))


def test_a_link_as_the_tree_itself_is_removed_not_followed(scratch: Path) -> None:
    target = scratch / "target"
    target.mkdir()
    (target / "kept.txt").write_text("kept")
    link = scratch / "link"
    link.symlink_to(target)
    remove_tree(link)
    assert not os.path.lexists(link)
    assert (target / "kept.txt").read_text() == "kept"


def test_a_missing_tree_is_fine(scratch: Path) -> None:
    remove_tree(scratch / "missing")
    remove_tree(scratch / "missing" / "deeper")


# -- what cannot be removed --------------------------------------------------------------------


def _busy(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.rmdir`` of folders called ``name`` fails as a busy mount point would."""
    real_rmdir = os.rmdir

    def rmdir(path: str, *args: object, **kwargs: object) -> None:
        if os.path.basename(path) == name:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), path)
        real_rmdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rmdir", rmdir)


def test_a_busy_folder_is_one_line_naming_it_and_the_rest_goes(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = scratch / "run"
    (tree / "out" / "mnt").mkdir(parents=True)
    (tree / "out" / "mnt" / "a.txt").write_text("a")
    (tree / "out" / "other").mkdir()
    (tree / "package.txt").write_text("p")
    _busy("mnt", monkeypatch)
    with pytest.raises(RunnerError) as caught:
        remove_tree(tree)
    message = str(caught.value)
    assert message == f"cannot remove {tree}/out/mnt: Device or resource busy"
    # Everything else went: only the busy folder (emptied) and the folders holding it are left.
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == ["out", "out/mnt"]


def test_a_failure_deep_down_names_a_shortened_path(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = scratch / "run"
    _nest(tree, 1000)
    _busy("d", monkeypatch)  # the deepest folder fails first
    with pytest.raises(RunnerError) as caught:
        remove_tree(tree)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300
    assert message.startswith(f"cannot remove {tree}/d/d/d/d/.../d/d/d/d (1000 levels down): ")
    assert message.endswith(
        "Device or resource busy (and 999 more not removable under " + f"{tree})"
    )


def test_a_mount_point_inside_is_not_entered(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = scratch / "run"
    (tree / "mnt").mkdir(parents=True)
    (tree / "mnt" / "host.txt").write_text("not the run's")
    (tree / "out.txt").write_text("x")
    st = (tree / "mnt").stat()
    monkeypatch.setattr(
        harness.core.tempdirs, "_mount_points_under", lambda _path: {(st.st_dev, st.st_ino)}
    )
    with pytest.raises(RunnerError, match=r"^cannot remove .*/run/mnt: a file system is mounted"):
        remove_tree(tree)
    assert (tree / "mnt" / "host.txt").read_text() == "not the run's"
    assert not (tree / "out.txt").exists()


# -- run_directory ------------------------------------------------------------------------------


def test_run_directory_is_private_and_removed_with_what_the_model_left(scratch: Path) -> None:
    with run_directory("zsl-test-") as tmp:
        assert tmp.parent == scratch and tmp.name.startswith("zsl-test-")
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o700
        _nest(tmp / "out", 1200)
        (tmp / "out" / "d").chmod(0o500)
    assert not tmp.exists()


@pytest.mark.parametrize("error", [ValueError("the body failed"), KeyboardInterrupt()])
@pytest.mark.usefixtures("scratch")
def test_run_directory_removes_it_when_the_body_raises(error: BaseException) -> None:
    with pytest.raises(type(error)) as caught, run_directory("zsl-test-") as tmp:
        _nest(tmp / "out", 1200)
        raise error
    assert caught.value is error
    assert not tmp.exists()


def test_a_removal_failure_while_unwinding_is_one_line_and_the_body_error_wins(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _busy("busy", monkeypatch)
    with pytest.raises(ValueError) as caught, run_directory("zsl-test-") as tmp:
        (tmp / "busy").mkdir()
        raise ValueError("the body failed")
    assert str(caught.value) == "the body failed"
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert capsys.readouterr().err == (
        f"warning: cannot remove {tmp}/busy: Device or resource busy\n"
    )
    assert [p.name for p in scratch.iterdir()] == [tmp.name]  # left for the fixture


def test_a_removal_failure_after_a_normal_exit_is_raised(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _busy("busy", monkeypatch)
    busy = r"^cannot remove .*/busy: Device or resource busy$"
    with pytest.raises(RunnerError, match=busy), run_directory("zsl-test-") as tmp:
        (tmp / "busy").mkdir()
    assert [p.name for p in scratch.iterdir()] == [tmp.name]  # left for the fixture


def test_a_refused_archive_with_a_deep_tree_is_removed_and_the_refusal_wins(
    scratch: Path,
) -> None:
    """``unpack_package`` removes what it extracted before a refusal (:func:`discard_tree`)
    and the refusal is what comes out. (Deeper than about 970 levels, ``Path.mkdir`` recurses
    out while extracting, before ``shutil.rmtree`` would have.)"""
    archive = scratch / "deep.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg/" + "d/" * 600 + "f.txt", "x")
        zf.writestr("pkg/late.bin", b"original bytes")  # stored: corrupted below
    archive.write_bytes(archive.read_bytes().replace(b"original bytes", b"tampered bytes"))
    with pytest.raises(SubmissionError, match=r"member 'pkg/late\.bin' cannot be read"):
        unpack_package(archive, scratch / "out" / "package")
    assert list((scratch / "out").iterdir()) == []


# -- how a failure reaches the user --------------------------------------------------------------


def test_the_cli_shows_an_os_error_as_one_line() -> None:
    app = typer.Typer()

    @app.command()
    @reports_errors
    def clean() -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/tmp/zsl-run-x/out")

    result = CliRunner().invoke(app, [])
    assert result.exit_code == 1
    assert result.output == (
        "error: PermissionError: [Errno 13] Permission denied: '/tmp/zsl-run-x/out'\n"
    )
