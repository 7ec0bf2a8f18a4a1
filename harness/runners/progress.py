"""Progress of a run, from the worker to the user: what phase runs now, and how long each took.

A long run used to print nothing for minutes (ESZSL on AWA2: 4.5 min of silence). The worker now
reports each phase as it starts and ends: per fit (``fit``, and ``validation fit``: the fit on
training classes only, whose predictions choose calibration parameters), per setting its prediction
pass, and the inductive check's second pass. :func:`zsl run <harness.pipeline.run_submission>`
prints them on stderr as they come, and while a phase runs on without a word, a heartbeat every
:data:`HEARTBEAT_S` seconds (``validation fit running (60 s so far)``).

See docs/runners.md.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "EVENTS_LIMIT",
    "FITS",
    "HEARTBEAT_S",
    "LINE_LIMIT",
    "MARKER",
    "ConsoleProgress",
    "ProgressEvent",
    "ProgressReader",
    "ProgressSink",
    "current_sink",
    "current_start",
    "event_line",
    "reporting",
    "strip_events",
]

MARKER = "zsl-progress: "
#: The longest line kept while waiting for its end (a model printing without newlines).
LINE_LIMIT = 4096
#: Events passed on per run at most (the worker sends a few per setting).
EVENTS_LIMIT = 10_000
#: Malformed event lines reported one by one; the rest are counted.
REJECTS_SHOWN = 3
#: How the user reads each fit of a bundle (:data:`harness.bundles.FITS`).
FITS = {"main": "fit", "validation": "validation fit"}
PHASES = ("fit", "predict", "check")
#: What the worker reports of a phase; ``running`` (a heartbeat) is the harness's own.
STATES = ("start", "done")
#: A phase silent this long gets a heartbeat line, and one more after each such interval.
HEARTBEAT_S = 30.0
_SETTING = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_LONGEST_S = 1e7


@dataclass(frozen=True)
class ProgressEvent:
    """One phase of one fit starting, ending or still running (``seconds``: how long it took,
    when done; how long it has run so far, when ``running``: a heartbeat)."""

    phase: str
    fit: str
    state: str
    setting: str | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, value: Any) -> ProgressEvent:
        """The event a JSON object describes; ValueError naming what is wrong otherwise."""
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        extra = set(value) - {"phase", "fit", "state", "setting", "seconds"}
        if extra:
            raise ValueError(f"unknown field {sorted(extra)[0][:40]!r}")
        phase, fit, state = value.get("phase"), value.get("fit"), value.get("state")
        if phase not in PHASES or fit not in FITS or state not in STATES:
            raise ValueError("phase, fit or state missing or unknown")
        setting = value.get("setting")
        if (phase == "predict") != (setting is not None):
            raise ValueError("a setting belongs to predict events, and only to them")
        if setting is not None and not (isinstance(setting, str) and _SETTING.fullmatch(setting)):
            raise ValueError("setting is not a setting name")
        seconds = value.get("seconds")
        if (state == "done") != (seconds is not None):
            raise ValueError("seconds belong to done events, and only to them")
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise ValueError("seconds is not a number")
            if not (math.isfinite(seconds) and 0 <= seconds <= _LONGEST_S):
                raise ValueError("seconds out of range")
            seconds = float(seconds)
        return cls(str(phase), str(fit), str(state), setting, seconds)

    def describe(self) -> str:
        """``fit done (11.8 s)``, ``predict zsl started``, ``inductive check of the fit done``."""
        fit = FITS[self.fit]
        if self.phase == "fit":
            what = fit
        elif self.phase == "predict":
            what = f"predict {self.setting}"
        else:
            what = f"inductive check of the {fit}"
        if self.state == "start":
            return f"{what} started"
        if self.state == "running":
            return f"{what} running ({self.seconds or 0.0:.0f} s so far)"
        return f"{what} done ({self.seconds:.1f} s)"


def event_line(
    phase: str, fit: str, state: str, *, setting: str | None = None, seconds: float | None = None
) -> bytes:
    """The worker's line for one event (see docs/runners.md); checked like any reader
    checks it, so the worker cannot send what the harness would refuse."""
    fields: dict[str, Any] = {"phase": phase, "fit": fit, "state": state}
    if setting is not None:
        fields["setting"] = setting
    if seconds is not None:
        fields["seconds"] = round(max(0.0, seconds), 4)
    ProgressEvent.parse(fields)
    return (MARKER + json.dumps(fields, separators=(",", ":")) + "\n").encode()


class ProgressSink(Protocol):
    """Where a run's progress goes while it runs (``elapsed_s``: since the run started)."""

    def event(self, event: ProgressEvent, elapsed_s: float) -> None: ...

    def rejected(self, message: str, elapsed_s: float) -> None: ...


