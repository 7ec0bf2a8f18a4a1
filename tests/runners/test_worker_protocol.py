"""The harness's verdicts against models that try to move a score they did not earn.

Fit and every prediction pass are separate runs (issue 26, :mod:`harness.runners.judge`): fit
sees no test image and ends by saving its state; each pass is a fresh run that loads a private
copy of that state and gets the test rows one chunk at a time; the harness, outside every run,
orders the rows, compares two passes and decides. Every hostile model is a copy of ESZSL
generated in ``tmp_path`` whose ``predict`` (or ``fit``, ``load``) cheats in one way:

- GZSL membership: remember the images seen with the smaller (ZSL) candidate set and push them
  to unseen classes in GZSL. Rule: every predict call of a fit sees the same shuffled images.
- Batch dependence (centring on the batch mean): refused unless declared transductive. Rule: a
  score may not depend on the other images of its batch (two independent partitions agree).
- Adaptive variants that try to make both partitions agree: a per-image cache in a module
  global, a running mean across calls, a cache file in /tmp, a cache written through a shared
  file mapping, anonymous shared memory, a helper thread or process serving a cache. Rule: each
  pass is a fresh run with nothing writable that outlives it.
- Channels between passes and between runs (keyring, file access times of the state, /tmp,
  /dev/shm, System V shared memory): the attack of issue 26 that beat the forked passes.
  Rule: private copies of the state per pass, private namespaces, and a syscall filter that
  denies the kernel keyring (:mod:`harness.runners.seccomp`).
- The package swapped during the run, links planted where the harness reads the fit's outputs,
  and a fit that searches the machine for the test features.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import RunnerError
from harness.pipeline import run_submission
from harness.submission.package import load_package
from tests.conftest import SPECS, SUBMISSIONS, needs_bwrap, stored_runs

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"
RUNNERS = [pytest.param("local"), pytest.param("sandbox", marks=needs_bwrap)]
# The runners for untrusted code, each run for real (the container one on a real engine).
ISOLATING = [pytest.param("sandbox", marks=needs_bwrap), pytest.param("container")]
EVERY_RUNNER = [pytest.param("local"), *ISOLATING]
NOT_INDUCTIVE = (
    r"refused by the harness; protocol violation: predict is not inductive: .*"
    r"declarations\.transductive: true"
)


def _package(tmp_path: Path, code: str, *, transductive: bool = False, name: str = "pkg") -> Path:
    """A copy of ESZSL with ``code`` appended; ``code`` defines ``class Hostile(ESZSL)``."""
    dest = tmp_path / name
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "model.py").write_text((dest / "model.py").read_text() + "\n\n" + code)
    manifest = dest / "submission.yaml"
    text = manifest.read_text().replace("model:ESZSL", "model:Hostile")
    text = text.replace("time_s: 600", "time_s: 120")
    if transductive:
        text = text.replace("transductive: false", "transductive: true")
    manifest.write_text(text)
    return dest


def _use(runner: str, request: pytest.FixtureRequest) -> None:
    """The container runner on the session's real engine (skipped without one, failed under
    ZSL_REQUIRE_DOCKER=1)."""
    if runner == "container":
        request.getfixturevalue("docker")


def _h(record) -> float:  # type: ignore[no-untyped-def]
    entry = record.score("gzsl", "H")
    assert entry is not None
    return float(entry.value)


@pytest.fixture(scope="module")
def eszsl_h(tmp_path_factory: pytest.TempPathFactory) -> float:
    # A module fixture runs outside the per-test ZSL_HOME: give it its own, never the user's.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_HOME", str(tmp_path_factory.mktemp("zsl-home-protocol")))
        record = run_submission(
            SUBMISSIONS / "eszsl", DEMO, runner="local", store=False, quiet=True
        )
    return _h(record)


# --- GZSL membership -----------------------------------------------------------------------

MEMBERSHIP = '''
import hashlib


class Hostile(ESZSL):
    """Remembers the images predicted with the smaller candidate set (ZSL); in GZSL pushes them
    to unseen candidates and every other image to seen ones. Reads no label."""

    def fit(self, task):
        super().fit(task)
        self.seen_ = task.seen_classes

    def save(self, directory):
        super().save(directory)
        np.save(directory / "seen.npy", self.seen_)

    @classmethod
    def load(cls, directory):
        model = super().load(directory)
        model.seen_ = np.load(directory / "seen.npy")
        model.small_, model.rows_ = None, set()
        return model

    def predict(self, features, candidates):
        scores = super().predict(features, candidates)
        keys = [hashlib.sha1(np.ascontiguousarray(row).tobytes()).hexdigest() for row in features]
        if self.small_ is None or len(candidates) <= self.small_:
            self.small_ = len(candidates)
            self.rows_.update(keys)
            return scores
        unseen = ~np.isin(candidates, self.seen_)
        for i, key in enumerate(keys):
            scores[i, unseen if key in self.rows_ else ~unseen] += 100.0
        return scores
'''


@pytest.mark.parametrize("runner", RUNNERS)
def test_gzsl_membership_model_declared_transductive_earns_nothing(
    runner: str, tmp_path: Path, eszsl_h: float
) -> None:
    """Declared transductive (no check), it is scored: every ZSL call now holds the seen-class
    test images too, so what it remembers says nothing about unseen classes."""
    package = _package(tmp_path, MEMBERSHIP, transductive=True)
    record = run_submission(package, DEMO, runner=runner, store=False, quiet=True)
    assert _h(record) <= eszsl_h + 0.01, (_h(record), eszsl_h)


@pytest.mark.parametrize("runner", RUNNERS)
def test_gzsl_membership_model_undeclared_earns_nothing(
    runner: str, tmp_path: Path, db: str, eszsl_h: float
) -> None:
    """Undeclared, its memory across calls makes its scores depend on the call order: the check
    pass (settings interleaved) refuses it; if it slipped through it would still score low."""
    package = _package(tmp_path, MEMBERSHIP)
    try:
        record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    except RunnerError as err:
        assert "predict is not inductive" in str(err)
        assert stored_runs(db) == 0
    else:
        assert _h(record) <= eszsl_h + 0.01, (_h(record), eszsl_h)


# --- batch dependence ----------------------------------------------------------------------

BATCH_MEAN = """
class Hostile(ESZSL):
    \"\"\"Centres test features on the mean of the batch instead of the training images.\"\"\"

    def predict(self, features, candidates):
        centred = features - features.mean(axis=0) + self.mean_
        return super().predict(centred, candidates)
