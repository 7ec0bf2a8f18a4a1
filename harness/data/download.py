"""Fetch raw release archives with pooch: pinned hashes, one cache folder, no silent overwrite.

One job: put a verified copy of a remote (or mirrored) file under ``ZSL_HOME/downloads`` and
unpack the members an adapter asks for. Adapters decide *where* their files come from; this
module only fetches, verifies and extracts.

See docs/data.md.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from harness.core.errors import HarnessError, IntegrityError, network_error_text
from harness.core.home import zsl_home

__all__ = [
    "Download",
    "DownloadRefused",
    "approve",
    "download_policy",
    "downloads_dir",
    "extract_members",
    "fetch",
    "fetch_action",
    "pending_download",
]

logger = logging.getLogger("harness.data.download")

FetchAction = Literal["download", "use", "conflict"]
_REMOTE = re.compile(r"^(https?|ftp|sftp|doi):", re.IGNORECASE)
_COMPLETE = ".complete"


def downloads_dir() -> Path:
    """Where fetched files live: ``$ZSL_HOME/downloads``."""
    return zsl_home() / "downloads"


def _hash_of(path: Path) -> str:
    import pooch

    return f"sha256:{pooch.file_hash(str(path), alg='sha256')}"


def fetch_action(path: Path, known_hash: str | None) -> FetchAction:
    """Decide what :func:`fetch` must do with ``path``; decides only, never acts.

    ``download`` when the file is absent; ``use`` when it is present and matches ``known_hash``
    (or no hash is pinned); ``conflict`` when it is present and does not match.

    >>> fetch_action(Path("/nonexistent/file.zip"), None)
    'download'
    """
    if not path.is_file():
        return "download"
    if known_hash is None:
        return "use"
    from pooch.hashes import hash_matches

    try:
        matches = hash_matches(str(path), known_hash)
    except ValueError as err:  # unknown algorithm
        raise HarnessError(f"cannot check {path}: {err}") from None
    return "use" if matches else "conflict"


class _DropPoochHashAdvice(logging.Filter):
    """Drop pooch's advice to pass the hash to ``pooch.retrieve``: :func:`fetch` logs where
    a harness user pins it instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SHA256 hash of downloaded file")


def _local_path(source: str) -> Path | None:
    """The file a local source names (a path or a ``file://`` URL), else ``None``."""
    if source.lower().startswith("file:"):
        parsed = urlparse(source)
        return Path(url2pathname(unquote(parsed.path)))
    if _REMOTE.match(source):
        return None
    return Path(source)


def _copy_downloader(src: Path) -> Callable[[str, Any, Any], None]:
    def download(url: str, output_file: Any, pooch: Any) -> None:
        if not src.is_file():
            raise FileNotFoundError(f"mirror file {src} does not exist")
        if isinstance(output_file, str | os.PathLike):
            shutil.copyfile(src, output_file)
        else:  # a file object
            with src.open("rb") as handle:
                shutil.copyfileobj(handle, output_file)

    return download


# -- asking before a download ------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    """A download :func:`fetch` would make: what the enclosing :func:`download_policy` decides."""

    source: str  # the URL
    target: Path  # where the file would be saved
    what: str  # in words, e.g. "the xlsa17 release archive xlsa17.zip"
    size: str | None = None  # in words where known, e.g. "about 1 GB"


class DownloadRefused(HarnessError):
    """The enclosing :func:`download_policy` refused a download; the message says which, why."""


@dataclass
class _Policy:
    decide: Callable[[Download], str | None]
    approved: set[Path] = field(default_factory=set)


_POLICY: ContextVar[_Policy | None] = ContextVar("zsl_download_policy", default=None)


@contextmanager
def download_policy(decide: Callable[[Download], str | None]) -> Iterator[None]:
    """Put every download :func:`fetch` would make inside the block to ``decide`` first.

    ``decide(download)`` returns None to let it go ahead, else the reason it is refused
    (:func:`approve` then raises :class:`DownloadRefused`). It is asked once per target file.
    Outside any block, downloads go ahead (``zsl data prepare`` fetches what a spec names).
    """
    token = _POLICY.set(_Policy(decide))
    try:
        yield
    finally:
        _POLICY.reset(token)


def approve(download: Download) -> None:
    """Ask the enclosing :func:`download_policy` about ``download``; raise if it refuses."""
    policy = _POLICY.get()
    if policy is None or download.target in policy.approved:
        return
    reason = policy.decide(download)
    if reason is not None:
        size = f", {download.size}" if download.size else ""
        raise DownloadRefused(
            f"not downloaded: {download.what} ({download.source}{size}): {reason}"
        )
    policy.approved.add(download.target)