def _stamp(elapsed_s: float) -> str:
    return f"[{elapsed_s:6.1f} s]"


class ConsoleProgress:
    """Prints each event as ``[  12.3 s] zsl: fit done (11.8 s)`` on a (rich) console."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def event(self, event: ProgressEvent, elapsed_s: float) -> None:
        self.console.print(f"{_stamp(elapsed_s)} zsl: {event.describe()}", soft_wrap=True)

    def rejected(self, message: str, elapsed_s: float) -> None:
        self.console.print(f"{_stamp(elapsed_s)} zsl: warning: {message}", soft_wrap=True)


@dataclass
class _Tally:
    """What every reader of one :func:`reporting` block shares: a run is several processes
    (a fit, then prediction passes), reported on one clock, malformed lines counted once, and
    the phase running now (for its heartbeat)."""

    start: float
    rejects: int = 0
    events: int = 0
    dropped: int = 0
    running: ProgressEvent | None = None  # the start event of the phase running now
    running_since: float = 0.0
    last_line: float = 0.0
    # Events come from the worker's stderr (this thread) and a pass's conversation (its own).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def saw(self, event: ProgressEvent, now: float) -> None:
        """An event went to the sink: a start opens its phase, a done closes it."""
        with self.lock:
            self.last_line = now
            if event.state == "start":
                self.running, self.running_since = event, now
            elif event.state == "done":
                self.running = None

    def heartbeat(self, now: float) -> ProgressEvent | None:
        """The heartbeat due now: the phase running has said nothing for :data:`HEARTBEAT_S`."""
        with self.lock:
            event = self.running
            if event is None or now - self.last_line < HEARTBEAT_S:
                return None
            self.last_line = now
            return ProgressEvent(
                event.phase, event.fit, "running", event.setting, now - self.running_since
            )


class _Tracking:
    """The sink a :func:`reporting` block hands out: passes everything on to the caller's
    sink, noting in the block's tally which phase runs (:meth:`_Tally.saw`)."""

    def __init__(self, sink: ProgressSink, tally: _Tally) -> None:
        self.sink, self.tally = sink, tally

    def event(self, event: ProgressEvent, elapsed_s: float) -> None:
        self.tally.saw(event, time.perf_counter())
        self.sink.event(event, elapsed_s)

    def rejected(self, message: str, elapsed_s: float) -> None:
        self.sink.rejected(message, elapsed_s)


_SINK: ContextVar[ProgressSink | None] = ContextVar("zsl_progress_sink", default=None)
_TALLY: ContextVar[_Tally | None] = ContextVar("zsl_progress_tally", default=None)


def current_sink() -> ProgressSink | None:
    """The sink runs started now report to (:func:`reporting`), or None."""
    return _SINK.get()


def current_start() -> float | None:
    """When the current :func:`reporting` block began (``time.perf_counter``), or None."""
    tally = _TALLY.get()
    return None if tally is None else tally.start


@contextmanager
def reporting(sink: ProgressSink | None) -> Iterator[None]:
    """Runs started inside the block report their progress to ``sink``, on one clock from the
    block's start; None leaves the sink as it is (``run_submission(quiet=True)`` inside a
    caller's own ``reporting``). At the end, the malformed lines not shown are counted."""
    if sink is None:
        yield
        return
    tally = _Tally(time.perf_counter())
    token, tally_token = _SINK.set(_Tracking(sink, tally)), _TALLY.set(tally)
    try:
        yield
    finally:
        _SINK.reset(token)
        _TALLY.reset(tally_token)
        _summarise(sink, tally)