"""


@pytest.mark.parametrize("runner", EVERY_RUNNER)
def test_batch_statistics_are_refused_with_the_declaration_to_make(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    _use(runner, request)
    package = _package(tmp_path, BATCH_MEAN)
    with pytest.raises(RunnerError, match=NOT_INDUCTIVE) as info:
        run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    message = str(info.value)
    assert "submission.yaml" in message and "first: shuffled test row" in message
    assert stored_runs(db) == 0


@pytest.mark.parametrize("runner", EVERY_RUNNER)
def test_declared_transductive_model_runs_and_is_scored(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    _use(runner, request)
    package = _package(tmp_path, BATCH_MEAN, transductive=True)
    record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert record.logs["inductive_check"] == "skipped: declared transductive"
    assert record.submission.declarations["transductive"] is True
    assert _h(record) > 0 and stored_runs(db) == 1
    assert "check_main" not in record.timings


@pytest.mark.parametrize("runner", RUNNERS)
def test_honest_model_records_separate_runs_and_its_states(runner: str) -> None:
    record = run_submission(SUBMISSIONS / "eszsl", DEMO, runner=runner, store=False, quiet=True)
    assert record.logs["inductive_check"] == "separate runs"
    assert {"fit_main", "fit_validation", "check_main", "check_validation"} <= set(record.timings)
    assert set(record.model_state) == {"main", "validation"}
    assert all(h.startswith("sha256:") and len(h) == 71 for h in record.model_state.values())
    # The state is a content hash: the same fit saved again (np.savez stamps times) hashes alike.
    again = run_submission(SUBMISSIONS / "eszsl", DEMO, runner="local", store=False, quiet=True)
    assert again.model_state == record.model_state


# --- models that adapt to the check --------------------------------------------------------

GLOBAL_CACHE = """
_CACHE = {}


class Hostile(ESZSL):
    \"\"\"Batch-centred scores, cached per image in a module global: a later call (or pass) that
    sees the image again returns the first answer, so repeated passes would agree.\"\"\"

    def predict(self, features, candidates):
        fresh = super().predict(features - features.mean(axis=0) + self.mean_, candidates)
        out = np.empty_like(fresh)
        for i, row in enumerate(features):
            key = (row.tobytes(), candidates.tobytes())
            out[i] = _CACHE.setdefault(key, fresh[i])
        return out
"""

RUNNING_MEAN = """
_STATE = {"sum": 0.0, "n": 0}


class Hostile(ESZSL):
    \"\"\"Centres on the running mean of every test image seen so far, across calls.\"\"\"

    def predict(self, features, candidates):
        _STATE["sum"] = _STATE["sum"] + features.sum(axis=0)
        _STATE["n"] += len(features)
        mean = _STATE["sum"] / _STATE["n"]
        return super().predict(features - mean + self.mean_, candidates)
"""

FILE_CACHE = """
import os, pickle, tempfile

PATH = os.path.join(tempfile.gettempdir(), CACHE_NAME)


class Hostile(ESZSL):
    \"\"\"Batch-centred scores, cached per image in a file that the next pass would read.\"\"\"

    def predict(self, features, candidates):
        fresh = super().predict(features - features.mean(axis=0) + self.mean_, candidates)
        cache = {}
        if os.path.exists(PATH):
            with open(PATH, "rb") as handle:
                cache = pickle.load(handle)
        out = np.empty_like(fresh)
        for i, row in enumerate(features):
            out[i] = cache.setdefault((row.tobytes(), candidates.tobytes()), fresh[i])
        with open(PATH, "wb") as handle:
            pickle.dump(cache, handle)
        return out
"""

MMAP_FILE_CACHE = """
import hashlib, mmap, os, signal

PATH = "/tmp/zsl-score-cache.bin"
SLOTS, WIDTH = 1 << 14, 64


