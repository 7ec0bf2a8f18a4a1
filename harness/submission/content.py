"""What a package file *is*, by its bytes: code, pickles and archives are refused whatever the
file is called.

Package validation (:meth:`harness.submission.package.Package.files`) refuses by *name* the files
Python would import in place of the package's source. That leaves every other name free: an ELF
library saved as ``calib.dat`` (``ctypes.CDLL``), marshalled code saved as ``weights.bin``
(``marshal.loads`` then ``exec``), a pickle saved as ``table.csv``. The code that runs must be
code a reviewer can read, so :func:`content_problem` refuses, by content, every file that a
loader takes *as it is* and turns into running code, and every container whose members neither
validation nor review sees. The rules read only the file's bytes: nothing here imports,
unmarshals, unpickles or loads a file.

See docs/submission.md.
"""

from __future__ import annotations

import os
import pickletools
import re
import stat
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

__all__ = [
    "Finding",
    "content_problem",
]

#: How much of a file the rules read from its start (all of it for a shorter file).
HEAD_BYTES = 64 * 1024
#: A ``.npz`` with more members than this is refused without reading them.
MAX_NPZ_MEMBERS = 10_000

Kind = Literal["native", "python", "pickle", "archive", "npz", "array"]


@dataclass(frozen=True)
class Finding:
    """What a file's content was found to be: ``kind`` picks the advice, ``what`` names the
    format (``"an ELF executable or shared library"``)."""

    kind: Kind
    what: str

    def message(self) -> str:
        """The refusal, to follow the file's name: the format, why, and what to do."""
        return f"is {self.what}, recognised by its content whatever its name: {_ADVICE[self.kind]}"


_ADVICE: dict[Kind, str] = {
    "native": (
        "the package's Python could load and run it unreviewed. Delete it: ship the source and"
        " build it into the image through model.requirements or model.image"
    ),
    "python": (
        "Python runs it without the .py source a reviewer reads. Delete it and ship the .py source"
    ),
    "pickle": (
        "loading it runs code that the package's source does not show. Store arrays as"
        " .npy/.npz of numeric dtypes (np.save(path, array, allow_pickle=False)) or"
        " .safetensors, settings as .json or .yaml"
    ),
    "archive": (
        "its members are seen neither by validation nor by review. The package itself is the"
        " archive: ship the files unpacked (arrays as .npy/.npz, weights as .safetensors)"
    ),
    "npz": (
        "a .npz may hold only .npy arrays (what np.savez writes). Ship any other file unpacked,"
        " beside it, where validation and review see it"
    ),
    "array": "re-save it with np.save(path, array, allow_pickle=False)",
}

# -- signatures at offset 0 ------------------------------------------------------------------

_MAGICS: tuple[tuple[bytes, Finding], ...] = (
    (b"\x7fELF", Finding("native", "an ELF executable or shared library")),
    (b"\xfe\xed\xfa\xce", Finding("native", "a Mach-O executable or library")),
    (b"\xce\xfa\xed\xfe", Finding("native", "a Mach-O executable or library")),
    (b"\xfe\xed\xfa\xcf", Finding("native", "a Mach-O executable or library")),
    (b"\xcf\xfa\xed\xfe", Finding("native", "a Mach-O executable or library")),
    (b"\xca\xfe\xba\xbe", Finding("native", "a Mach-O universal binary or a Java class file")),
    (b"\xca\xfe\xba\xbf", Finding("native", "a Mach-O universal binary")),
    (b"\xbe\xba\xfe\xca", Finding("native", "a Mach-O universal binary")),
    (b"\x00asm", Finding("native", "a WebAssembly module")),
    (b"\x1f\x8b\x08", Finding("archive", "a gzip stream")),
    (b"\xfd7zXZ\x00", Finding("archive", "an xz stream")),
    (b"\x28\xb5\x2f\xfd", Finding("archive", "a zstd stream")),
    (b"\x04\x22\x4d\x18", Finding("archive", "an lz4 stream")),
    (b"7z\xbc\xaf\x27\x1c", Finding("archive", "a 7z archive")),
    (b"Rar!\x1a\x07", Finding("archive", "a rar archive")),
)
# "BZh", the block size, then the magic of a block or of the end of an (empty) stream.
_BZIP2 = re.compile(rb"BZh[1-9](?:\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)")
_TAR_MAGIC_OFFSET = 257  # "ustar\0" (POSIX) or "ustar  " (GNU) in the first header block
_PYC_MAGICS = range(3000, 4000)  # every Python 3 release: 3.0a (3000) … 3.14 (36xx)
_PYC_FLAGS = range(4)  # bytes 4-8 of a 3.7+ .pyc (PEP 552): hash-based, check-source
_PYC_BODY_OFFSETS = (8, 12, 16)  # where the code object starts: 3.0-3.2, 3.3-3.6, 3.7+
_PE_OFFSET_FIELD = 0x3C  # e_lfanew: where the PE header is, in the DOS header

