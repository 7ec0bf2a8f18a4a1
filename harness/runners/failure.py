"""Why a run failed, in words a submitter can act on: one explanation for every runner.

A worker that refuses a run says why in ``worker.json`` (``message``, and ``location``: the
package file and line the failure comes from, see :mod:`harness.worker.phases`), or, in a prediction
pass, in its answer to the harness, and exits 3 (model error) or 4 (protocol violation).
A bare "exited with code 4" throws that away, so every runner ends its ``run`` with
:func:`explain_failure`: it keeps the run's log under ``ZSL_HOME/logs`` and extends
``outcome.reason`` with what the worker said and where the log is.

See docs/runners.md.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, RunnerError
from harness.core.home import zsl_home
from harness.runners.base import RunJob, RunOutcome
from harness.runners.outputs import WORKER_JSON, read_worker_status
from harness.submission.resources import effective_caps

__all__ = [
    "INSIDE_PACKAGE",
    "explain_failure",
    "failure_message",
    "more_time",
    "timeout_reason",
    "traceback_location",
]

#: What the worker's exit codes mean (``harness.worker.phases``).
EXIT_KINDS = {3: "model error", 4: "protocol violation"}
#: Where the sandbox and container runners show the package to the code they run.
INSIDE_PACKAGE = "/package"
#: The longest worker message shown in the reason (the log holds all of it).
MESSAGE_SHOWN = 2000
_FRAME = re.compile(r'^\s*File "([^"\n]+)", line (\d+), in (\S+)', re.M)


def log_dir() -> Path:
    """``ZSL_HOME/logs``: where failed runs' logs are kept (not created here)."""
    return zsl_home().expanduser() / "logs"


def _one_line(text: str, limit: int = MESSAGE_SHOWN) -> str:
    """``text`` on one line (its line breaks as `` | ``), at most ``limit`` characters."""
    flat = " | ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def traceback_location(stderr: str, package: Path) -> str | None:
    """``FILE:LINE, in FUNCTION`` of the last Python traceback frame in ``stderr`` that lies in
    the package (at ``package`` on the host, or at ``/package`` inside a sandbox or container),
    the file relative to the package; None when there is none."""
    roots = [str(package).rstrip("/") + "/", INSIDE_PACKAGE + "/"]
    found = None
    for match in _FRAME.finditer(stderr):
        filename, line, function = match.groups()
        for root in roots:
            if filename.startswith(root):
                found = f"{filename[len(root) :]}:{line}, in {function}"
                break
    return found


def _worker_status(job: RunJob) -> dict[str, Any] | None:
    if job.script is not None:
        return None
    try:
        return read_worker_status(job.out)
    except RunnerError:  # none written (killed, timed out), or not one the worker wrote
        return None


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "run"


