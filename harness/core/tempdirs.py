"""Temporary folders of runs, removed for sure, whatever the model code left in them.

A run's temporary folder holds what a submission made (its output folder ``/out``, an unpacked
archive), so its removal must not trust the tree: ``shutil.rmtree`` recurses once per level and
raised ``RecursionError`` on 1,200 nested folders a model made, leaving hundreds of megabytes in
``/tmp`` and a traceback. :func:`remove_tree` walks the tree with an explicit stack instead, never
recursion, and does everything relative to directory descriptors opened ``O_NOFOLLOW``.

See docs/core.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import HarnessError, RunnerError, error_text

__all__ = ["OPEN_LIMIT", "discard_tree", "remove_tree", "run_directory"]

#: Directory descriptors :func:`remove_tree` holds at once, whatever the depth of the tree.
OPEN_LIMIT = 64

#: How many times a folder is listed again when it is still not empty after its entries went
#: (something kept writing into it); then it is reported as not removable.
RELISTS = 3

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: More path components than this are shown abbreviated in an error (the first and last few).
_SHOWN_PARTS = 8


@dataclass
class _Folder:
    """A folder on the removal stack: its name in its parent, identity, and progress."""

    name: str
    dev: int
    ino: int
    fd: int | None
    subfolders: list[str] | None = None  # still to remove; None: not listed (again) yet
    left: set[str] = field(default_factory=set)  # entries that could not be removed
    unlistable: bool = False
    listings: int = 0


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and everything under it, without recursion and without following links.

    A missing ``path`` is fine; a link or a file at ``path`` is unlinked. See
    docs/core.md for what the tree may hold.

    Raises
    ------
    RunnerError
        Something could not be removed (a mount point, a file of another owner) or the tree was
        moved while being removed: the first such path and the reason, on one line. Everything
        else is removed all the same.
    """
    _Remover(Path(os.path.abspath(path))).run()