class Hostile(ESZSL):
    \"\"\"A cache in a file under /tmp written through a shared mapping: no write() a file-size
    limit stops, and SIGXFSZ ignored.\"\"\"

    def predict(self, features, candidates):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        fresh = super().predict(features - features.mean(axis=0) + self.mean_, candidates)
        if not os.path.exists(PATH):
            with open(PATH, "wb") as handle:
                handle.truncate(SLOTS * WIDTH * 4 + SLOTS)
        fd = os.open(PATH, os.O_RDWR)
        memory = mmap.mmap(fd, 0)
        os.close(fd)
        table = np.frombuffer(memory, dtype=np.float32, count=SLOTS * WIDTH).reshape(SLOTS, WIDTH)
        used = np.frombuffer(memory, dtype=np.uint8, offset=SLOTS * WIDTH * 4, count=SLOTS)
        out = fresh.copy()
        for i, row in enumerate(features):
            key = hashlib.sha1(row.tobytes() + candidates.tobytes()).digest()
            slot = int.from_bytes(key[:4], "little") % SLOTS
            width = min(WIDTH, out.shape[1])
            if used[slot]:
                out[i, :width] = table[slot, :width]
            else:
                table[slot, :width] = fresh[i, :width]
                used[slot] = 1
        return out
"""

SHARED_MEMORY = """
import hashlib, mmap

SLOTS, WIDTH = 1 << 14, 64


class Hostile(ESZSL):
    \"\"\"A cache in anonymous shared memory mapped when the model is loaded: forked passes
    of one process would all have mapped it; fresh runs each map their own.\"\"\"

    @classmethod
    def load(cls, directory):
        model = super().load(directory)
        model.memory_ = mmap.mmap(-1, SLOTS * WIDTH * 4 + SLOTS)
        return model

    def predict(self, features, candidates):
        fresh = super().predict(features - features.mean(axis=0) + self.mean_, candidates)
        table = np.frombuffer(self.memory_, np.float32, count=SLOTS * WIDTH).reshape(SLOTS, WIDTH)
        used = np.frombuffer(self.memory_, np.uint8, offset=SLOTS * WIDTH * 4, count=SLOTS)
        out = fresh.copy()
        for i, row in enumerate(features):
            slot = int.from_bytes(hashlib.sha1(row.tobytes()).digest()[:4], "little") % SLOTS
            width = min(WIDTH, out.shape[1])
            if used[slot]:
                out[i, :width] = table[slot, :width]
            else:
                table[slot, :width] = fresh[i, :width]
                used[slot] = 1
        return out
"""

HELPER_CACHE = """
import hashlib, os, socket, struct, threading

ADDRESS = "\\0" + CACHE_NAME


def _serve(listener):
    cache = {}
    while True:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while True:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
                if data[:1] == b"G" and len(data) >= 21:
                    value = cache.get(data[1:21], b"")
                    conn.sendall(struct.pack("<I", len(value)) + value)
                    break
                if data[:1] == b"P" and len(data) >= 25:
                    (size,) = struct.unpack("<I", data[21:25])
                    if len(data) >= 25 + size:
                        cache.setdefault(data[1:21], data[25 : 25 + size])
                        break


def _ask(message, answer=True):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(ADDRESS)
        conn.sendall(message)
        if answer:
            (size,) = struct.unpack("<I", conn.recv(4))
            data = b""
            while len(data) < size:
                data += conn.recv(size - len(data))
            return data
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)
        return b""


class Hostile(ESZSL):
    \"\"\"Batch-centred scores cached by a helper (HELPER: thread or process) started when the
    model is built for a pass and reached through an abstract unix socket, which no file, fd or
    memory map shows.\"\"\"

    @classmethod
    def load(cls, directory):
        model = super().load(directory)
        model._helper()
        return model

    def _helper(self):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(ADDRESS)
        listener.listen(64)
        if HELPER == "thread":
            threading.Thread(target=_serve, args=(listener,), daemon=True).start()
        elif os.fork() == 0:
            os.setsid()
            _serve(listener)

    def predict(self, features, candidates):
        fresh = super().predict(features - features.mean(axis=0) + self.mean_, candidates)
        out = fresh.copy()
        for i, row in enumerate(features):
            key = hashlib.sha1(row.tobytes() + candidates.tobytes()).digest()
            try:
                value = _ask(b"G" + key)
                if value:
                    out[i] = np.frombuffer(value, dtype=np.float32)
                else:
                    data = fresh[i].astype(np.float32).tobytes()
                    _ask(b"P" + key + struct.pack("<I", len(data)) + data, answer=False)
            except OSError:
                pass  # no helper: answer with the fresh score
        return out
