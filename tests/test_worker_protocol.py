"""The worker's protocol against models that try to move a score they did not earn.

Every hostile model is a copy of ESZSL generated in ``tmp_path`` whose ``predict`` (or ``fit``)
cheats in one way:

- GZSL membership: remember the images seen with the smaller (ZSL) candidate set and push them
  to unseen classes in GZSL. Rule: every predict call of a fit sees the same shuffled images.
- Batch dependence (centring on the batch mean): refused unless declared transductive. Rule: a
  score may not depend on the other images of its batch (two independent partitions agree).
- Adaptive variants of batch dependence that try to make both partitions agree: a per-image
  cache in a module global, a running mean across calls, a cache file in /tmp, a cache in shared
  memory, a helper thread or process serving a cache, a thread started at fork. Rule: each pass
  runs in a fresh fork of the fitted process, alone, without files, shared memory or helpers.
- Planting links where the worker writes its outputs (to /etc/shadow, /proc/self/environ, fake
  predictions): refused, naming the file. Rule: the harness never follows links out of /out.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest

from harness.errors import PredictionError, RunnerError
from harness.pipeline import run_submission
from tests.conftest import SPECS, SUBMISSIONS, needs_bwrap, stored_runs

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"
RUNNERS = [pytest.param("local"), pytest.param("sandbox", marks=needs_bwrap)]
NOT_INDUCTIVE = r"predict is not inductive: .*declarations\.transductive: true"


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


# --- item 1: GZSL membership --------------------------------------------------------------

MEMBERSHIP = '''
import hashlib


class Hostile(ESZSL):
    """Remembers the images predicted with the smaller candidate set (ZSL); in GZSL pushes them
    to unseen candidates and every other image to seen ones. Reads no label."""

    def fit(self, task):
        super().fit(task)
        self.seen_ = task.seen_classes
        self.small_, self.rows_ = None, set()

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


# --- item 2: batch dependence -------------------------------------------------------------

BATCH_MEAN = """
class Hostile(ESZSL):
    \"\"\"Centres test features on the mean of the batch instead of the training images.\"\"\"

    def predict(self, features, candidates):
        centred = features - features.mean(axis=0) + self.mean_
        return super().predict(centred, candidates)
"""


@pytest.mark.parametrize("runner", RUNNERS)
def test_batch_statistics_are_refused_with_the_declaration_to_make(
    runner: str, tmp_path: Path, db: str
) -> None:
    package = _package(tmp_path, BATCH_MEAN)
    with pytest.raises(RunnerError, match=r"exited with code 4") as info:
        run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    message = str(info.value)
    assert "predict is not inductive" in message
    assert "declarations.transductive: true" in message and "submission.yaml" in message
    assert "first: row" in message
    assert stored_runs(db) == 0


@pytest.mark.parametrize("runner", RUNNERS)
def test_declared_transductive_model_runs_and_is_scored(
    runner: str, tmp_path: Path, db: str
) -> None:
    package = _package(tmp_path, BATCH_MEAN, transductive=True)
    record = run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert record.logs["inductive_check"] == "skipped: declared transductive"
    assert record.submission.declarations["transductive"] is True
    assert _h(record) > 0 and stored_runs(db) == 1


@pytest.mark.parametrize("runner", RUNNERS)
def test_honest_model_records_an_isolated_check(runner: str) -> None:
    record = run_submission(SUBMISSIONS / "eszsl", DEMO, runner=runner, store=False, quiet=True)
    assert record.logs["inductive_check"] == "isolated"
    assert {"fit_main", "fit_validation", "check_main", "check_validation"} <= set(record.timings)


# --- item 2: models that adapt to the check -----------------------------------------------

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
    \"\"\"A cache in a file made in fit (writes allowed then) and written through a shared
    mapping in predict: no write() that a file-size limit stops, and SIGXFSZ ignored.\"\"\"

    def fit(self, task):
        super().fit(task)
        with open(PATH, "wb") as handle:
            handle.truncate(SLOTS * WIDTH * 4 + SLOTS)

    def predict(self, features, candidates):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        fresh = super().predict(features - features.mean(axis=0) + self.mean_, candidates)
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
    \"\"\"A cache in anonymous shared memory mapped in fit: both forked passes would map it.\"\"\"

    def fit(self, task):
        super().fit(task)
        self.memory_ = mmap.mmap(-1, SLOTS * WIDTH * 4 + SLOTS)

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
    \"\"\"Batch-centred scores cached by a helper (HELPER: thread or process) started in fit and
    reached through an abstract unix socket, which no file, fd or memory map shows.\"\"\"

    def fit(self, task):
        super().fit(task)
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

FORK_HOOK = """
import os, threading, time