def discard_tree(path: str | os.PathLike[str]) -> None:
    """:func:`remove_tree` while another exception unwinds: a failure to remove is one line on
    stderr, never raised over (or chained onto) the exception that is on its way up."""
    try:
        remove_tree(path)
    except HarnessError as err:
        print(f"warning: {error_text(err)}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def run_directory(prefix: str) -> Iterator[Path]:
    """A new folder (mode 0700) in the temporary folder, removed with :func:`remove_tree` on
    exit, however the body exits (an exception, ``KeyboardInterrupt``).

    Like ``tempfile.TemporaryDirectory(prefix=...)``, but yields a :class:`~pathlib.Path` and
    copes with any tree a model leaves. When the body raised, its exception propagates unchanged
    and a failure to remove is reported on stderr (:func:`discard_tree`); on a normal exit the
    failure is raised.

    Raises
    ------
    RunnerError
        The folder cannot be made, or not removed after a normal exit.
    """
    try:
        path = Path(tempfile.mkdtemp(prefix=prefix))  # mkdtemp makes it 0700
    except OSError as err:
        raise RunnerError(
            f"cannot make a temporary folder in {tempfile.gettempdir()}: {_reason(err)}"
        ) from None
    try:
        yield path
    except BaseException:
        discard_tree(path)
        raise
    remove_tree(path)


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


class _Remover:
    """One removal of one tree: the stack walk of :func:`remove_tree` in named steps."""

    def __init__(self, path: Path) -> None:
        if not path.name:
            raise RunnerError(f"refusing to remove {path}: not a folder inside another")
        self.path = path
        self.parent_fd = -1
        self.stack: list[_Folder] = []
        self.dev = 0
        self.mounts: set[tuple[int, int]] = set()
        self.failures: list[str] = []

    def run(self) -> None:
        try:
            self.parent_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as err:
            raise RunnerError(f"cannot remove {self.path}: {_reason(err)}") from None
        try:
            self._remove_top()
        finally:
            for folder in self.stack:
                if folder.fd is not None:
                    os.close(folder.fd)
            os.close(self.parent_fd)
        if self.failures:
            more = len(self.failures) - 1
            raise RunnerError(
                self.failures[0]
                + (f" (and {more} more not removable under {self.path})" if more else "")
            )

    def _remove_top(self) -> None:
        top = self._open(self.parent_fd, self.path.name, None)
        if top is None:
            return
        self.dev = top.dev
        self.mounts = _mount_points_under(self.path)
        self.stack.append(top)
        while self.stack:
            self._step()

    def _step(self) -> None:
        """One move of the walk: list the top folder, enter its next subfolder, or remove it."""
        folder = self.stack[-1]
        assert folder.fd is not None  # the top of the stack is always open
        if folder.subfolders is None:
            folder.subfolders = self._empty(folder)
        if folder.subfolders:
            child = self._open(folder.fd, folder.subfolders.pop(), folder)
            if child is not None:
                self.stack.append(child)
                self._hold_few()
            return
        parent = self.stack[-2] if len(self.stack) > 1 else None
        parent_fd = self.parent_fd if parent is None else self._reopen(parent, folder)
        self.stack.pop()
        os.close(folder.fd)
        folder.fd = None
        self._rmdir(parent_fd, folder, parent)

    def _empty(self, folder: _Folder) -> list[str]:
        """Unlink every entry of ``folder`` but its subfolders; their names."""
        assert folder.fd is not None
        folder.listings += 1
        subfolders: list[str] = []
        others: list[str] = []
        try:
            with os.scandir(folder.fd) as entries:
                for entry in entries:
                    if entry.name in folder.left:
                        continue
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:  # gone, or unknown: unlink tells
                        is_dir = False
                    (subfolders if is_dir else others).append(entry.name)
        except OSError as err:
            folder.unlistable = True
            self._fail(folder.name, err, self.stack[-2] if len(self.stack) > 1 else None)
            return []
        for name in others:
            try:
                os.unlink(name, dir_fd=folder.fd)
            except FileNotFoundError:
                pass
            except IsADirectoryError:  # it became a folder meanwhile
                subfolders.append(name)
            except OSError as err:
                self._fail(name, err, folder)
        return subfolders

    def _open(self, parent_fd: int, name: str, parent: _Folder | None) -> _Folder | None:
        """``name`` in ``parent_fd`` opened as a folder to empty, with its owner's permissions
        back; None when it is gone, was no folder (then it is unlinked) or is left."""
        try:
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
            except PermissionError:  # chmod 000 by the model: give the owner its rights back
                _chmod_folder(name, parent_fd)
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):  # a link or a file: never followed
                self._unlink(parent_fd, name, parent)
            else:
                self._fail(name, err, parent)
            return None
        st = os.fstat(fd)
        if parent is not None and (st.st_dev != self.dev or (st.st_dev, st.st_ino) in self.mounts):
            os.close(fd)
            self._fail(name, "a file system is mounted there (left as it is)", parent)
            return None
        if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
            try:
                os.chmod(fd, 0o700)  # list it and unlink what it holds (0500 by the model)
            except OSError as err:
                os.close(fd)
                self._fail(name, err, parent)
                return None
        return _Folder(name, st.st_dev, st.st_ino, fd)

    def _unlink(self, parent_fd: int, name: str, parent: _Folder | None) -> None:
        try:
            os.unlink(name, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as err:
            self._fail(name, err, parent)

    def _hold_few(self) -> None:
        """Close the descriptor that just fell out of the :data:`OPEN_LIMIT` deepest ones."""
        if len(self.stack) > OPEN_LIMIT:
            folder = self.stack[-OPEN_LIMIT - 1]
            if folder.fd is not None:
                os.close(folder.fd)
                folder.fd = None

    def _reopen(self, parent: _Folder, child: _Folder) -> int:
        """``parent``'s descriptor (``child`` is on the stack above it), opened again as ``..``
        of ``child`` when it was closed: the walk stops if that is no longer ``parent``."""
        if parent.fd is not None:
            return parent.fd
        assert child.fd is not None
        try:
            fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=child.fd)
        except OSError as err:
            where = self._where(child.name, parent)
            raise RunnerError(f"cannot remove {where}: its parent folder: {_reason(err)}") from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (parent.dev, parent.ino):
            os.close(fd)
            where = self._where(child.name, parent)
            raise RunnerError(f"cannot remove {where}: it was moved while being removed")
        parent.fd = fd
        return fd

    def _rmdir(self, parent_fd: int, folder: _Folder, parent: _Folder | None) -> None:
        try:
            os.rmdir(folder.name, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as err:
            if err.errno != errno.ENOTEMPTY:
                self._fail(folder.name, err, parent)
            elif folder.left or folder.unlistable:  # what it still holds is reported already
                if parent is not None:
                    parent.left.add(folder.name)
            elif folder.listings < RELISTS:  # something wrote into it meanwhile: again
                again = self._open(parent_fd, folder.name, parent)
                if again is not None:
                    again.listings = folder.listings
                    self.stack.append(again)
            else:
                self._fail(folder.name, "it keeps filling up while being emptied", parent)

    def _fail(self, name: str, err: OSError | str, parent: _Folder | None) -> None:
        """Record that ``name`` (in ``parent``, the top of the stack or below it) is left."""
        reason = err if isinstance(err, str) else _reason(err)
        if parent is not None:
            parent.left.add(name)
        if not self.failures:  # only the first is shown: the path is built for it alone
            self.failures.append(f"cannot remove {self._where(name, parent)}: {reason}")
        else:
            self.failures.append(reason)

    def _where(self, name: str, parent: _Folder | None) -> str:
        """The path of ``name`` in ``parent`` (a folder on the stack; None: ``name`` is the
        top), shortened when deep: a path of 10,000 parts is not an error message."""
        if parent is None:
            return str(self.path)
        index = next(i for i, f in enumerate(self.stack) if f is parent)
        parts = [*(f.name for f in self.stack[1 : index + 1]), name]
        if len(parts) <= _SHOWN_PARTS:
            return str(self.path.joinpath(*parts))
        head, tail = parts[: _SHOWN_PARTS // 2], parts[-_SHOWN_PARTS // 2 :]
        return f"{self.path.joinpath(*head)}/.../{'/'.join(tail)} ({len(parts)} levels down)"


def _chmod_folder(name: str, parent_fd: int) -> None:
    """Give the owner of folder ``name`` (in ``parent_fd``) its rights, without following a
    link: the folder is pinned by an ``O_PATH`` descriptor and changed through ``/proc``."""
    pinned = os.open(
        name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd
    )
    try:
        os.chmod(f"/proc/self/fd/{pinned}", 0o700)
    except FileNotFoundError:  # no /proc: by name; the O_PATH open just proved it a folder
        os.chmod(name, 0o700, dir_fd=parent_fd)
    finally:
        os.close(pinned)


def _mount_points_under(path: Path) -> set[tuple[int, int]]:
    """(device, inode) of every mount point strictly under ``path`` that this process sees, so
    that a bind mount of the same file system is not entered either; empty without ``/proc``."""
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return set()
    inside = os.fsencode(os.path.realpath(path)).rstrip(b"/") + b"/"
    found: set[tuple[int, int]] = set()
    for line in lines:
        fields = line.split(b" ")
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        if point.startswith(inside):
            with contextlib.suppress(OSError):
                st = os.stat(point)
                found.add((st.st_dev, st.st_ino))
    return found


def _unescape(raw: bytes) -> bytes:
    r"""A mountinfo path with its octal escapes (``\040``: a space) decoded."""
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), raw)