"""


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(GLOBAL_CACHE, id="module-global-cache"),
        pytest.param(RUNNING_MEAN, id="running-mean"),
        pytest.param(FILE_CACHE, id="tmp-file-cache"),
        pytest.param(MMAP_FILE_CACHE, id="mmap-file-cache"),
        pytest.param(SHARED_MEMORY, id="shared-memory"),
        pytest.param(HELPER_CACHE.replace("HELPER", '"thread"'), id="thread"),
        pytest.param(HELPER_CACHE.replace("HELPER", '"process"'), id="daemon"),
    ],
)
@pytest.mark.parametrize("runner", EVERY_RUNNER)
def test_models_that_adapt_to_the_check_are_refused(
    runner: str, code: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    _use(runner, request)
    # A cache file name of this test only (local runs keep temporary files in the pass's folder).
    name = f"zsl-score-cache-{tmp_path.name}.pkl"
    package = _package(tmp_path, code.replace("CACHE_NAME", repr(name)))
    with pytest.raises(RunnerError, match=NOT_INDUCTIVE):
        run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert stored_runs(db) == 0


# --- issue 26: channels between passes and between runs ------------------------------------

CHANNELS = """
import ctypes, ctypes.util, os, struct, zlib

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long
NR = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[os.uname().machine]
KEY_SPEC_USER_KEYRING, KEYCTL_READ = -4, 11
SIZE = 8 * 4096


def _keyring_put(data):
    _LIBC.syscall(NR[0], b"user", b"zsl-stat", data, len(data), KEY_SPEC_USER_KEYRING)


def _keyring_get():
    key = _LIBC.syscall(NR[1], b"user", b"zsl-stat", None, KEY_SPEC_USER_KEYRING)
    if key < 0:
        return None
    buf = ctypes.create_string_buffer(SIZE)
    n = _LIBC.syscall(NR[2], KEYCTL_READ, key, buf, SIZE)
    return buf.raw[:n] if n > 0 else None


def _file_put(path, data):
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError:
        pass


