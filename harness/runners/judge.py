"""The judge: a model package's fit and prediction passes, each in its own isolated run, and
every verdict made here, outside them.

See docs/runners.md.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.bundles import RowMap, write_model_bundles
from harness.class_embedding import embeddings_for
from harness.core.errors import RunnerError
from harness.core.tempdirs import remove_tree
from harness.hyperparameters import Hyperparameters
from harness.runners import runners
from harness.runners.base import RunJob, RunOutcome, truncate
from harness.runners.failure import explain_failure, failure_message, timeout_reason
from harness.runners.outputs import (
    STATE_DIR,
    read_worker_status,
    worker_hyperparameters,
    worker_timings,
)
from harness.runners.progress import ProgressEvent, ProgressSink, current_sink, current_start
from harness.runners.protocol import (
    DENSE,
    DTYPES,
    MESSAGE_LIMIT,
    MODEL_ERROR,
    OK,
    OP_PREDICT,
    OP_QUIT,
    PROTOCOL,
    READY,
    REPLY,
    REQUEST,
    TOPK,
    Closed,
    nonfinite_message,
    read_exact,
    read_into,
    read_json,
    send_json,
    write_all,
)
from harness.runners.state import ModelState, copy_state, take_state
from harness.submission.predictions import write_predictions

if TYPE_CHECKING:
    from harness.data.prepare import PreparedBenchmark

__all__ = [
    "RTOL",
    "ModelRun",
    "canonical_order",
    "check_ran",
    "chunk_sizes",
    "pass_settings",
    "run_model",
]

# One predict call holds at most this many scores (rows x candidates): the dense matrix of a
# huge label space never exists at once, and top-K settings keep only the K best per row.
TOPK_CHUNK_CELLS = 50_000_000
# Float noise allowed between the two passes (BLAS kernels differ with the batch size).
RTOL = 1e-4
ATOL = 1e-5
EXIT_MODEL_ERROR = 3
EXIT_PROTOCOL = 4
#: How the record names each inductive check (``logs["inductive_check"]``).
CHECK_LABELS = {
    "passes": "separate runs",
    "skip": "skipped: declared transductive",
}


# --- what one fit predicts ---------------------------------------------------------------


@dataclass(frozen=True)
class PassSetting:
    name: str
    index: int
    candidates: np.ndarray
    keep: int | None  # K of a top-K setting (at most the number of candidates); None: dense
    cap: int  # rows per predict call at most

    @property
    def width(self) -> int:
        return len(self.candidates) if self.keep is None else self.keep


def pass_settings(bench: PreparedBenchmark, settings: list[str]) -> list[PassSetting]:
    """The prediction settings of one fit, in bundle order, as a pass serves them."""
    fmt = bench.spec.predictions
    found = []
    for index, name in enumerate(settings):
        candidates = np.asarray(bench.columns(name), dtype=np.int64)
        # Top-K benchmarks (huge label spaces) keep the K best per test row; validation and
        # scale rows are dense.
        keep = None
        if fmt.format == "topk" and name in bench.spec.settings:
            assert fmt.k is not None
            keep = min(int(fmt.k), len(candidates))
        cap = max(1, TOPK_CHUNK_CELLS // max(1, len(candidates)))
        found.append(PassSetting(name, index, candidates, keep, cap))
    return found


_MULTIPLIERS = np.random.default_rng(20240601).integers(
    1, 2**63, size=(2, 4096), dtype=np.uint64
) | np.uint64(1)
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _row_keys(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 64-bit hashes of each row's bytes (exact, vectorised; not cryptographic)."""
    n = len(x)
    keys = (np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64))
    if n == 0:
        return keys
    width = int(np.prod(x.shape[1:], dtype=np.int64)) * x.dtype.itemsize
    words = max(1, -(-width // 8))
    multipliers = _MULTIPLIERS
    if words > multipliers.shape[1]:
        multipliers = np.random.default_rng(20240601).integers(
            1, 2**63, size=(2, words), dtype=np.uint64
        ) | np.uint64(1)
    step = max(1, (32 << 20) // max(1, words * 8))
    for lo in range(0, n, step):
        block = np.ascontiguousarray(x[lo : lo + step]).view(np.uint8).reshape(-1, width)
        if width % 8:
            pad = np.zeros((len(block), words * 8 - width), dtype=np.uint8)
            block = np.concatenate([block, pad], axis=1)
        w = block.view("<u8")
        for key, mult in zip(keys, multipliers, strict=True):
            h = (w * mult[:words]).sum(axis=1, dtype=np.uint64)
            h ^= h >> np.uint64(31)
            h *= _MIX
            h ^= h >> np.uint64(29)
            key[lo : lo + len(block)] = h
    return keys


def canonical_order(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` ordered by a hash of their bytes: fixed by content, blind to class."""
    first, second = _row_keys(x)
    return np.lexsort((np.arange(len(x)), second, first))


def chunk_sizes(n: int, cap: int, rng: np.random.Generator) -> list[int]:
    """Sizes summing to ``n``: each in [m/2, m] with m = min(cap, ceil(n/3)), so a pass of
    three or more images always has several chunks of varying sizes."""
    if n <= 0:
        return []
    most = max(1, min(cap, -(-n // 3)))
    sizes: list[int] = []
    left = n
    while left > 0:
        size = min(left, int(rng.integers(max(1, most // 2), most + 1)))
        sizes.append(size)
        left -= size
    return sizes


def _split(order: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    return np.split(order, np.cumsum(sizes)[:-1]) if sizes else []


Plan = list[tuple[PassSetting, np.ndarray]]


def canonical_plan(settings: list[PassSetting], order: np.ndarray, *, whole: bool = False) -> Plan:
    """The result pass: settings one after the other, chunks of the content order.

    ``whole`` (transductive models): each setting's images in one call, or in ``cap``-row
    chunks where one call would hold too many scores.
    """
    plan: Plan = []
    n = len(order)
    for s in settings:
        if whole:
            sizes = [min(s.cap, n - lo) for lo in range(0, n, s.cap)]
        else:
            sizes = chunk_sizes(n, s.cap, np.random.default_rng([n, s.cap, 1]))
        plan += [(s, chunk) for chunk in _split(order, sizes)]
    return plan


def check_plan(settings: list[PassSetting], n: int, rng: np.random.Generator) -> Plan:
    """The check pass: a random order and random chunk sizes per setting, calls interleaved."""
    plan: Plan = []
    for s in settings:
        plan += [(s, c) for c in _split(rng.permutation(n), chunk_sizes(n, s.cap, rng))]
    return [plan[i] for i in rng.permutation(len(plan))]


# --- comparing the passes ----------------------------------------------------------------


def _tolerance(dtype: np.dtype[Any], scale: float) -> tuple[float, float]:
    eps = float(np.finfo(dtype).eps)
    return max(RTOL, 4 * eps), max(ATOL, 4 * eps) * scale


def _scale(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def _dense_mismatch(
    a: np.ndarray, b: np.ndarray, rtol: float, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    """(rows that differ, largest |a - b| per row) beyond ``atol + rtol * |a|``."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(invalid="ignore"):
        delta = np.where(close, 0.0, np.abs(a64 - b64))
    largest: np.ndarray = np.nan_to_num(delta, nan=np.inf).max(axis=1, initial=0.0)
    return np.asarray(~close.all(axis=1)), largest


def _sorted_topk(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((indices, -scores.astype(np.float64)), axis=1)
    return np.take_along_axis(indices, order, 1), np.take_along_axis(
        scores.astype(np.float64), order, 1
    )


def _topk_mismatch(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], rtol: float, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose top-K lists disagree beyond float noise, and the largest score change.

    Agreement: the sorted scores match; a column in both lists has matching scores; a column
    in one list only scores within tolerance of the other list's K-th score (a near tie at the
    cut, which float noise may break either way).
    """
    ai, asc = _sorted_topk(*a)
    bi, bsc = _sorted_topk(*b)
    n, k = ai.shape
    if k == 0:
        return np.zeros(n, dtype=bool), np.zeros(n)
    with np.errstate(invalid="ignore"):
        tol = atol + rtol * np.maximum(np.abs(asc), np.abs(bsc))
        diff = np.abs(asc - bsc)
        same_nan = np.isnan(asc) & np.isnan(bsc)
        bad = ((diff > tol) | np.isnan(diff)) & ~same_nan
        # Pair up the columns of both lists by sorting them together.
        cols = np.concatenate([ai, bi], axis=1)
        vals = np.concatenate([asc, bsc], axis=1)
        side = np.concatenate([np.zeros_like(ai), np.ones_like(bi)], axis=1)
        order = np.argsort(cols, axis=1, kind="stable")
        cols, vals, side = (np.take_along_axis(v, order, 1) for v in (cols, vals, side))
        pair = cols[:, 1:] == cols[:, :-1]
        pair_tol = atol + rtol * np.maximum(np.abs(vals[:, 1:]), np.abs(vals[:, :-1]))
        pair_bad = pair & (np.abs(vals[:, 1:] - vals[:, :-1]) > pair_tol)
        paired = np.zeros_like(cols, dtype=bool)
        paired[:, 1:] |= pair
        paired[:, :-1] |= pair
        kth = np.where(side == 0, bsc[:, -1:], asc[:, -1:])
        lone_bad = ~paired & (vals > kth + atol + rtol * np.abs(kth))
        # The largest change per row: of a sorted score, of a column in both lists, or of a
        # column in one list only above the other's cut.
        changes = [
            np.where(bad, diff, 0.0),
            np.where(pair_bad, np.abs(vals[:, 1:] - vals[:, :-1]), 0.0),
            np.where(lone_bad, vals - kth, 0.0),
        ]
    rows = bad.any(axis=1) | pair_bad.any(axis=1) | lone_bad.any(axis=1)
    delta = np.max([np.nan_to_num(c, nan=np.inf).max(axis=1) for c in changes], axis=0)
    return np.asarray(rows), np.asarray(delta)


@dataclass
class _Outputs:
    """One setting's canonical outputs, all rows of the fit in shuffled order."""

    setting: PassSetting
    arrays: tuple[np.ndarray, ...]

    def scores(self) -> np.ndarray:
        return self.arrays[-1]


@dataclass
class Verdict:
    """Why a pass or the comparison of two refuses the run: the worker's exit code it stands
    for (3 model error, 4 protocol violation), the message and the package line, if known."""

    code: int
    message: str
    location: str | None = None

    def status(self) -> dict[str, Any]:
        """As ``worker.json`` would say it (:func:`harness.runners.failure.explain_failure`)."""
        return {"exit_code": self.code, "message": self.message, "location": self.location}


@dataclass
class _Check:
    """What the check pass found."""

    n: int
    differs: np.ndarray
    first: tuple[int, str, float, str] | None = None  # row, setting, |change|, tolerance

    def add(self, s: PassSetting, rows: np.ndarray, bad: np.ndarray, delta: np.ndarray,
            tol: str) -> None:  # fmt: skip
        if not bad.any():
            return
        self.differs[rows[bad]] = True
        row = int(rows[bad].min())
        if self.first is None or row < self.first[0]:
            at = int(np.flatnonzero(rows == row)[0])
            self.first = (row, s.name, float(delta[at]), tol)

    def verdict(self) -> Verdict | None:
        if self.first is None:
            return None
        row, setting, delta, tol = self.first
        count = int(self.differs.sum())
        return Verdict(
            EXIT_PROTOCOL,
            f"predict is not inductive: the scores of {count} of {self.n} test images changed"
            " with the other images of their batch (first: shuffled test row"
            f" {row} of the fit, setting '{setting}', a change of"
            f" {delta:.3g} where float noise allows {tol}). A model whose scores for an"
            " image depend on other test images (batch statistics, caches or running means"
            " across calls) is transductive: declare `declarations.transductive: true` in"
            " submission.yaml, or score each image on its own",
        )


# --- one pass: the harness's side of the protocol -----------------------------------------


def _tell(sink: ProgressSink | None, began: float, phase: str, fit: str, state: str, *,
          setting: str | None = None, seconds: float | None = None) -> None:  # fmt: skip
    if sink is not None:
        sink.event(ProgressEvent(phase, fit, state, setting, seconds), time.perf_counter() - began)


@dataclass
class PassConversation:
    """One prediction pass as the harness conducts it (a :class:`~harness.runners.base.
    Conversation`): sends the plan's chunks one by one, checks and keeps every answer, or the
    verdict that ended it. ``canon``: the first pass's outputs, which a check pass is compared
    with as it goes."""

    fit: str
    settings: list[PassSetting]
    plan: Plan
    features: np.ndarray
    canon: dict[str, _Outputs] | None = None
    began: float = field(default_factory=time.perf_counter)
    # Taken where the pass is planned: the conversation runs in a thread, which does not see
    # the caller's context (harness.runners.progress.reporting).
    sink: ProgressSink | None = field(default_factory=current_sink)
    parts: dict[str, list[tuple[np.ndarray, tuple[np.ndarray, ...]]]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    verdict: Verdict | None = None
    check: _Check | None = None
    peak_rss_mib: float | None = None
    started: float = 0.0
    asked: str | None = None  # the setting of the chunk asked last (None: none asked yet)

    def phase(self) -> str:
        """What the pass is doing, as its timing key names it: ``predict_<setting>`` (the
        setting of the chunk asked last; before the first, the first setting's, whose chunk
        waits for the state to load) or, for a check pass, ``check_<fit>``."""
        if self.canon is not None:
            return f"check_{self.fit}"
        return f"predict_{self.asked or (self.settings[0].name if self.settings else '')}"

    def __call__(self, requests: int, replies: int) -> bool:
        try:
            self._converse(requests, replies)
        except Closed:
            if self.verdict is None:
                self.verdict = Verdict(
                    EXIT_MODEL_ERROR, "the prediction pass stopped answering (it exited or died)"
                )
            return False
        except _Refused as refused:
            self.verdict = refused.verdict
            return False
        return True

    def _converse(self, requests: int, replies: int) -> None:
        self.started = time.perf_counter()
        send_json(
            requests,
            {
                "settings": [
                    {"name": s.name, "candidates": s.candidates.tolist(), "keep": s.keep}
                    for s in self.settings
                ]
            },
        )
        head = REPLY.unpack(read_exact(replies, REPLY.size))
        if head[0] != READY:
            self._error(replies, head)
        if self.canon is not None:
            self.check = _Check(len(self.features), np.zeros(len(self.features), dtype=bool))
            _tell(self.sink, self.began, "check", self.fit, "start")
        current: str | None = None
        for s, rows in self.plan:
            if self.canon is None and s.name != current:
                if current is not None:
                    done = self.timings[f"predict_{current}"]
                    self._predicted(current, done)
                current = s.name
                _tell(self.sink, self.began, "predict", self.fit, "start", setting=current)
            start = time.perf_counter()
            self.asked = s.name
            got = self._predict(requests, replies, s, rows)
            if self.canon is None:
                key = f"predict_{s.name}"
                self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - start
                self.parts.setdefault(s.name, []).append((rows, got))
            else:
                self._compare(s, rows, got)
        if current is not None:
            self._predicted(current, self.timings[f"predict_{current}"])
        write_all(requests, REQUEST.pack(OP_QUIT, 0, 0, 0, b""))
        try:
            final = read_json(replies, 4096)
            value = final.get("peak_rss_mib")
            if isinstance(value, int | float) and 0 <= value < 1e9:
                self.peak_rss_mib = float(value)
        except (ValueError, Closed):
            pass  # only a measurement: the pass's answers are all in
        if self.check is not None:
            seconds = time.perf_counter() - self.started
            _tell(self.sink, self.began, "check", self.fit, "done", seconds=seconds)

    def _predicted(self, setting: str, seconds: float) -> None:
        _tell(self.sink, self.began, "predict", self.fit, "done", setting=setting, seconds=seconds)

    def _error(self, replies: int, head: tuple[int, ...]) -> None:
        status, _kind, _code, length, _rows, _cols = head
        if status in (MODEL_ERROR, PROTOCOL) and length <= MESSAGE_LIMIT:
            text = read_exact(replies, length).decode("utf-8", "replace")
            code = EXIT_MODEL_ERROR if status == MODEL_ERROR else EXIT_PROTOCOL
            try:
                payload = json.loads(text)
            except ValueError:
                payload = None
            if not isinstance(payload, dict):
                raise _Refused(Verdict(code, text[:4000]))
            location = payload.get("location")
            raise _Refused(
                Verdict(
                    code,
                    str(payload.get("message", ""))[:4000],
                    location[:500] if isinstance(location, str) else None,
                )
            )
        raise _Refused(Verdict(EXIT_PROTOCOL, "the prediction pass answered out of protocol"))

    def _predict(
        self, requests: int, replies: int, s: PassSetting, rows: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Ask for one chunk and read the answer, checked against what was asked."""
        x = np.ascontiguousarray(self.features[rows])
        ask = REQUEST.pack(OP_PREDICT, s.index, len(rows), x.shape[1], x.dtype.str.encode())
        write_all(requests, ask)
        write_all(requests, memoryview(x.data))
        head = REPLY.unpack(read_exact(replies, REPLY.size))
        if head[0] != OK:
            self._error(replies, head)
        _status, kind, code, _length, n, width = head
        if kind != (DENSE if s.keep is None else TOPK) or code not in DTYPES:
            raise _Refused(Verdict(EXIT_PROTOCOL, "the prediction pass answered out of protocol"))
        if (n, width) != (len(rows), s.width):
            raise _Refused(
                Verdict(
                    EXIT_PROTOCOL,
                    f"the prediction pass answered {(n, width)} for setting '{s.name}';"
                    f" expected {(len(rows), s.width)}",
                )
            )
        dtypes = [DTYPES[code]] if s.keep is None else [np.dtype("<i8"), DTYPES[code]]
        arrays = [np.empty((int(n), int(width)), dtype=dtype) for dtype in dtypes]
        for array in arrays:
            read_into(replies, memoryview(array.data))
        problem = nonfinite_message(s.name, arrays[-1], None if s.keep is None else arrays[0])
        if problem is not None:
            raise _Refused(Verdict(EXIT_MODEL_ERROR, problem))
        if s.keep is not None:
            columns = arrays[0]
            if ((columns < 0) | (columns >= len(s.candidates))).any():
                raise _Refused(
                    Verdict(
                        EXIT_PROTOCOL,
                        f"the prediction pass sent top-K columns out of range for setting"
                        f" '{s.name}'",
                    )
                )
        return tuple(arrays)

    def _compare(self, s: PassSetting, rows: np.ndarray, got: tuple[np.ndarray, ...]) -> None:
        assert self.canon is not None and self.check is not None
        mine = self.canon[s.name].arrays
        rtol, atol = _tolerance(mine[-1].dtype, _scale(mine[-1]))
        if s.keep is None:
            bad, delta = _dense_mismatch(mine[0][rows], got[0], rtol, atol)
        else:
            bad, delta = _topk_mismatch(
                (mine[0][rows], mine[1][rows]), (got[0], got[1]), rtol, atol
            )
        self.check.add(s, rows, bad, delta, f"{atol:.3g} + {rtol:.3g} x |score|")

    def outputs(self) -> dict[str, _Outputs]:
        """Every setting's answers, all rows of the fit (none: empty)."""
        n = len(self.features)
        outputs: dict[str, _Outputs] = {}
        for s in self.settings:
            chunks = self.parts.get(s.name, [])
            kinds: list[np.dtype[Any]] = [np.dtype("<f4")]
            if s.keep is not None:
                kinds.insert(0, np.dtype("<i8"))
            arrays = []
            for i, default in enumerate(kinds):
                dtype: np.dtype[Any] = (
                    np.result_type(*(c[1][i].dtype for c in chunks)) if chunks else default
                )
                array = np.empty((n, s.width), dtype=dtype)
                for rows, got in chunks:
                    array[rows] = got[i]
                arrays.append(array)
            outputs[s.name] = _Outputs(s, tuple(arrays))
        return outputs


class _Refused(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


# --- the run: fits, passes, verdicts ------------------------------------------------------


@dataclass
class ModelRun:
    """What :func:`run_model` gives the pipeline: the prediction files it made, and what the
    run record keeps of the phases."""

    paths: dict[str, Path]
    states: dict[str, str]  # fit -> content hash of its saved state (harness.runners.state)
    timings: dict[str, float]
    hyperparameters: dict[str, Hyperparameters]
    logs: dict[str, str]
    image: str | None = None


def check_ran(outcome: RunOutcome, what: str, runner: str) -> None:
    """Raise a :class:`RunnerError` naming ``what`` ran on ``runner`` (with the last lines of
    its stderr that the reason does not already say: :func:`failure_message`; a timeout with
    ``resources.time_s``: :func:`timeout_reason`) unless the run succeeded."""
    if outcome.ok:
        return
    timed = replace(outcome, reason=timeout_reason(outcome.reason, None))
    raise RunnerError(failure_message(f"{what} on runner '{runner}'", timed))


@dataclass
class _Phases:
    """The phases of one run so far: their logs, timings and the image they ran in."""

    base: RunJob
    runner: str
    name: str
    work: Path
    logs: list[tuple[str, RunOutcome]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    peak_rss_mib: float = 0.0
    image: str | None = None
    # the clock progress is reported on: the reporting block's, else this run's
    began: float = field(default_factory=lambda: current_start() or time.perf_counter())
    began_run: float = field(default_factory=time.perf_counter)

    def run(self, job: RunJob, label: str, phase: str | None = None) -> RunOutcome:
        """``job`` on the runner, on what is left of the run's wall clock; ``phase``: its
        timing key (a prediction pass names its own: :meth:`PassConversation.phase`)."""
        # One wall clock for the whole run (resources.time_s), its phases taking turns on it.
        left = self.base.timeout_s - (time.perf_counter() - self.began_run)
        conversation = job.conversation
        if phase is None and isinstance(conversation, PassConversation):
            phase = conversation.phase()
        if left <= 0:
            reason = timeout_reason(
                f"timed out after {self.base.timeout_s:g} s; it was used up before"
                f" {phase or label} started",
                None,
                self.base.timeout_s,
            )
            raise RunnerError(f"{self.name} on runner '{self.runner}': {reason}")
        outcome = runners.get(self.runner).run(replace(job, timeout_s=left))
        if isinstance(conversation, PassConversation):
            phase = conversation.phase()  # the setting it was predicting when it stopped
        # The run's budget, not what was left of it when this phase started.
        outcome.reason = timeout_reason(outcome.reason, phase, self.base.timeout_s)
        self.logs.append((label, outcome))
        if "image" in outcome.details:
            self.image = str(outcome.details["image"])
        return outcome

    def fit(self, fit: str, bundle: Path) -> tuple[ModelState, dict[str, Hyperparameters]]:
        """The fit phase of ``fit``: its state, checked and kept, and what the model chose."""
        out = self.work / f"fit-{fit}"
        out.mkdir()
        job = replace(self.base, phase="fit", bundle=bundle, out=out)
        outcome = self.run(job, f"fit ({fit})", f"fit_{fit}")
        check_ran(outcome, self.name, self.runner)
        status = read_worker_status(out)
        if status.get("exit_code") != 0:
            raise RunnerError(
                f"{out / 'worker.json'}: the worker exited 0 but reports"
                f" {status.get('exit_code')!r} ({str(status.get('message', ''))[:500]})"
            )
        self.timings.update(worker_timings(status, out))
        self.peak_rss_mib = max(self.peak_rss_mib, self.timings.pop("peak_rss_mib", 0.0))
        chosen = worker_hyperparameters(status, out)
        state = take_state(
            out / STATE_DIR, self.work / "state" / fit, limit_bytes=job.memory_bytes, fit=fit
        )
        remove_tree(out)  # what else the fit left: nothing of it reaches a pass
        return state, chosen

    def predict(self, conversation: PassConversation, state: ModelState, label: str) -> None:
        """One prediction pass in a fresh run over a private copy of ``state``; everything of
        the pass (its copy, its output folder) is gone before this returns."""
        folder = self.work / f"pass-{conversation.fit}-{label}"
        folder.mkdir()
        try:
            copy = copy_state(state, folder / "state")
            out = folder / "out"
            out.mkdir()
            job = replace(
                self.base, phase="predict", state=copy, out=out, bundle=out,
                conversation=conversation,
            )  # fmt: skip
            outcome = self.run(job, f"{label} pass ({conversation.fit})")
        finally:
            remove_tree(folder)
        if conversation.peak_rss_mib is not None:
            self.peak_rss_mib = max(self.peak_rss_mib, conversation.peak_rss_mib)
        verdict = conversation.verdict
        if verdict is None and outcome.ok:
            return
        # Killed at its wall clock, the pass stops answering too: the clock is the cause.
        if verdict is None or outcome.reason.startswith("timed out"):
            check_ran(explain_failure(job, outcome, status={}), self.name, self.runner)
        assert verdict is not None
        if outcome.ok or outcome.exit_code != verdict.code:
            outcome = replace(outcome, exit_code=verdict.code, reason="refused by the harness")
        outcome = explain_failure(job, outcome, status=verdict.status())
        raise RunnerError(f"{self.name} on runner '{self.runner}': {outcome.reason}")

    def record_logs(self) -> dict[str, str]:
        """The record's logs: every phase's stdout and stderr, each headed by its phase where
        there is anything to show, the whole kept as one run's log is (head and tail)."""
        streams = {}
        for stream in ("stdout", "stderr"):
            parts = [
                f"--- {label} ---\n{text}" if len(self.logs) > 1 else text
                for label, outcome in self.logs
                if (text := getattr(outcome, stream).strip("\n"))
            ]
            streams[stream] = truncate("\n".join(parts).encode("utf-8", "replace"))
        return {"reason": "ok", **streams}


def run_model(
    bench: PreparedBenchmark,
    base: RunJob,
    runner: str,
    work: Path,
    *,
    name: str,
    transductive: bool,
    class_embedding: str = "default",
) -> ModelRun:
    """Run a model package on ``bench``: per fit, the fit phase and its prediction passes, each
    in a fresh run of ``runner`` built from ``base`` (the package's snapshot, seed and
    resources); returns the prediction files it wrote under ``work/predictions``. Its bundles
    hold the class embeddings its ``class_embedding`` declaration asks for
    (:func:`harness.class_embedding.embeddings_for`; a kind ``bench`` lacks is refused).

    Raises :class:`RunnerError` with the phase's explanation (the model's message and line,
    the log's path) when a phase fails or the harness refuses the passes.
    """
    embeddings = embeddings_for(class_embedding, bench.spec, package=name)
    rowmap = write_model_bundles(bench, work / "bundles", work / "secret", embeddings=embeddings)
    phases = _Phases(base, runner, name, work)
    states: dict[str, str] = {}
    chosen: dict[str, Hyperparameters] = {}
    outputs: dict[str, _Outputs] = {}
    fits = ["validation", "main"] if "validation" in rowmap.n_rows else ["main"]
    for fit in fits:
        state, hyper = phases.fit(fit, work / "bundles" / fit)
        states[fit] = state.sha256
        chosen.update(hyper)
        outputs.update(_passes(phases, rowmap, bench, fit, state, transductive))
    phases.timings["peak_rss_mib"] = round(phases.peak_rss_mib, 1)
    paths = _prediction_files(outputs, rowmap, bench, work / "predictions")
    logs = phases.record_logs()
    logs["inductive_check"] = CHECK_LABELS["skip" if transductive else "passes"]
    return ModelRun(paths, states, phases.timings, chosen, logs, phases.image)


def _passes(
    phases: _Phases,
    rowmap: RowMap,
    bench: PreparedBenchmark,
    fit: str,
    state: ModelState,
    transductive: bool,
) -> dict[str, _Outputs]:
    """The canonical pass of ``fit`` and, for an inductive package, the check pass."""
    features = np.load(rowmap.test_features[fit], allow_pickle=False, mmap_mode="r")
    settings = pass_settings(bench, [s for s, f in rowmap.fits.items() if f == fit])
    order = canonical_order(features)
    canonical = PassConversation(
        fit, settings, canonical_plan(settings, order, whole=transductive), features,
        began=phases.began,
    )  # fmt: skip
    phases.predict(canonical, state, "canonical")
    phases.timings.update(canonical.timings)
    outputs = canonical.outputs()
    if transductive:
        return outputs
    rng = np.random.default_rng(secrets.randbits(128))
    check = PassConversation(
        fit, settings, check_plan(settings, len(order), rng), features, canon=outputs,
        began=phases.began,
    )  # fmt: skip
    began = time.perf_counter()
    phases.predict(check, state, "check")
    phases.timings[f"check_{fit}"] = time.perf_counter() - began
    assert check.check is not None
    verdict = check.check.verdict()
    if verdict is not None:
        raise RunnerError(
            f"{phases.name} on runner '{phases.runner}': refused by the harness; protocol"
            f" violation: {verdict.message}"
        )
    return outputs


def _prediction_files(
    outputs: dict[str, _Outputs], rowmap: RowMap, bench: PreparedBenchmark, dest: Path
) -> dict[str, Path]:
    """Each setting's rows, picked through ``rowmap`` into its frozen test order, written as the
    contract's prediction files with the benchmark and class-order hashes."""
    dest.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for setting in bench.spec.prediction_settings():
        if setting not in outputs:
            continue
        out = outputs[setting]
        rows = rowmap.rows[setting]
        hashes: dict[str, Any] = {
            "benchmark_hash": bench.hash,
            "class_order_hash": bench.class_order_hash(setting),
            "setting": setting,
        }
        path = dest / f"{setting}.safetensors"
        if out.setting.keep is not None:
            indices, scores = out.arrays
            write_predictions(path, topk_indices=indices[rows], topk_scores=scores[rows], **hashes)
        else:
            write_predictions(path, out.arrays[0][rows], **hashes)
        paths[setting] = path
    return paths