class Hostile(ESZSL):
    \"\"\"Starts a thread in every forked child (os.register_at_fork): a pass with a companion.\"\"\"

    def fit(self, task):
        super().fit(task)
        os.register_at_fork(
            after_in_child=lambda: threading.Thread(target=time.sleep, args=(3,)).start()
        )
"""


@pytest.mark.parametrize(
    ("code", "match"),
    [
        pytest.param(GLOBAL_CACHE, NOT_INDUCTIVE, id="module-global-cache"),
        pytest.param(RUNNING_MEAN, NOT_INDUCTIVE, id="running-mean"),
        pytest.param(FILE_CACHE, r"SIGXFSZ: predict wrote to a file", id="tmp-file-cache"),
        pytest.param(SHARED_MEMORY, r"anonymous shared memory", id="shared-memory"),
        pytest.param(HELPER_CACHE.replace("HELPER", '"thread"'), NOT_INDUCTIVE, id="thread"),
        pytest.param(HELPER_CACHE.replace("HELPER", '"process"'), NOT_INDUCTIVE, id="daemon"),
        pytest.param(FORK_HOOK, r"started 1 thread\(s\) in the forked", id="fork-hook-thread"),
    ],
)
@pytest.mark.parametrize("runner", RUNNERS)
def test_models_that_adapt_to_the_check_are_refused(
    runner: str, code: str, match: str, tmp_path: Path, db: str
) -> None:
    # A cache file name of this test only: under the local runner it lands in the host's /tmp.
    name = f"zsl-score-cache-{uuid.uuid4().hex}.pkl"
    package = _package(tmp_path, code.replace("CACHE_NAME", repr(name)))
    try:
        with pytest.raises(RunnerError, match=r"exited with code 4") as info:
            run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    finally:
        (Path(tempfile.gettempdir()) / name).unlink(missing_ok=True)
    assert re.search(match, str(info.value)), str(info.value)
    assert stored_runs(db) == 0


@needs_bwrap
def test_cache_written_through_a_mapping_is_seen_by_the_snapshot(tmp_path: Path, db: str) -> None:
    """The sandbox's /tmp is the job's own: a pass that touched a file there is refused."""
    package = _package(tmp_path, MMAP_FILE_CACHE)
    with pytest.raises(RunnerError, match=r"prediction pass changed /tmp/zsl-score-cache\.bin"):
        run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert stored_runs(db) == 0


def test_in_process_check_catches_batch_statistics(tmp_path: Path) -> None:
    """GPU jobs cannot fork: both passes run in the fit process, which still catches a model
    that uses its batch (not one that caches across calls; the record says which check ran)."""
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec
    from harness.tasks import write_model_bundle

    write_model_bundle(load_benchmark(load_spec(DEMO)), tmp_path / "bundle")
    for name, code, expected in (("honest", "class Hostile(ESZSL):\n    pass\n", 0),
                                 ("batch", BATCH_MEAN, 4)):  # fmt: skip
        out = tmp_path / f"out-{name}"
        done = subprocess.run(
            [sys.executable, "-m", "harness.worker", str(tmp_path / "bundle"),
             str(_package(tmp_path, code, name=name)), "model:Hostile", str(out),
             "--inductive-check", "in-process"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == expected, done.stderr[-2000:]
        status = json.loads((out / "worker.json").read_text())
        assert status["inductive_check"] == "in-process"
        assert status["exit_code"] == expected
        if expected:
            assert "predict is not inductive" in status["message"]


# --- item 7: links planted where the worker writes ----------------------------------------


def _plant(target_code: str, *, when: str, worker_json: bool = False) -> str:
    """A model that, in ``fit`` or in every ``predict`` call, replaces each file name the
    worker writes (old and new layouts) with what ``target_code`` makes at ``tmp``.

    ``worker.json`` is planted only with a harmless target: the old worker wrote it with a
    plain ``write_text``, which would write through a link to a system file.
    """
    hook = f"""
    def _plant(self):
        import os
        names = {["worker.json"] if worker_json else []!r}
        for s in ("zsl", "gzsl", "zsl_val", "gzsl_val"):
            names += [s + ".safetensors", s + ".scores.npy", s + ".topk_indices.npy",
                      s + ".topk_scores.npy"]
        for name in names:
            path = os.path.join(os.getcwd(), name)
            tmp = path + ".planted"
            try:
                if os.path.isdir(tmp) and not os.path.islink(tmp):
                    os.rmdir(tmp)
                elif os.path.lexists(tmp):
                    os.unlink(tmp)
{target_code}
                os.replace(tmp, path)
            except OSError:
                pass