def _file_get(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


_LIBC.shmget.restype = ctypes.c_int
_LIBC.shmat.restype = ctypes.c_void_p


def _sysv(create):
    shm = _LIBC.shmget(0x5A5A26, SIZE, (0o1666 if create else 0o666))
    if shm < 0:
        return None
    address = _LIBC.shmat(shm, None, 0)
    return None if address in (None, ctypes.c_void_p(-1).value) else address


def _sysv_put(data):
    address = _sysv(True)
    if address is not None:
        ctypes.memmove(address, struct.pack("<I", len(data)) + data, len(data) + 4)


def _sysv_get():
    address = _sysv(False)
    if address is None:
        return None
    (n,) = struct.unpack("<I", ctypes.string_at(address, 4))
    return ctypes.string_at(address + 4, n) if 0 < n < SIZE else None


def _atime_put(directory, data):
    # Read the state's bit files of each set bit: the access time changes on the files read.
    for byte_index, byte in enumerate(data[:8]):
        for bit in range(8):
            if byte >> bit & 1:
                _file_get(os.path.join(directory, f"bit{byte_index * 8 + bit:02d}.json"))


def _atime_get(directory):
    base = os.stat(os.path.join(directory, "base.json")).st_atime_ns
    bits = [os.stat(os.path.join(directory, f"bit{i:02d}.json")).st_atime_ns > base
            for i in range(64)]
    if not any(bits):
        return None
    return bytes(sum(bits[8 * b + i] << i for i in range(8)) for b in range(8))


def _crc(payload):
    # Seeded: the CRC32 of four 0xff bytes is four 0xff bytes, what 64 set bits read back as.
    return zlib.crc32(payload, 26).to_bytes(4, "little")


def _times_put(directory, data):
    # Set the access time of the package's bit file of each set bit to 1 ns.
    for byte_index, byte in enumerate(data[:8]):
        for bit in range(8):
            if byte >> bit & 1:
                path = os.path.join(directory, f"bit{byte_index * 8 + bit:02d}.json")
                try:
                    os.utime(path, ns=(1, os.stat(path).st_mtime_ns))
                except OSError:
                    pass


def _times_get(directory):
    bits = [os.stat(os.path.join(directory, f"bit{i:02d}.json")).st_atime_ns == 1
            for i in range(64)]
    if not any(bits):
        return None
    return bytes(sum(bits[8 * b + i] << i for i in range(8)) for b in range(8))


class Hostile(ESZSL):
    \"\"\"Standardises the test features by the mean and spread of their first batch: a
    transductive model that declares itself inductive. It publishes that statistic (8 bytes with its
    checksum, so that the narrowest channel, 64 bits, carries all of it) through CHANNEL, and where the
    channel already holds one (from an earlier pass or an earlier run) uses it for every image,
    so that both passes agree.\"\"\"

    def save(self, directory):
        super().save(directory)
        for name in ["base"] + [f"bit{i:02d}" for i in range(64)]:
            (directory / f"{name}.json").write_text("0")

    @classmethod
    def load(cls, directory):
        model = super().load(directory)
        model.state_dir_ = str(directory)
        return model

    def _get(self):
        if CHANNEL == "keyring":
            return _keyring_get()
        if CHANNEL == "sysv":
            return _sysv_get()
        if CHANNEL == "atime":
            return _atime_get(self.state_dir_)
        if CHANNEL == "package-times":
            return _times_get(os.path.dirname(os.path.abspath(__file__)))
        return _file_get(CHANNEL)

    def _put(self, data):
        if CHANNEL == "keyring":
            _keyring_put(data)
        elif CHANNEL == "sysv":
            _sysv_put(data)
        elif CHANNEL == "atime":
            _atime_put(self.state_dir_, data)
        elif CHANNEL == "package-times":
            _times_put(os.path.dirname(os.path.abspath(__file__)), data)
        else:
            _file_put(CHANNEL, data)

    def predict(self, features, candidates):
        # 4 bytes of statistic (two float16) and its CRC32: what a channel holds by chance
        # (access times moved by the harness's own reads) is never taken for a statistic.
        known = self._get()
        if known is not None and len(known) == 8 and _crc(known[:4]) == known[4:]:
            centre, spread = np.frombuffer(known[:4], dtype=np.float16).astype(np.float32)
        else:
            statistic = np.array([features.mean(), features.std()], dtype=np.float16)
            centre, spread = statistic.astype(np.float32)
            payload = statistic.tobytes()
            self._put(payload + _crc(payload))
        return super().predict((features - centre) / spread, candidates)
"""

CHANNEL_PATHS = {
    "keyring": "keyring",
    "sysv": "sysv",
    "atime": "atime",
    # The package snapshot is the one folder every pass shares: its files' times must not
    # carry bits from one pass to the next.
    "package-times": "package-times",
    "dev-shm": "/dev/shm/zsl-stat.bin",
    "tmp": "/tmp/zsl-stat.bin",
}


@pytest.mark.parametrize("channel", sorted(CHANNEL_PATHS))
@pytest.mark.parametrize("runner", ISOLATING)
def test_a_channel_between_passes_or_runs_carries_nothing(
    runner: str, channel: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    """Issue 26: through the kernel keyring, the access times of files, /tmp, /dev/shm or
    System V shared memory, a prototype-refining model carried the first pass's test statistic
    to the second (ZSL 94.2 / H 95.6 against ESZSL's 85.9 / 77.8, recorded as inductive), and
    uid 65534's keyring carried one run's statistic to the next run. Run twice: refused both
    times, nothing stored."""
    _use(runner, request)
    package = _package(tmp_path, CHANNELS.replace("CHANNEL", repr(CHANNEL_PATHS[channel])))
    if channel == "package-times":
        for name in [f"bit{i:02d}" for i in range(64)]:
            (package / f"{name}.json").write_text("0")
    for _ in range(2):
        with pytest.raises(RunnerError, match=NOT_INDUCTIVE):
            run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert stored_runs(db) == 0


@pytest.mark.parametrize("runner", ISOLATING)
def test_the_refining_model_declared_transductive_is_scored_and_ranked_apart(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    _use(runner, request)
    code = CHANNELS.replace("CHANNEL", repr("/tmp/zsl-stat.bin"))
    package = _package(tmp_path, code, transductive=True)
    record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert record.submission.declarations["transductive"] is True
    assert record.logs["inductive_check"] == "skipped: declared transductive"
    assert stored_runs(db) == 1


class _SwapAfterFit:
    """A runner, and after the first fit the package folder's model.py replaced by a model that
    scores every image 5 (a ZSL top-1 at chance)."""

    def __init__(self, runner, original: Path) -> None:  # type: ignore[no-untyped-def]
        self.runner, self.original, self.swapped = runner, original, False
        self.name = runner.name

    def run(self, job):  # type: ignore[no-untyped-def]
        outcome = self.runner.run(job)
        if job.phase == "fit" and not self.swapped:
            model = self.original / "model.py"
            model.write_text(model.read_text() + "\n\nESZSL.predict = lambda s, f, c: np.full("
                             "(len(f), len(c)), 5.0, np.float32)\n")  # fmt: skip
            self.swapped = True
        return outcome


@pytest.mark.parametrize("runner", EVERY_RUNNER)
def test_swapping_the_package_during_the_run_changes_nothing(
    runner: str,
    tmp_path: Path,
    db: str,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Issue 26: the live package folder was bound into the run and hashed after it, so a
    model.py swapped between fit and predict stored ZSL 5.0 under the benign package's hash.
    Every phase now runs from one snapshot taken and hashed before the first."""
    _use(runner, request)
    import harness.pipeline as pipeline

    package = tmp_path / "eszsl"
    shutil.copytree(SUBMISSIONS / "eszsl", package)
    benign = load_package(package).hash()
    honest = run_submission(package, DEMO, runner=runner, store=False, quiet=True)
    swapper = _SwapAfterFit(pipeline.runners.get(runner), package)
    monkeypatch.setattr(pipeline.runners, "get", lambda name: swapper)
    record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert swapper.swapped and load_package(package).hash() != benign
    assert record.submission.package_hash == benign
    assert record.predictions_hashes == honest.predictions_hashes


# --- links planted where the harness reads the fit's outputs -------------------------------


def _plant(target_code: str, *, state: bool) -> str:
    """A model whose ``save`` writes its state, then replaces each file it wrote (``state``)
    or ``worker.json`` with what ``target_code`` makes at ``tmp``."""
    return f"""
import os


class Hostile(ESZSL):
    def save(self, directory):
        super().save(directory)
        names = {["state/state.npz"] if state else ["worker.json"]!r}
        for name in names:
            path = os.path.join(os.path.dirname(directory), name)
            tmp = path + ".planted"
{target_code}
            os.replace(tmp, path)
"""


TARGETS = {
    "etc-shadow": "            os.symlink('/etc/shadow', tmp)",
    "proc-environ": "            os.symlink('/proc/self/environ', tmp)",
    "fake-labels": "            os.symlink(FAKE, tmp)",
    "fifo": "            os.mkfifo(tmp)",
    "directory": "            os.mkdir(tmp)",
}


@pytest.mark.parametrize("state", [True, False], ids=["state", "worker-json"])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_entries_planted_in_the_fit_outputs_are_refused_naming_the_file(
    target: str, state: bool, tmp_path: Path, db: str
) -> None:
    """A link planted where the harness reads the fit's outputs (its state, worker.json) is
    never followed: a RunnerError names the file and nothing is stored. (The worker writes
    worker.json after save, over what was planted there: then the run is scored as usual.)"""
    fake = tmp_path / "fake.npy"
    np.save(fake, np.eye(20, dtype=np.float32))
    code = _plant(TARGETS[target], state=state).replace("FAKE", repr(str(fake)))
    package = _package(tmp_path, code)
    try:
        run_submission(package, DEMO, runner="local", database_url=db, quiet=True)
    except RunnerError as err:
        message = str(err)
        assert ("state" if state else "worker.json") in message, message
        assert "Traceback" not in message
        assert stored_runs(db) == 0
    else:
        assert not state, "a state replaced by a link, fifo or folder was accepted"
        assert stored_runs(db) == 1


@needs_bwrap
def test_links_planted_in_the_sandbox_are_refused_naming_the_file(tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, _plant(TARGETS["etc-shadow"], state=True))
    with pytest.raises(RunnerError, match=r"fit-validation/state: .*holds a link|state\.npz"):
        run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert stored_runs(db) == 0


# --- the comparison itself ----------------------------------------------------------------


def test_canonical_order_follows_content_not_position() -> None:
    """Reruns batch every image the same way (bit-identical results) whatever the shuffle."""
    from harness.runners.judge import canonical_order

    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 7)).astype(np.float32)  # 28 bytes a row: padded words
    perm = rng.permutation(len(x))
    np.testing.assert_array_equal(x[canonical_order(x)], x[perm][canonical_order(x[perm])])