def pending_download(
    source: str,
    *,
    fname: str,
    known_hash: str | None,
    what: str,
    size: str | None = None,
    directory: Path | None = None,
) -> Download | None:
    """The download :func:`fetch` with these arguments would make; None when it would make
    none (the file is already there, or ``source`` is a local copy)."""
    target = (Path(directory) if directory is not None else downloads_dir()) / fname
    if _local_path(source) is not None or fetch_action(target, known_hash) != "download":
        return None
    return Download(source, target, what, size)


def fetch(
    source: str,
    *,
    fname: str,
    known_hash: str | None,
    directory: Path | None = None,
    pin_hint: str = "the checksum",
    what: str | None = None,
    size: str | None = None,
) -> tuple[Path, str]:
    """Fetch ``source`` into ``directory/fname`` (default ``ZSL_HOME/downloads``) and verify it.

    A remote download is first put to the enclosing :func:`download_policy` (``what`` and
    ``size`` describe it there). See docs/data.md, `fetch`.
    """
    import pooch

    target_dir = Path(directory) if directory is not None else downloads_dir()
    target = target_dir / fname
    action = fetch_action(target, known_hash)
    if action == "conflict":
        raise IntegrityError(
            f"{target} does not match {pin_hint} ({known_hash}; the file has"
            f" {_hash_of(target)}). It is kept, not overwritten: delete it to download again,"
            f" or fix the pinned hash if the release was re-published."
        )
    if action == "download":
        local = _local_path(source)
        if local is not None and not local.is_file():
            raise HarnessError(f"{local} does not exist (the mirror copy of {fname})")
        if local is None:
            approve(Download(source, target, what or fname, size))
        downloader = _copy_downloader(local) if local is not None else None
        try:
            target_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise HarnessError(
                f"cannot create {target_dir}: {err.strerror}; set ZSL_HOME to a writable folder"
            ) from None
        logger.info("fetching %s into %s", source, target)
        quiet = _DropPoochHashAdvice()
        pooch.get_logger().addFilter(quiet)
        try:
            pooch.retrieve(
                source if local is None else local.as_uri(),
                known_hash=known_hash,
                fname=fname,
                path=target_dir,
                downloader=downloader,
                progressbar=False,
            )
        except ValueError as err:  # pooch: hash mismatch (the download was deleted)
            raise IntegrityError(
                f"{source}: {err} If the release changed on purpose, update {pin_hint}."
            ) from None
        except OSError as err:  # network errors (requests' are OSErrors too), unreadable file
            raise HarnessError(
                f"cannot fetch {source}: {network_error_text(err)}. Check the network, or give a"
                " local copy (a mirror folder or the unpacked files)."
            ) from None
        finally:
            pooch.get_logger().removeFilter(quiet)
    if known_hash is not None:
        algorithm = known_hash.split(":")[0].lower() if ":" in known_hash else "sha256"
        if algorithm == "sha256":
            return target, f"sha256:{known_hash.split(':')[-1].lower()}"
    digest = _hash_of(target)
    if known_hash is None:
        logger.warning(
            "no hash is pinned for %s; the file at %s has %s. Pin it as %s so a changed or"
            " corrupted file is refused next time.",
            source,
            target,
            digest,
            pin_hint,
        )
    return target, digest


def extract_members(
    archive: Path,
    dest: Path,
    select: Callable[[str], str | None],
) -> Path:
    """Unpack the members ``select`` keeps into ``dest`` (once), atomically.

    ``select(member_name)`` returns the relative path to write the member to, or ``None`` to
    skip it. ``dest`` is written through a temporary sibling that is renamed into place with a
    ``.complete`` marker, so an interrupted extraction is never mistaken for a finished one;
    an existing complete ``dest`` is reused as it is. Name ``dest`` after the archive's content
    hash so different archives never share a folder.

    Raises
    ------
    HarnessError
        The archive is not a readable zip file, or ``select`` keeps no member.
    """
    if (dest / _COMPLETE).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        written = []
        try:
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    if info.is_dir():
                        continue
                    rel = select(info.filename)
                    if rel is None:
                        continue
                    out = tmp.joinpath(*Path(rel).parts)
                    if ".." in Path(rel).parts or Path(rel).is_absolute():
                        raise HarnessError(f"{archive}: unsafe member name {info.filename!r}")
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, out.open("wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    written.append(rel)
        except (zipfile.BadZipFile, OSError) as err:
            raise HarnessError(f"cannot unpack {archive}: {err}") from None
        if not written:
            raise HarnessError(f"{archive} holds none of the files asked for")
        (tmp / _COMPLETE).write_text("\n".join(sorted(written)) + "\n")
        if dest.exists():
            shutil.rmtree(dest)  # an incomplete earlier attempt (no marker)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