"""
    call = "self._plant()"
    if when == "fit":
        body = f"    def fit(self, task):\n        super().fit(task)\n        {call}\n"
    else:
        body = (
            "    def predict(self, features, candidates):\n"
            f"        out = super().predict(features, candidates)\n        {call}\n"
            "        return out\n"
        )
    return "class Hostile(ESZSL):\n" + hook + body


TARGETS = {
    "etc-shadow": "                os.symlink('/etc/shadow', tmp)",
    "proc-environ": "                os.symlink('/proc/self/environ', tmp)",
    "fake-labels": "                os.symlink(FAKE, tmp)",
    "fifo": "                os.mkfifo(tmp)",
    "directory": "                os.mkdir(tmp)",
}


@pytest.mark.parametrize("when", ["fit", "predict"])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_entries_planted_at_output_names_are_refused_naming_the_file(
    target: str, when: str, tmp_path: Path, db: str
) -> None:
    """Old harness: a link planted after the worker wrote a file was followed (and a link to
    /proc/self/environ crashed `zsl run`). Now the worker writes last, after every model
    process is gone, and refuses names the model took; each failure is one RunnerError."""
    fake = tmp_path / "fake.npy"
    np.save(fake, np.eye(20, dtype=np.float32))
    code = _plant(TARGETS[target], when=when, worker_json=target == "fake-labels")
    code = code.replace("FAKE", repr(str(fake)))
    package = _package(tmp_path, code)
    with pytest.raises(RunnerError) as info:
        run_submission(package, DEMO, runner="local", database_url=db, quiet=True)
    message = str(info.value)
    # The worker refuses (exit 4); the runner's polling of the folder may see the model's own
    # renames first and stop the run itself. Either way: a RunnerError naming a file there.
    assert "exited with code 4" in message or "output folder" in message, message
    assert "/out" in message or str(tmp_path) in message or "zsl-run-" in message
    assert any(n in message for n in (".scores.npy", "worker.json", ".safetensors", ".topk_")), (
        message
    )
    assert stored_runs(db) == 0


@needs_bwrap
@pytest.mark.parametrize("when", ["fit", "predict"])
def test_links_planted_in_the_sandbox_are_refused_naming_the_file(
    when: str, tmp_path: Path, db: str
) -> None:
    package = _package(tmp_path, _plant(TARGETS["etc-shadow"], when=when))
    with pytest.raises(RunnerError, match=r"/out/[a-z_]+\.(scores\.npy|safetensors)|worker\.json"):
        run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert stored_runs(db) == 0


def test_planted_link_is_never_a_prediction_error(tmp_path: Path, db: str) -> None:
    """The old harness answered a planted link with a PredictionError from reading the target
    (or an uncaught OSError); the rule is a RunnerError before anything is read."""
    package = _package(tmp_path, _plant(TARGETS["proc-environ"], when="predict"))
    try:
        run_submission(package, DEMO, runner="local", database_url=db, quiet=True)
    except RunnerError:
        pass
    except (PredictionError, OSError) as err:  # pragma: no cover - the old behaviour
        pytest.fail(f"a planted link reached the prediction reader: {err!r}")
    else:
        pytest.fail("a run whose outputs were replaced by links was accepted")
    assert stored_runs(db) == 0


# --- the comparison itself ----------------------------------------------------------------


def test_canonical_order_follows_content_not_position() -> None:
    """Reruns batch every image the same way (bit-identical results) whatever the shuffle."""
    from harness.worker import canonical_order

    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 7)).astype(np.float32)  # 28 bytes a row: padded words
    perm = rng.permutation(len(x))
    np.testing.assert_array_equal(x[canonical_order(x)], x[perm][canonical_order(x[perm])])


def test_chunk_sizes_cover_every_row_in_several_chunks() -> None:
    from harness.worker import chunk_sizes

    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 10, 1001):
        for cap in (1, 7, 10**9):
            sizes = chunk_sizes(n, cap, rng)
            assert sum(sizes) == n and max(sizes) <= cap
            assert n < 2 or len(sizes) >= 2


def test_topk_comparison_allows_float_noise_and_ties_at_the_cut_only() -> None:
    from harness.worker import _topk_mismatch

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


# --- the main fit's test features reach predict only --------------------------------------

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
        for b in bundles:
            check(b / "test" / "features.npy", f"{b}/test/features.npy")
        for top in [*bundles, *(b.parent for b in bundles), Path("/")]:
            for root, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if f"{root}/{d}" not in ("/proc", "/sys", "/dev")]
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
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
            if path.startswith("/"):
                check(path, f"mapped {path}")
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
        if found:
            raise RuntimeError(f"LEAK: the test features at {sorted(set(found))}")
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


@needs_bwrap
def test_fit_cannot_find_the_test_features_in_the_sandbox(tmp_path: Path, db: str) -> None:
    """The main fit's test features are not in the bundle: the sandbox runner hands the worker a
    descriptor, which no process running model code holds, and the worker is not dumpable."""
    package = _package(tmp_path, SEEK_TEST_FEATURES)
    _expect_test_features(package)
    record = run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert record.logs["test_features"] == "descriptor"
    assert _h(record) > 0 and stored_runs(db) == 1


def test_hostile_search_finds_test_features_in_a_bundle(tmp_path: Path) -> None:
    """The search above is not blind: given a bundle that holds the test features (as bundles
    did before they moved out), the same model finds them and the worker reports LEAK."""
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec
    from harness.tasks import write_model_bundle

    write_model_bundle(load_benchmark(load_spec(DEMO)), tmp_path / "bundle")
    package = _package(tmp_path, SEEK_TEST_FEATURES)
    _expect_test_features(package)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "harness.worker", str(tmp_path / "bundle"), str(package),
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
    into them as into loaded arrays; the bundle files, which every later fit maps, stay as
    written."""
    import hashlib

    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec
    from harness.tasks import write_model_bundle

    bundle = tmp_path / "bundle"
    write_model_bundle(load_benchmark(load_spec(DEMO)), bundle)

    def digests() -> dict[str, str]:
        return {
            p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(bundle.rglob("*.npy"))
        }

    before = digests()
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "harness.worker", str(bundle),
         str(_package(tmp_path, WRITES_INTO_TASK)), "model:Hostile", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    status = json.loads((out / "worker.json").read_text())
    assert {"fit_validation", "fit_main"} <= set(status["timings"])
    assert status["peak_rss_mib"] > 0
    assert digests() == before