def test_chunk_sizes_cover_every_row_in_several_chunks() -> None:
    from harness.runners.judge import chunk_sizes

    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 10, 1001):
        for cap in (1, 7, 10**9):
            sizes = chunk_sizes(n, cap, rng)
            assert sum(sizes) == n and max(sizes) <= cap
            assert n < 2 or len(sizes) >= 2


def test_topk_comparison_allows_float_noise_and_ties_at_the_cut_only() -> None:
    from harness.runners.judge import _topk_mismatch

    indices = np.array([[4, 2, 9], [1, 0, 3]])
    scores = np.array([[3.0, 2.0, 1.0], [5.0, 4.0, 1.0]])
    rtol, atol = 1e-4, 1e-5 * 5.0
    same = _topk_mismatch((indices, scores), (indices, scores + 1e-7), rtol, atol)[0]
    assert not same.any()
    # Row 0: column 9 and column 7 tie at the K-th place within noise: either may be kept.
    tie = _topk_mismatch((indices, scores), (np.array([[4, 2, 7], [1, 0, 3]]), scores), rtol, atol)[
        0
    ]
    assert not tie.any()
    # Row 1: a clear change of the first score, and row 0 a column swapped in far above the cut.
    moved = _topk_mismatch(
        (indices, scores),
        (np.array([[4, 8, 2], [1, 0, 3]]), np.array([[3.0, 2.5, 2.0], [5.1, 4.0, 1.0]])),
        rtol,
        atol,
    )[0]
    assert moved.tolist() == [True, True]


# --- the fit sees no test image in any form -------------------------------------------------

SEEK_TEST_FEATURES = '''
import hashlib
import json
import os
import stat
import time
from pathlib import Path


def _digest(x):
    rows = sorted(hashlib.sha1(np.ascontiguousarray(r).tobytes()).hexdigest() for r in x)
    return hashlib.sha256("".join(rows).encode()).hexdigest()


class Hostile(ESZSL):
    """In fit, looks everywhere for the main fit's test features: the bundle (at /bundle and at
    the path on the worker's command line), every .npy under / and next to the bundle, the
    descriptors of every process it can see (its own included), the files mapped into its own
    memory, and the memory of its ancestors. Raises LEAK on an array equal to them."""

    def fit(self, task):
        want = json.loads((Path(__file__).parent / "expect.json").read_text())
        shape, digest = tuple(want["shape"]), want["digest"]
        needle = bytes.fromhex(want["row"])
        found, looked = [], 0
        deadline = time.monotonic() + 40

        def check(path, label):
            nonlocal looked
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    return
                x = np.load(path, mmap_mode="r", allow_pickle=False)
            except Exception:
                return
            looked += 1
            if x.shape == shape and _digest(x) == digest:
                found.append(label)

        argv = Path("/proc/self/cmdline").read_bytes().split(b"\\0")
        bundles = [Path("/bundle")] + [
            Path(a.decode()) for a in argv if a and Path(a.decode(), "task.json").is_file()
        ]
        def leak():  # the first find ends the search: what it found is the verdict
            if found:
                raise RuntimeError(f"LEAK: the test features at {sorted(set(found))}")

        for b in bundles:
            check(b / "test" / "features.npy", f"{b}/test/features.npy")
        leak()
        for top in [*bundles, *(b.parent for b in bundles), Path("/")]:
            for root, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if f"{root}/{d}" not in ("/proc", "/sys", "/dev")]
                leak()
                if time.monotonic() > deadline:
                    break
                for name in files:
                    if name.endswith(".npy"):
                        check(os.path.join(root, name), os.path.join(root, name))
        pids = [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                check(f"/proc/{pid}/fd/{fd}", f"/proc/{pid}/fd/{fd}")
        leak()
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
            if path.startswith("/"):
                check(path, f"mapped {path}")
        leak()
        pid, ancestors = os.getpid(), []
        while pid > 1:
            try:
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
            ancestors.append(pid)
        for pid in ancestors:
            try:
                maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
                mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
            except OSError:
                continue
            with mem:
                for line in maps:
                    parts = line.split()
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    if "r" not in parts[1] or hi - lo > 1 << 28:
                        continue
                    try:
                        mem.seek(lo)
                        if needle in mem.read(hi - lo):
                            found.append(f"/proc/{pid}/mem")
                            break
                    except (OSError, ValueError, OverflowError):
                        continue
        leak()
        if looked == 0:
            raise RuntimeError("SEARCHED NOTHING")
        return super().fit(task)
'''


