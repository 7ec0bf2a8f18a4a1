"""Code hides in data files: validation refuses it by content, whatever the file is called.

Attack (hostile tester, after issue 10 item 3): an ELF shared library named ``calib.dat`` and
marshalled code in ``weights.bin`` were only "listed for review" by ``zsl submission validate``,
then run by the model (``ctypes.CDLL('calib.dat')``; ``exec(marshal.loads(...))``): validation
refused byte-code and shared libraries by *name* only. Rule: package validation (folders and
archives alike: :meth:`harness.submission.package.Package.files`) refuses by content native code
(ELF, Mach-O, PE, WebAssembly, Java classes), Python byte-code and marshalled code objects,
pickles (object arrays in ``.npy``/``.npz`` included, read from their headers, never unpickled)
and archives other than a plain ``.npz``; look-alikes (a CSV starting ``MZ,``, text starting
with ``c``) pass. On the leaderboard, ``zsl ci pr`` also fails a package holding a file that is
neither source nor a declared data format unless ``allowed_data_suffixes`` lists its suffix.
"""

from __future__ import annotations

import bz2
import io
import lzma
import marshal
import pickle
import py_compile
import re
import shutil
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import SubmissionError
from harness.pipeline import run_submission
from harness.records import RunRecord
from harness.submission.package import load_package
from harness.submission.unpack import open_package
from tests import hostile
from tests.ci.test_ci import (  # noqa: F401  (_isolated_git is an autouse fixture)
    _board_repo,
    _isolated_git,
    commit_all,
    git,
    write,
)
from tests.ci.test_ci_integrity import (  # noqa: F401  (real_run is a fixture)
    add_package,
    fake_runs,
    pr,
    real_run,
)
from tests.conftest import SPECS, SUBMISSIONS, stored_runs

DEMO = SPECS / "demo.yaml"
RECOGNISED = "recognised by its content whatever its name"
NATIVE = (
    "the package's Python could load and run it unreviewed. Delete it: ship the source and build"
    " it into the image through model.requirements or model.image"
)
PYTHON = "Python runs it without the .py source a reviewer reads. Delete it and ship the .py source"
PICKLE = (
    "loading it runs code that the package's source does not show. Store arrays as .npy/.npz of"
    " numeric dtypes (np.save(path, array, allow_pickle=False)) or .safetensors, settings as"
    " .json or .yaml"
)
ARCHIVE = (
    "its members are seen neither by validation nor by review. The package itself is the"
    " archive: ship the files unpacked (arrays as .npy/.npz, weights as .safetensors)"
)
NPZ = (
    "a .npz may hold only .npy arrays (what np.savez writes). Ship any other file unpacked,"
    " beside it, where validation and review see it"
)
#: Innocent names a payload was planted under: at the top, and in a subfolder as a table.
PLANTED = ["calib.dat", "weights.bin", "data/table.csv"]
ELF = Path("/bin/true")


def _refusal(what: str, advice: str) -> str:
    return f"is {what}, {RECOGNISED}: {advice}"


# --- the payloads ---------------------------------------------------------------------------

Builder = Callable[[Path], bytes]  # scratch folder (holds the marker) -> the file's bytes


def _code() -> object:
    return compile("raise RuntimeError('hidden code ran')\n", "weights", "exec")


def _pe(header_offset: int) -> Builder:
    """A DOS stub whose e_lfanew (at 0x3c) points at a ``PE\\0\\0`` signature."""

    def build(scratch: Path) -> bytes:
        data = bytearray(b"MZ" + bytes(header_offset + 64))
        struct.pack_into("<I", data, 0x3C, header_offset)
        data[header_offset : header_offset + 4] = b"PE\0\0"
        return bytes(data)

    return build


def _pyc(scratch: Path) -> bytes:
    """A real timestamp .pyc, as ``py_compile`` makes it."""
    source = scratch / "payload.py"
    source.write_text("raise RuntimeError('hidden code ran')\n")
    return Path(
        py_compile.compile(str(source), cfile=str(scratch / "p.pyc"), doraise=True)
    ).read_bytes()


def _unchecked_pyc(scratch: Path) -> bytes:
    return hostile.malicious_pyc(scratch / "u.pyc").read_bytes()


def _pickle(protocol: int) -> Builder:
    return lambda scratch: pickle.dumps(hostile.Payload(scratch / "pwned"), protocol=protocol)