# A code object as marshal writes it (Python/marshal.c, w_object), any Python 3: TYPE_CODE with
# or without FLAG_REF; 3.0-3.7 argcount, kwonlyargcount, nlocals, stacksize; 3.8-3.10 also
# posonlyargcount; 3.11+ argcount, posonlyargcount, kwonlyargcount, stacksize (each < 65536);
# co_flags (< 2**28); then co_code, a TYPE_STRING with or without FLAG_REF.
_CODE_OBJECT = re.compile(
    rb"[\x63\xe3](?:[\x00-\xff]{2}\x00\x00){4,5}[\x00-\xff]{3}[\x00-\x0f][\x73\xf3]", re.DOTALL
)
# marshal's tuple, small tuple, list, dict, set and frozenset type bytes, with or without FLAG_REF.
_MARSHAL_CONTAINERS = frozenset(b"()[{<>") | frozenset(b | 0x80 for b in b"()[{<>")
_PICKLE_PROTOCOLS = range(2, 6)
# Opcodes through which unpickling imports or calls something.
_PICKLE_CALLS = frozenset(
    {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD"}
    | {"EXT1", "EXT2", "EXT4"}
)
_NPY_MAGIC = b"\x93NUMPY"


def sniff(head: bytes, *, python_source: bool = False) -> Finding | None:
    """What ``head`` (a file's first :data:`HEAD_BYTES`, or all of a shorter file) is, by the
    rules that need only the start of a file; None when none applies. ``python_source``: the
    file is ``.py`` source, which the protocol-0 pickle rule does not apply to.

    Windows PE (whose header may lie past ``head``), zip (found from the end of the file) and
    ``.npy`` headers are :func:`describe_content`'s.

    >>> sniff(b"\\x7fELF\\x02\\x01\\x01").what
    'an ELF executable or shared library'
    >>> sniff(b"MZ,3,4\\n") is None, sniff(b"column,value\\n1,2\\n") is None
    (True, True)
    """
    for magic, finding in _MAGICS:
        if head.startswith(magic):
            return finding
    if _BZIP2.match(head):
        return Finding("archive", "a bzip2 stream")
    if head[_TAR_MAGIC_OFFSET : _TAR_MAGIC_OFFSET + 5] == b"ustar":
        return Finding("archive", "a tar archive")
    after_header = any(_CODE_OBJECT.match(head, offset) for offset in _PYC_BODY_OFFSETS)
    if (
        head[2:4] == b"\r\n"
        and int.from_bytes(head[:2], "little") in _PYC_MAGICS
        and (int.from_bytes(head[4:8], "little") in _PYC_FLAGS or after_header)
    ):
        return Finding("python", "Python byte-code (.pyc)")
    if (
        _CODE_OBJECT.match(head)
        or after_header
        or (head[:1] and head[0] in _MARSHAL_CONTAINERS and _CODE_OBJECT.search(head))
    ):
        return Finding("python", "marshalled Python code (a marshal dump of a code object)")
    if head[:1] == b"\x80" and head[1:2] and head[1] in _PICKLE_PROTOCOLS:
        return Finding("pickle", f"a pickle (protocol {head[1]})")
    if not python_source and _pickle_program(head):
        return Finding("pickle", "a pickle (protocol 0 or 1) that imports or calls something")
    return None


def _pickle_program(head: bytes) -> bool:
    """True when ``head`` decodes as pickle opcodes up to ``STOP`` with at least one that imports
    or calls. :func:`pickletools.genops` only decodes: it never imports or calls anything."""
    calls = False
    with warnings.catch_warnings():
        # Decoding a STRING opcode's argument warns about odd escapes in what is not a pickle.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            for opcode, _argument, _position in pickletools.genops(head):
                if opcode.name == "STOP":
                    return calls
                calls = calls or opcode.name in _PICKLE_CALLS
        except Exception:  # any decoding failure: not a pickle (genops raises several kinds)
            return False
    return False


def _windows_pe(handle: IO[bytes], head: bytes, size: int) -> bool:
    """``MZ`` whose DOS header points (e_lfanew) at a ``PE\\0\\0`` signature inside the file."""
    if not head.startswith(b"MZ") or len(head) < _PE_OFFSET_FIELD + 4:
        return False
    offset = int.from_bytes(head[_PE_OFFSET_FIELD : _PE_OFFSET_FIELD + 4], "little")
    if offset + 4 > size:
        return False
    if offset + 4 <= len(head):
        return head[offset : offset + 4] == b"PE\0\0"
    handle.seek(offset)
    return handle.read(4) == b"PE\0\0"


def _npy_header(handle: IO[bytes]) -> tuple[str, bool] | None:
    """(dtype text, has objects) from the ``.npy`` header at ``handle``'s position, no data
    read; None when the header cannot be read."""
    import numpy as np

    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            _, _, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            _, _, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            return None
    except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile):
        return None
    return str(dtype), bool(dtype.hasobject)