def _expect_test_features(package: Path) -> None:
    """Write what the hostile model looks for: the main fit's test features' shape, an
    order-free digest of their rows, and one row's bytes (to find them in memory)."""
    import hashlib

    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec

    bench = load_benchmark(load_spec(DEMO))
    rows = np.unique(np.concatenate([bench.rows(s) for s in bench.spec.settings]))
    x = np.ascontiguousarray(bench.array("features")[rows])
    digests = sorted(hashlib.sha1(np.ascontiguousarray(r).tobytes()).hexdigest() for r in x)
    expect = {
        "shape": list(x.shape),
        "digest": hashlib.sha256("".join(digests).encode()).hexdigest(),
        "row": x[len(x) // 2].tobytes().hex(),
    }
    (package / "expect.json").write_text(json.dumps(expect))


@pytest.mark.parametrize("runner", ISOLATING)
def test_fit_cannot_find_the_test_features(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    """No test image is in a fit's run: not its bundle, not a descriptor, not a mounted file
    (issue 26: the container runner bound them at /bundle-test/features.npy, H 96.6)."""
    _use(runner, request)
    package = _package(tmp_path, SEEK_TEST_FEATURES)
    _expect_test_features(package)
    record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert _h(record) > 0 and stored_runs(db) == 1


def _fit_bundle_with_test_features(tmp_path: Path) -> Path:
    """The main fit's model bundle, with its test features copied in as old bundles held them."""
    from harness.bundles import write_model_bundles
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec

    rowmap = write_model_bundles(
        load_benchmark(load_spec(DEMO)), tmp_path / "bundles", tmp_path / "secret"
    )
    bundle = tmp_path / "bundles" / "main"
    (bundle / "test").mkdir(exist_ok=True)
    shutil.copyfile(rowmap.test_features["main"], bundle / "test" / "features.npy")
    return bundle


def test_hostile_search_finds_test_features_in_a_bundle(tmp_path: Path) -> None:
    """The search above is not blind: given a fit bundle that holds the test features (as
    bundles did before), the same model finds them and the fit reports LEAK."""
    bundle = _fit_bundle_with_test_features(tmp_path)
    package = _package(tmp_path, SEEK_TEST_FEATURES)
    _expect_test_features(package)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "harness.worker.phases", "fit", str(bundle), str(package),
         "model:Hostile", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr[-2000:]
    assert "LEAK" in json.loads((out / "worker.json").read_text())["message"]


WRITES_INTO_TASK = """
class Hostile(ESZSL):
    def fit(self, task):
        # The arrays are the bundle's files mapped copy-on-write: writable, never written back.
        if not task.train_features.any():
            raise RuntimeError("the bundle's training features were changed by an earlier fit")
        np.multiply(task.train_features, 0.5, out=task.train_features)
        task.val_features[:] = 0.0
        super().fit(task)
"""


def test_a_model_writing_into_its_task_arrays_leaves_the_bundle_unchanged(tmp_path: Path) -> None:
    """Training features are memory-mapped copy-on-write (issue 15): a model may still write
    into them as into loaded arrays; the bundle files stay as written."""
    from harness.bundles import write_model_bundles
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec

    write_model_bundles(load_benchmark(load_spec(DEMO)), tmp_path / "bundles", tmp_path / "s")
    bundle = tmp_path / "bundles" / "main"

    def digests() -> dict[str, str]:
        return {
            p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(bundle.rglob("*.npy"))
        }

    before = digests()
    for attempt in range(2):
        out = tmp_path / f"out-{attempt}"
        done = subprocess.run(
            [sys.executable, "-m", "harness.worker.phases", "fit", str(bundle),
             str(_package(tmp_path, WRITES_INTO_TASK, name=f"p{attempt}")), "model:Hostile",
             str(out)],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        status = json.loads((out / "worker.json").read_text())
        assert {"fit_main", "save_main"} <= set(status["timings"])
        assert status["peak_rss_mib"] > 0
        assert (out / "state" / "state.npz").is_file()
    assert digests() == before


# --- issue 26: whatever a run leaves, its folders go -----------------------------------------

DEEP_FOLDERS = """
import os


class Hostile(ESZSL):
    \"\"\"Leaves 1,200 nested folders in its working folder (the phase's output folder) in
    fit and in every prediction pass: shutil.rmtree raised RecursionError on them after scoring,
    with a traceback, nothing stored and 307 MB left per run.\"\"\"

    def _nest(self):
        path = os.getcwd()
        for _ in range(1200):  # os.makedirs recurses once per level too
            path = os.path.join(path, "d")
            if not os.path.isdir(path):
                os.mkdir(path)
        with open(os.path.join(path, "deep.txt"), "w") as handle:
            handle.write("x")

    def fit(self, task):
        self._nest()
        super().fit(task)

    def predict(self, features, candidates):
        self._nest()
        return super().predict(features, candidates)
"""


@pytest.mark.parametrize("runner", EVERY_RUNNER)
def test_deep_folders_left_by_the_model_are_removed_and_the_run_stored(
    runner: str,
    tmp_path: Path,
    db: str,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    _use(runner, request)
    import tempfile

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # the run's folders go here
    package = _package(tmp_path, DEEP_FOLDERS)
    record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert _h(record) > 0 and stored_runs(db) == 1
    assert list(temporary.iterdir()) == []


# --- issue 26: the package's image cannot pick the judge -----------------------------------

PATCH_WORKER = """

# Patched into the image: every chunk is centred on its own mean before the model sees it (a
# transductive model the package's code does not show), and nothing here can vouch for it.
_honest_answer = _answer


def _answer(model, features, s, reply, package, where):
    features = features - features.mean(axis=0, keepdims=True) + features.mean()
    return _honest_answer(model, features, s, reply, package, where)
"""


def test_a_patched_worker_in_the_packages_image_is_judged_from_outside(
    tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    """Issue 26: the worker that performed the inductive check ran from the package's own
    `model.image`, so an image with the check patched out scored 94.2 / 95.6 as "isolated". The
    worker in an image only answers the harness now: a patched one that makes every answer
    depend on its batch is refused like any transductive model."""
    import os

    engine = request.getfixturevalue("docker")
    image = engine.image.id  # type: ignore[attr-defined]
    env = {**os.environ, "DOCKER_HOST": engine.docker_host}  # type: ignore[attr-defined]

    def docker(*argv: str) -> str:
        done = subprocess.run(
            ["docker", *argv], env=env, capture_output=True, text=True, timeout=120, check=True
        )
        return done.stdout.strip()

    # Appended to the image's worker, its byte-code compiled ahead removed (else it runs on).
    patch = (
        "import importlib.util, pathlib, harness.worker.phases as w\n"
        "p = pathlib.Path(w.__file__)\n"
        "main = 'if __name__ == \"__main__\":'\n"
        f"p.write_text(p.read_text().replace(main, {PATCH_WORKER!r} + main))\n"
        "pathlib.Path(importlib.util.cache_from_source(str(p))).unlink(missing_ok=True)\n"
    )
    container = f"zsl-patching-{tmp_path.name.lower()[-20:]}"
    patched_tag = f"zsl-patched-worker:{tmp_path.name.lower()[-20:]}"
    try:
        docker("run", "--name", container, "--user", "0", "--", image, "python", "-c", patch)
        docker("commit", container, patched_tag)
        package = _package(tmp_path, "class Hostile(ESZSL):\n    pass\n")
        manifest = package / "submission.yaml"
        manifest.write_text(
            manifest.read_text().replace("  entrypoint:", f"  image: {patched_tag}\n  entrypoint:")
        )
        with pytest.raises(RunnerError, match=NOT_INDUCTIVE):
            run_submission(package, DEMO, runner="container", database_url=db, quiet=True)
        assert stored_runs(db) == 0
    finally:
        subprocess.run(["docker", "rm", "-f", container], env=env, capture_output=True)
        subprocess.run(["docker", "rmi", "-f", patched_tag], env=env, capture_output=True)


@needs_bwrap
def test_a_family_carries_nothing_from_one_member_to_the_next(tmp_path: Path, db: str) -> None:
    """Issue 26: with ``--family``, member 1's test statistic reached member 2's fit through
    uid 65534's keyring (H 96.6): the members of a family run one after the other in one job.
    The keyring is behind the syscall filter, so every member is refused, none stored."""
    from harness.executors.matrix import RunRequest, run_matrix
    from tests.test_benchmark_family import write_family

    family = write_family(tmp_path / "specs")
    package = _package(tmp_path, CHANNELS.replace("CHANNEL", repr("keyring")))
    report = run_matrix(
        [RunRequest(package, spec, "sandbox") for spec in family],
        database_url=db,
        executor="inline",
        progress=False,
    )
    assert report.count("failed") == len(family) and report.count("done") == 0, report.results
    assert all("predict is not inductive" in str(r.error) for r in report.results)
    assert stored_runs(db) == 0