def _npy(array: Callable[[Path], np.ndarray]) -> Builder:
    def build(scratch: Path) -> bytes:
        out = io.BytesIO()
        np.save(out, array(scratch), allow_pickle=True)
        return out.getvalue()

    return build


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _tar(compression: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=f"w:{compression}") as archive:
        info = tarfile.TarInfo("lib.so")
        info.size = len(ELF.read_bytes())
        archive.addfile(info, io.BytesIO(ELF.read_bytes()))
    return out.getvalue()


def _object_field(scratch: Path) -> np.ndarray:
    array = np.zeros(2, dtype=[("w", "<f4"), ("calib", "O")])
    array[0]["calib"] = hostile.Payload(scratch / "pwned")
    return array


OBJECT_FIELD = np.dtype([("w", "<f4"), ("calib", "O")])

#: (id, builder, what the message says it is, advice)
FORMATS: list[tuple[str, Builder, str, str]] = [
    ("elf", lambda s: ELF.read_bytes(), "an ELF executable or shared library", NATIVE),
    (
        "mach-o-32",
        lambda s: b"\xce\xfa\xed\xfe" + bytes(28),
        "a Mach-O executable or library",
        NATIVE,
    ),
    (
        "mach-o-64",
        lambda s: b"\xcf\xfa\xed\xfe" + bytes(28),
        "a Mach-O executable or library",
        NATIVE,
    ),
    (
        "mach-o-32-be",
        lambda s: b"\xfe\xed\xfa\xce" + bytes(28),
        "a Mach-O executable or library",
        NATIVE,
    ),
    (
        "mach-o-64-be",
        lambda s: b"\xfe\xed\xfa\xcf" + bytes(28),
        "a Mach-O executable or library",
        NATIVE,
    ),
    (
        "mach-o-universal",
        lambda s: b"\xca\xfe\xba\xbe\x00\x00\x00\x02" + bytes(40),
        "a Mach-O universal binary or a Java class file",
        NATIVE,
    ),
    (
        "java-class",
        lambda s: b"\xca\xfe\xba\xbe\x00\x00\x00\x41\x00\x0f\x0a\x00\x02\x00\x03",
        "a Mach-O universal binary or a Java class file",
        NATIVE,
    ),
    ("pe", _pe(0x80), "a Windows PE executable or DLL", NATIVE),
    ("pe-header-past-64-kib", _pe(70_000), "a Windows PE executable or DLL", NATIVE),
    ("wasm", lambda s: b"\0asm\x01\0\0\0\x01\x04\x01\x60", "a WebAssembly module", NATIVE),
    ("pyc", _pyc, "Python byte-code (.pyc)", PYTHON),
    ("pyc-unchecked-hash", _unchecked_pyc, "Python byte-code (.pyc)", PYTHON),
    (
        "pyc-python-3.6-layout",  # magic 3379, mtime, source size, code (no flags field)
        lambda s: (
            struct.pack("<H", 3379)
            + b"\r\n"
            + b"\x9a\x02\x1fh"
            + b"\x20\0\0\0"
            + marshal.dumps(_code())
        ),
        "Python byte-code (.pyc)",
        PYTHON,
    ),
    *[
        (
            name,
            build,
            "marshalled Python code (a marshal dump of a code object)",
            PYTHON,
        )
        for name, build in [
            ("marshal-code", lambda s: marshal.dumps(_code())),
            ("marshal-code-version-2", lambda s: marshal.dumps(_code(), 2)),
            ("marshal-tuple-of-code", lambda s: marshal.dumps(("weights", 0.5, _code()))),
            ("marshal-dict-of-code", lambda s: marshal.dumps({"calib": _code()})),
            ("marshal-code-after-16-bytes", lambda s: b"\x9a\x02" * 8 + marshal.dumps(_code())),
        ]
    ],
    *[
        (f"pickle-protocol-{p}", _pickle(p), f"a pickle (protocol {p})", PICKLE)
        for p in range(2, 6)
    ],
    *[
        (
            f"pickle-protocol-{p}",
            _pickle(p),
            "a pickle (protocol 0 or 1) that imports or calls something",
            PICKLE,
        )
        for p in (0, 1)
    ],
    (
        "npy-object-array",
        _npy(lambda s: hostile.pickled_object_array(s / "pwned")),
        "a .npy array of dtype object (pickled Python objects)",
        PICKLE,
    ),
    (
        "npy-object-field",
        _npy(_object_field),
        f"a .npy array of dtype {OBJECT_FIELD} (pickled Python objects)",
        PICKLE,
    ),
    (
        "npy-unreadable-header",  # claims a 64 KiB header: numpy refuses to parse it
        lambda s: b"\x93NUMPY\x01\x00\xff\xff{'descr': '|O'" + bytes(64),
        "a .npy array whose header cannot be read (.npy format 1.0 or 2.0)",
        "re-save it with np.save(path, array, allow_pickle=False)",
    ),
    ("zip", lambda s: _zip({"lib.so": ELF.read_bytes()}), "a zip archive", ARCHIVE),
    (
        "zip-appended-to-a-npy",
        lambda s: hostile.npy_bytes(np.ones(4, np.float32)) + _zip({"lib.so": ELF.read_bytes()}),
        "a zip archive",
        ARCHIVE,
    ),
    (
        "zip-appended-to-a-csv",
        lambda s: b"a,b\n1,2\n" + _zip({"lib.so": ELF.read_bytes()}),
        "a zip archive",
        ARCHIVE,
    ),
    ("tar", lambda s: _tar(""), "a tar archive", ARCHIVE),
    ("tar.gz", lambda s: _tar("gz"), "a gzip stream", ARCHIVE),
    ("bzip2", lambda s: bz2.compress(ELF.read_bytes()), "a bzip2 stream", ARCHIVE),
    ("xz", lambda s: lzma.compress(ELF.read_bytes()), "an xz stream", ARCHIVE),
]
IDS = [name for name, *_ in FORMATS]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """Where payloads are built; its ``pwned`` marker must never appear (nothing unpickled)."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    yield folder
    assert not (folder / "pwned").exists(), "a payload was unpickled"


def _refused(root: Path, name: str, message: str) -> None:
    with pytest.raises(SubmissionError) as info:
        load_package(root)
    assert str(info.value) == f"{root.resolve()}: {name} {message}"


def _plant(root: Path, name: str, data: bytes) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(data)


# --- refused, whatever the name ----------------------------------------------------------------


@pytest.mark.parametrize("name", PLANTED)
@pytest.mark.parametrize(("fmt", "build", "what", "advice"), FORMATS, ids=IDS)
def test_refused_by_content_whatever_the_name(
    tmp_path: Path, scratch: Path, name: str, fmt: str, build: Builder, what: str, advice: str
) -> None:
    root = hostile.source_model_package(tmp_path)
    _plant(root, name, build(scratch))
    _refused(root, name, _refusal(what, advice))


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
@pytest.mark.parametrize(
    ("payload", "build", "what", "advice"),
    [
        f
        for f in FORMATS
        if f[0] in ("elf", "pyc", "marshal-code", "pickle-protocol-4", "npy-object-array")
    ],
    ids=["elf", "pyc", "marshal-code", "pickle-protocol-4", "npy-object-array"],
)
def test_refused_inside_archive_packages(
    tmp_path: Path, scratch: Path, fmt: str, payload: str, build: Builder, what: str, advice: str
) -> None:
    root = hostile.source_model_package(tmp_path / "src")
    _plant(root, "data/calib.dat", build(scratch))
    archive = hostile.archive_of_folder(root, tmp_path / f"pkg.{fmt}")
    with pytest.raises(SubmissionError) as info:
        open_package(archive, tmp_path / "work")
    pattern = (
        re.escape(f"{tmp_path / 'work'}/")
        + r"pkg-\w+/package/pkg: "
        + re.escape(f"data/calib.dat {_refusal(what, advice)}")
    )
    assert re.fullmatch(pattern, str(info.value)), info.value


@pytest.mark.parametrize("name", ["weights.npz", "data/table.npz"])
def test_npz_members_are_checked_from_their_headers(
    tmp_path: Path, scratch: Path, name: str
) -> None:
    root = hostile.source_model_package(tmp_path)
    honest = ("w.npy", np.ones((3, 2), np.float32))
    hostile.npz_members(
        scratch / "objects.npz",
        [honest, ("calib.npy", hostile.pickled_object_array(scratch / "pwned"))],
        compression=zipfile.ZIP_DEFLATED,
    )
    _plant(root, name, (scratch / "objects.npz").read_bytes())
    what = "a .npz whose member 'calib.npy' is an array of dtype object (pickled Python objects)"
    _refused(root, name, _refusal(what, PICKLE))

    _plant(root, name, _zip({"w.npy": hostile.npy_bytes(honest[1]), "lib.so": ELF.read_bytes()}))
    _refused(root, name, _refusal("a .npz whose member 'lib.so' is not a .npy array", NPZ))

    # The same .npz under another name is a zip archive like any other.
    (root / name).unlink()
    _plant(root, "calib.dat", (scratch / "objects.npz").read_bytes())
    _refused(root, "calib.dat", _refusal("a zip archive", ARCHIVE))


def test_first_offender_is_named_and_the_others_counted(tmp_path: Path, scratch: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    _plant(root, "weights.bin", marshal.dumps(_code()))
    _plant(root, "calib.dat", ELF.read_bytes())
    (root / "x.pth").write_text("")
    _refused(
        root,
        "calib.dat",
        _refusal("an ELF executable or shared library", NATIVE) + " (2 more such file(s))",
    )


# --- the finding itself, end to end: refused before anything runs ---------------------------

LOADERS = {
    "ctypes": (
        "calib.dat",
        lambda s: ELF.read_bytes(),
        "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'calib.dat'))\n",
        _refusal("an ELF executable or shared library", NATIVE),
    ),
    "marshal": (
        "weights.bin",
        lambda s: marshal.dumps(_code()),
        "import marshal, os\n"
        "exec(marshal.loads(open(os.path.join(os.path.dirname(__file__), 'weights.bin'),"
        " 'rb').read()))\n",
        _refusal("marshalled Python code (a marshal dump of a code object)", PYTHON),
    ),
}


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zsl-home-content")


@pytest.mark.parametrize("loader", list(LOADERS))
def test_the_reported_packages_are_refused_before_they_run(
    tmp_path: Path,
    scratch: Path,
    shared_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    db: str,
    loader: str,
) -> None:
    monkeypatch.setenv("ZSL_HOME", str(shared_home))
    monkeypatch.delenv("ZSL_DATABASE_URL", raising=False)
    name, build, prelude, message = LOADERS[loader]
    root = hostile.source_model_package(tmp_path)
    _plant(root, name, build(scratch))
    (root / "model.py").write_text(prelude + hostile.BENIGN_MODEL)
    with pytest.raises(SubmissionError) as info:
        run_submission(root, DEMO, runner="local", database_url=db, store=True, quiet=True)
    assert str(info.value) == f"{root.resolve()}: {name} {message}"
    assert stored_runs(db) == 0


# --- look-alikes pass ------------------------------------------------------------------------


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


BENIGN: dict[str, bytes] = {
    # "MZ" alone: its e_lfanew would be the ASCII "1,2," of a later row, far past the file.
    "data/table.csv": b"MZ,3,4\n" + b"1,2,3\n" * 40,
    "notes.txt": b"calibrated on CUB; columns: class, value\n",
    "weights.npy": hostile.npy_bytes(np.random.default_rng(0).random((8, 4), dtype=np.float32)),
    # int32 labels holding the bytes of a code object's type and instructions (99 'c', 115 's')
    "data/labels.npy": hostile.npy_bytes(np.array([99, 0, 0, 0, 0, 0, 115, 1], np.int32)),
    "weights.npz": _npz_bytes(w=np.ones((3, 2), np.float32), labels=np.arange(3)),
    "tools/build.py": b"#!/usr/bin/env python\nprint('a shebang is text a reviewer reads')\n",
    "tools/run": b"#!/bin/sh\nexec python -m model\n",
    "config.json": b'{"calib": [1, 2, 3]}\n',
    "zeros.bin": bytes(4096),
    "crlf.txt": b"c\r\r\nline two\r\n",
    "LICENSE": b"MIT\n",
}


def test_look_alikes_and_plain_data_pass(tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    for name, data in BENIGN.items():
        _plant(root, name, data)
    shutil.copy(
        SUBMISSIONS / "nearest-seen-class-transfer" / "predictions" / "demo.zsl.safetensors",
        root / "scores.safetensors",
    )
    package = load_package(root)
    held = {p.relative_to(root.resolve()).as_posix() for p in package.files()}
    assert held >= {*BENIGN, "scores.safetensors"}
    assert package.hash().startswith("sha256:")


@pytest.mark.parametrize(
    "name", sorted(p.parent.name for p in SUBMISSIONS.glob("*/submission.yaml"))
)
def test_every_shipped_package_validates_and_holds_only_declared_files(name: str) -> None:
    package = load_package(SUBMISSIONS / name)
    assert package.undeclared_files() == []


def test_undeclared_files_are_neither_source_nor_declared_data(tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    for name in ["notes.xyz", "README", "LICENSE", "data/t.TSV", "w.safetensors", "Makefile"]:
        _plant(root, name, b"x\n")
    package = load_package(root)
    assert package.undeclared_files() == ["Makefile", "notes.xyz"]
    assert package.undeclared_files([".xyz"]) == ["Makefile"]


# --- zsl ci pr: declared data formats only, unless the configuration allows the suffix -------


@pytest.fixture
def eszsl_run(request: pytest.FixtureRequest) -> RunRecord:
    """A real run of ESZSL on the demo (made once per module by ``real_run``)."""
    run: RunRecord = request.getfixturevalue("real_run")
    return run


@pytest.mark.slow
def test_ci_fails_an_undeclared_suffix_until_the_configuration_lists_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, eszsl_run: RunRecord
) -> None:
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "notes")
    package = add_package(repo, "eszsl")
    write(package / "notes.xyz", "results of the ablation\n")
    write(package / "tools" / "build", "#!/bin/sh\nmake\n")
    commit_all(repo, "eszsl with notes")
    runs = fake_runs(monkeypatch, {})  # nothing runs until the package is accepted

    def outcome_detail() -> tuple[bool, str, str]:
        result = pr(repo)
        (outcome,) = result.outcomes
        return result.ok, outcome.status, outcome.detail

    declared = ".csv, .npy, .npz, .safetensors, .tsv, or the package's prediction files"
    assert outcome_detail() == (
        False,
        "invalid",
        f"submissions/eszsl/notes.xyz: neither source nor a declared data format ({declared}),"
        " and allowed_data_suffixes in leaderboard/ci.yaml does not list '.xyz': convert it to a"
        " declared format, or ask the leaderboard's maintainers to list '.xyz' there"
        " (1 more such file(s): tools/build)",
    )
    assert runs.calls == []

    write(
        repo / "leaderboard" / "ci.yaml",
        "specs: [specs/demo.yaml]\nallowed_data_suffixes: [.xyz]\n",
    )
    assert outcome_detail() == (
        False,
        "invalid",
        f"submissions/eszsl/tools/build: neither source nor a declared data format ({declared}),"
        " and it has no suffix for allowed_data_suffixes in leaderboard/ci.yaml to list: convert"
        " it to a declared format, or delete it",
    )

    (package / "tools" / "build").rename(package / "tools" / "build.sh")
    write(
        repo / "leaderboard" / "ci.yaml",
        "specs: [specs/demo.yaml]\nallowed_data_suffixes: [.xyz, .sh]\n",
    )
    commit_all(repo, "a suffix, and the configuration allows both")
    # ESZSL's run, made by this very package (notes and script included in its hash)
    hashed = eszsl_run.submission.model_copy(update={"package_hash": load_package(package).hash()})
    runs.outcomes["eszsl"] = eszsl_run.model_copy(update={"submission": hashed})
    ok, status, detail = outcome_detail()
    assert (ok, status) == (True, "ok"), detail
    assert runs.calls == ["eszsl"]


def test_ci_configuration_refuses_what_is_not_one_suffix(tmp_path: Path) -> None:
    from harness.ci.config import load_ci_config
    from harness.core.errors import HarnessError

    path = tmp_path / "ci.yaml"
    path.write_text("specs: [specs/demo.yaml]\nallowed_data_suffixes:\n  - .h5\n  - .tar.gz\n")
    with pytest.raises(HarnessError) as info:
        load_ci_config(path)
    assert str(info.value).splitlines()[1].strip() == (
        f"{path}:4: allowed_data_suffixes[1]: '.tar.gz' is not a file suffix: a dot, then"
        " lowercase letters, digits, _, + or - ('.h5'; the last suffix only, so '.gz' rather"
        " than '.tar.gz')"
    )