def _npy_finding(handle: IO[bytes], what: str) -> Finding | None:
    header = _npy_header(handle)
    if header is None:
        return Finding("array", f"{what} whose header cannot be read (.npy format 1.0 or 2.0)")
    dtype, objects = header
    if objects:
        return Finding("pickle", f"{what} of dtype {dtype} (pickled Python objects)")
    return None


def _npz_finding(handle: IO[bytes]) -> Finding | None:
    """None when the zip at ``handle`` holds only ``.npy`` members of non-object dtypes."""
    try:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
            if len(members) > MAX_NPZ_MEMBERS:
                return Finding("npz", f"a .npz of more than {MAX_NPZ_MEMBERS} members")
            for info in members:
                name = repr(info.filename[:80])
                if info.is_dir():
                    return Finding("npz", f"a .npz whose member {name} is a folder")
                with archive.open(info) as member:
                    if member.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
                        return Finding("npz", f"a .npz whose member {name} is not a .npy array")
                    member.seek(0)
                    found = _npy_finding(member, f"a .npz whose member {name} is an array")
                    if found is not None:
                        return found
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, ValueError) as err:
        return Finding("npz", f"a zip archive that cannot be read as a .npz ({err})")
    return None


def describe_content(handle: IO[bytes], name: str) -> Finding | None:
    """What the open file ``handle`` (named ``name``: only a ``.npz`` suffix matters) is, by
    every rule of this module; None for a file none of them refuses."""
    size = os.fstat(handle.fileno()).st_size
    head = handle.read(HEAD_BYTES)
    # Python source is what review reads and the worker imports as source; a short one can
    # decode as a protocol-0 pickle (``import os`` is an INST opcode), which means nothing.
    found = sniff(head, python_source=name.lower().endswith(".py"))
    if found is not None:
        return found
    if _windows_pe(handle, head, size):
        return Finding("native", "a Windows PE executable or DLL")
    if head.startswith(_NPY_MAGIC):
        handle.seek(0)
        found = _npy_finding(handle, "a .npy array")
        if found is not None:
            return found
    if zipfile.is_zipfile(handle):  # also when appended to another format: zipfile reads it
        handle.seek(0)
        if name.lower().endswith(".npz"):
            return _npz_finding(handle)
        return Finding("archive", "a zip archive")
    return None


# O_NONBLOCK: a FIFO swapped in after the listing must not hang validation (it is refused).
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def content_problem(path: Path) -> str | None:
    """Why the file at ``path`` is refused by its content (to follow its name in a message:
    the format found, why, what to do); None when it is not.

    The file is opened without following a link; only its first :data:`HEAD_BYTES`, the end a
    zip reader looks at and ``.npy`` headers are read.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "is not a regular file (a FIFO, socket or device); refused"
        try:
            found = describe_content(handle, path.name)
        except OSError as err:
            return f"cannot be read ({err.strerror or err})"
    return None if found is None else found.message()
