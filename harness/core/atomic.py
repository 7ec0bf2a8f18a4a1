"""Write a file or a folder all at once or not at all: a temporary sibling, then a rename.

Readers never see a half-written file or folder (``os.replace`` is atomic within one file
system), and a crash leaves at most a hidden ``.<name>.*.tmp`` sibling behind, never a
truncated target.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core.errors import HarnessError

__all__ = ["directory_atomic", "write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644, make_parents: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically (flushed to disk first), readable by all.

    Raises
    ------
    HarnessError
        The folder can't be created or written, naming the path and the reason.
    """
    target = Path(path)
    try:
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise HarnessError(f"cannot write {target}: {err}") from err
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600; our files are meant to be shared
        os.replace(tmp, target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise HarnessError(f"cannot write {target}: {err}") from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(
    path: str | os.PathLike[str], text: str, *, mode: int = 0o644, make_parents: bool = True
) -> None:
    """:func:`write_bytes_atomic` of ``text`` as UTF-8, with ``\\n`` line ends as given."""
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode, make_parents=make_parents)


@contextmanager
def directory_atomic(dest: Path, *, mode: int | None = None) -> Iterator[Path]:
    """A new temporary sibling folder of ``dest`` to fill, renamed onto ``dest`` when the block
    ends without an error and removed with what it holds otherwise.

    ``dest`` must be missing or an empty folder when the block ends (rename(2) refuses one that
    gained files meanwhile: the ``OSError`` reaches the caller, as do those of making the
    folder). ``mode``: the folder's permissions (mkdtemp makes 0700), e.g. 0o755 to share it.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        yield tmp
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