def _summarise(sink: ProgressSink, tally: _Tally) -> None:
    elapsed = time.perf_counter() - tally.start
    hidden = tally.rejects - REJECTS_SHOWN
    try:
        if hidden > 0:
            sink.rejected(f"{hidden} more malformed progress line{'s' if hidden > 1 else ''}"
                          " ignored", elapsed)  # fmt: skip
        if tally.dropped:
            sink.rejected(
                f"{tally.dropped} progress events beyond the first {EVENTS_LIMIT} ignored", elapsed
            )
    except Exception:  # a broken terminal must not break the run
        return


def strip_events(text: str) -> str:
    """``text`` (a run's stderr) without its well-formed event lines; a line where an event
    follows a model's unended output keeps that output. Malformed ones stay: model output."""
    if MARKER not in text:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        at = line.find(MARKER)
        if at >= 0:
            try:
                ProgressEvent.parse(json.loads(line[at + len(MARKER) :]))
            except (ValueError, RecursionError):
                pass
            else:
                line = line[:at] + ("\n" if at and line.endswith("\n") else "")
        kept.append(line)
    return "".join(kept)


class ProgressReader:
    """Picks the event lines out of a worker's stderr, fed piece by piece (see
    docs/runners.md for the bounds); never raises on what it is fed."""

    def __init__(self, sink: ProgressSink | None, start: float | None = None) -> None:
        self.sink = sink
        shared = _TALLY.get()
        # Inside a reporting block: its clock and counts; else this reader's own.
        self.tally = shared or _Tally(time.perf_counter() if start is None else start)
        self.owns_tally = shared is None
        self.start = self.tally.start
        self.partial = bytearray()
        self.events: list[ProgressEvent] = []
        self.rejects = 0

    def feed(self, data: bytes) -> None:
        self.partial += data
        *lines, rest = bytes(self.partial).split(b"\n")
        # An unended line keeps its tail: an event written after a model's partial line
        # ends it, and only what follows the marker is read.
        self.partial = bytearray(rest[-LINE_LIMIT:])
        for line in lines:
            self._line(line)

    def close(self) -> None:
        """The stream ended: an unended last line is read too; a reader outside a reporting
        block reports the count of rejects beyond those shown (inside one, the block does)."""
        if self.partial:
            self._line(bytes(self.partial))
            self.partial.clear()
        if self.owns_tally and self.sink is not None:
            _summarise(self.sink, self.tally)

    def tick(self) -> None:
        """Called while the run goes on (each poll of its process): inside a :func:`reporting`
        block, the heartbeat of a phase that has been silent for :data:`HEARTBEAT_S`."""
        if self.owns_tally or self.sink is None:
            return
        now = time.perf_counter()
        beat = self.tally.heartbeat(now)
        if beat is None:
            return
        try:
            self.sink.event(beat, now - self.start)
        except Exception:  # a broken terminal must not break the run
            self.sink = None

    def summary(self) -> dict[str, object]:
        """What the run's details record: events passed on, malformed lines ignored."""
        return {"progress_events": len(self.events), "progress_rejected": self.rejects}

    def _tell(self, message: str) -> None:
        assert self.sink is not None
        try:
            self.sink.rejected(message, time.perf_counter() - self.start)
        except Exception:  # a broken terminal must not break the run
            self.sink = None

    def _line(self, raw: bytes) -> None:
        at = raw.find(MARKER.encode())
        if at < 0:
            return
        text = raw[at + len(MARKER) :].decode("utf-8", "replace").strip()
        try:
            event = ProgressEvent.parse(json.loads(text))
        except (ValueError, RecursionError) as err:  # json's errors are ValueErrors too
            self.rejects += 1
            self.tally.rejects += 1
            if self.tally.rejects <= REJECTS_SHOWN and self.sink is not None:
                shown = text if len(text) <= 60 else text[:57] + "..."
                self._tell(
                    f"ignored a malformed progress line ({str(err)[:80]}): {shown!r}; the"
                    " worker writes well-formed ones, so the model wrote it"
                )
            return
        if self.tally.events >= EVENTS_LIMIT:
            self.tally.dropped += 1
            return
        self.tally.events += 1
        self.events.append(event)
        if self.sink is not None:
            try:
                self.sink.event(event, time.perf_counter() - self.start)
            except Exception:  # a broken terminal must not break the run
                self.sink = None