def _write_log(
    job: RunJob, outcome: RunOutcome, status: dict[str, Any] | None, folder: Path
) -> Path:
    """The run's log file under ``folder``: what ran, how it ended, what it said."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"{stamp}-{_safe_name(job.package.name)}-{uuid.uuid4().hex[:8]}.log"
    what = f"script {job.script}" if job.script is not None else f"entrypoint {job.entrypoint}"
    parts = [
        f"package: {job.package}\n{what}\nexit code: {outcome.exit_code}\n"
        f"reason: {outcome.reason}\nwall: {outcome.wall_s:.1f} s\n",
    ]
    if status is not None:
        parts.append(f"--- {WORKER_JSON} ---\n{json.dumps(status, indent=1, sort_keys=True)}\n")
    parts.append(f"--- stderr ---\n{outcome.stderr}\n")
    parts.append(f"--- stdout ---\n{outcome.stdout}\n")
    path.write_text("".join(parts), encoding="utf-8", errors="replace")
    return path


def explain_failure(
    job: RunJob,
    outcome: RunOutcome,
    *,
    logs: Path | None = None,
    status: dict[str, Any] | None = None,
) -> RunOutcome:
    """``outcome`` of ``job``, its ``reason`` extended for a failed run (see
    docs/runners.md: what the worker said, then ``at:`` its package line and ``log:`` on lines
    of their own) and ``details["log"]`` set to the log written under ``logs`` (default
    :func:`log_dir`). A successful run is returned as it is. ``status``: the verdict in
    ``worker.json``'s terms where it comes from elsewhere (a prediction pass's answer, or the
    harness itself: :mod:`harness.runners.judge`); default: the job's ``worker.json``."""
    if outcome.ok:
        return outcome
    if status is None:
        if job.conversation is not None:
            return outcome  # the harness explains it, with the pass's answers
        status = _worker_status(job)
    said = ""
    location: str | None = None
    # The worker's own verdict, when the exit code is the one it reported.
    if status is not None and status.get("exit_code") == outcome.exit_code:
        message = status.get("message")
        if isinstance(message, str) and message.strip():
            kind = EXIT_KINDS.get(outcome.exit_code, "error")
            said = f"; {kind}: {_one_line(message)}"
        where = status.get("location")
        location = _one_line(where, 300) if isinstance(where, str) and where.strip() else None
    if location is None:
        location = traceback_location(outcome.stderr, job.package)
    if location is not None:
        said += f"\n  at: {location}"
    try:
        log = _write_log(job, outcome, status, logs if logs is not None else log_dir())
    except OSError as err:
        note = f"\n  log not written ({err.strerror or err}: set ZSL_HOME to a writable folder)"
    else:
        outcome.details["log"] = str(log)
        note = f"\n  log: {log}"
    outcome.reason = f"{outcome.reason}{said}{note}"
    return outcome


#: The last lines of a failed run's stderr shown in its error (the log holds all of it).
STDERR_SHOWN = 3
_WORKER_PREFIXES = ("worker: at ", "worker: ")


def failure_message(what: str, outcome: RunOutcome) -> str:
    """The error of a failed run of ``what``: ``outcome.reason`` (its message, then the package
    line and the log on lines of their own: :func:`explain_failure`), then the last lines of
    its stderr that say something the reason does not (a traceback's last line and the
    worker's own report repeat it)."""
    reason = outcome.reason
    tail = []
    for line in outcome.stderr.strip().splitlines()[-STDERR_SHOWN:]:
        said = line.strip()
        for prefix in _WORKER_PREFIXES:
            said = said.removeprefix(prefix)
        if said and said not in reason:
            tail.append(line.rstrip())
    shown = "".join(f"\n    {line}" for line in tail)
    return f"{what}: {reason}" + (f"\n  stderr ends:{shown}" if shown else "")


_TIMED_OUT = re.compile(r"timed out after (\S+) s")


def timeout_reason(reason: str, phase: str | None, limit_s: float | None = None) -> str:
    """``reason`` of a run its wall clock stopped, naming the ``phase`` that was running (a
    timing key: ``fit_main``, ``predict_zsl``, ``check_main``) and ``resources.time_s`` (its
    value ``limit_s``, the whole run's budget), and how to give it more time; any other reason
    as it is."""
    first, newline, rest = reason.partition("\n")
    found = _TIMED_OUT.match(first)
    if found is None:
        return reason
    limit = float(found[1]) if limit_s is None else limit_s
    where = f" in {phase}" if phase else ""
    head = (
        f"timed out{where} after {limit:g} s, the run's wall clock (resources.time_s: {limit:g},"
        f" every phase of the run together){first[found.end() :]}"
    )
    return f"{head}\n  to give it more time: {more_time(limit)}{newline}{rest}"


def more_time(limit_s: float) -> str:
    """How a run stopped at ``limit_s`` seconds gets more: ``resources.time_s`` in its
    ``submission.yaml``, up to this machine's cap (named with where it comes from)."""
    try:
        caps = effective_caps()
    except HarnessError:  # a malformed ZSL_MAX_TIME_S: the run would not have started
        return "raise resources.time_s in the package's submission.yaml"
    if limit_s >= caps.time_s:
        return (
            f"resources.time_s is capped at {caps.time_s} s here ({caps.source('time_s')}):"
            " raise that cap, or make the run faster"
        )
    return (
        f"raise resources.time_s in the package's submission.yaml (up to {caps.time_s} s here:"
        f" {caps.source('time_s')})"
    )
