"""The worker: one phase of a model package, run inside whatever isolation a runner sets up.

See docs/worker.md.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import inspect
import json
import os
import re
import resource
import shutil
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.bundles import SAVE_LOAD_LINES, Bundle, Model
from harness.core.errors import SubmissionError
from harness.hyperparameters import ATTRIBUTE as HYPERPARAMETERS
from harness.hyperparameters import HyperparameterError, model_hyperparameters
from harness.runners.outputs import CHECK_JSON, STATE_DIR, WORKER_JSON
from harness.runners.progress import event_line
from harness.runners.protocol import (
    CODES,
    DENSE,
    MODEL_ERROR,
    OK,
    OP_PREDICT,
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
    send_error,
    send_json,
    write_all,
)
from harness.submission.loader import check_entrypoint, import_entrypoint_module, load_model_class
from harness.submission.predictions import top_k_from_scores
from harness.worker import guard

EXIT_MODEL_ERROR = 3
EXIT_PROTOCOL = 4
WAIT_S = 30.0


def _load_model_class(package: Path, entrypoint: str) -> type:
    """The model class, imported from the package's .py source only: never from byte-code or
    extension modules, and nothing is cached into the package (see harness.submission.loader)."""
    return load_model_class(package, entrypoint)


class Violation(Exception):
    """Ends the phase with ``code`` (model error or protocol violation) and ``message``;
    ``location`` is the package file and line it comes from (:func:`raised_at`,
    :func:`defined_at`), when known."""

    def __init__(self, code: int, message: str, location: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.location = location


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _progress(fit: str, state: str, *, seconds: float | None = None) -> None:
    """One fit progress event on stderr, one write (atomic on a pipe), for the runner to show
    while the run goes on (:mod:`harness.runners.progress`)."""
    try:
        line = event_line("fit", fit, state, seconds=seconds)
    except ValueError:
        return
    _flush()
    with contextlib.suppress(OSError):
        os.write(2, line)


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:4000]


# --- where in the package a failure comes from -------------------------------------------


def _in_package(filename: str | None, root: str) -> str | None:
    """``filename`` relative to the package folder ``root`` (resolved), or None outside it."""
    if not filename or filename.startswith("<"):  # <string>, <frozen importlib._bootstrap>
        return None
    full = os.path.realpath(filename)
    if not full.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return Path(os.path.relpath(full, root)).as_posix()


def raised_at(err: BaseException, package: Path) -> str | None:
    """``FILE:LINE, in FUNCTION`` of the last traceback frame of ``err`` inside ``package`` (the
    model's own line that failed, even when the exception comes from a library it called);
    ``FILE:LINE`` of a syntax error in one of its files; None when no frame is in the package."""
    root = os.path.realpath(package)
    if isinstance(err, SyntaxError):
        rel = _in_package(err.filename, root)
        if rel is not None and err.lineno is not None:
            return f"{rel}:{err.lineno}"
    found = None
    for frame in traceback.extract_tb(err.__traceback__):
        rel = _in_package(frame.filename, root)
        if rel is not None:
            found = f"{rel}:{frame.lineno}, in {frame.name}"
    return found


def defined_at(obj: Any, what: str, package: Path) -> str | None:
    """``FILE:LINE, where WHAT is defined`` for a function or class of the package, else None."""
    try:
        target = getattr(obj, "__func__", obj)
        if callable(target) and not isinstance(target, type):
            target = inspect.unwrap(target)
        filename = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except Exception:  # model objects may answer attribute lookups in any way
        return None
    rel = _in_package(filename, os.path.realpath(package))
    return None if rel is None else f"{rel}:{max(line, 1)}, where {what} is defined"


# --- the model class -----------------------------------------------------------------------

#: The methods of the model protocol (:class:`harness.bundles.Model`) and what the worker passes.
PROTOCOL_CALLS = (
    ("fit", ("task",)),
    ("save", ("directory",)),
    ("load", ("directory",)),
    ("predict", ("features", "candidates")),
)


def missing_methods_message(entrypoint: str, missing: list[str]) -> str:
    """What a class lacking protocol methods is told; ``save``/``load`` come with the lines to
    add (:data:`harness.bundles.SAVE_LOAD_LINES`)."""
    names = " and ".join(f"no {m}() method" for m in missing)
    message = (
        f"{entrypoint} has {names}; a model class defines fit(task), save(directory),"
        " load(directory) (a classmethod) and predict(features, candidates)"
    )
    if {"save", "load"} & set(missing):
        message += (
            ". fit runs in a sandbox of its own and each prediction pass in a fresh one, which"
            " rebuilds the model from what save wrote; add to the class (numpy as np):\n"
            + SAVE_LOAD_LINES
        )
    return message


def _model_class(package: Path, entrypoint: str) -> type:
    """The entrypoint's class, checked to have every protocol method (Violation otherwise)."""
    model_class = _load_model_class(package, entrypoint)
    missing = [m for m, _ in PROTOCOL_CALLS if not callable(getattr(model_class, m, None))]
    if missing:
        raise Violation(
            EXIT_PROTOCOL,
            missing_methods_message(entrypoint, missing),
            defined_at(model_class, model_class.__name__, package),
        )
    return model_class


def _failure(err: BaseException, step: str, package: Path) -> Violation:
    """The model's own exception as the phase's verdict (the loader's refusals name the
    entrypoint themselves)."""
    if isinstance(err, Violation):
        return err
    traceback.print_exc()
    message = _short(err) if isinstance(err, SubmissionError) else f"{step} raised {_short(err)}"
    return Violation(EXIT_MODEL_ERROR, message, raised_at(err, package))


# --- fit -----------------------------------------------------------------------------------


class _OutDir:
    """The output folder, written through a directory descriptor: no link is ever followed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def planted(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def clear(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return
        except (IsADirectoryError, PermissionError):
            shutil.rmtree(name, dir_fd=self.fd)

    def write(self, name: str, writer: Callable[[Any], None]) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=self.fd)
        with os.fdopen(fd, "wb") as handle:
            writer(handle)


def peak_rss_mib() -> float:
    """The peak resident memory, in MiB, of this process and of the children it waited for:
    the phase's memory high-water mark as the record shows it (Linux reports KiB)."""
    kib = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return round(kib / 1024, 1)


def _fit(bundle: Bundle, package: Path, entrypoint: str, out: Path, seed: int,
         status: dict[str, Any]) -> None:  # fmt: skip
    """Fit one model and save its state; what it chose goes into ``status``."""
    fit = bundle.fits[0]
    step = f"importing {entrypoint.split(':')[0]}"
    try:
        np.random.seed(seed % (2**32))
        model_class = _model_class(package, entrypoint)
        step = f"{model_class.__name__}()"
        model = model_class()
        step = "fit()"
        _progress(fit, "start")
        start = time.perf_counter()
        model.fit(bundle.train_task(seed=seed, fit=fit))
        seconds = time.perf_counter() - start
        status["timings"] = {f"fit_{fit}": seconds}
        _progress(fit, "done", seconds=seconds)
        step = f"reading {model_class.__name__}.{HYPERPARAMETERS}"
        try:  # what the model chose (harness.hyperparameters), for the run record
            chosen = model_hyperparameters(model)
        except HyperparameterError as err:
            where = defined_at(model_class, model_class.__name__, package)
            raise Violation(EXIT_PROTOCOL, f"after fit(): {err}"[:4000], where) from None
        if chosen:
            status["hyperparameters"] = {fit: chosen}
        step = "save()"
        state = out / STATE_DIR
        _OutDir(out).clear(STATE_DIR)
        state.mkdir()
        start = time.perf_counter()
        model.save(state)
        status["timings"][f"save_{fit}"] = time.perf_counter() - start
    except BaseException as err:  # the model's failure is data for the run record
        raise _failure(err, step, package) from None


def run_fit(bundle_dir: Path, package: Path, entrypoint: str, out: Path, seed: int) -> int:
    """The fit phase (see docs/worker.md); returns the exit code it wrote."""
    status: dict[str, Any] = {}
    out.mkdir(parents=True, exist_ok=True)
    folder = _OutDir(out)
    code, message, location = 0, "", None
    try:
        bundle = Bundle(bundle_dir)
        if bundle.single_fit is None:
            raise Violation(EXIT_PROTOCOL, f"{bundle_dir}: not a model bundle of one fit")
        _fit(bundle, package, entrypoint, out, seed, status)
    except Violation as err:
        code, message, location = err.code, err.message, err.location
    except Exception as err:
        traceback.print_exc()
        code, message = EXIT_MODEL_ERROR, f"worker error: {_short(err)}"
        location = raised_at(err, package)
    status.update(exit_code=code, message=message, location=location)
    status["peak_rss_mib"] = peak_rss_mib()
    if code:
        print(f"worker: {message}", file=sys.stderr)
        print(f"worker: at {location or 'no line of the package'}", file=sys.stderr)
    data = (json.dumps(status, indent=1, sort_keys=True) + "\n").encode()
    folder.clear(WORKER_JSON)
    folder.write(WORKER_JSON, lambda handle: handle.write(data))
    _flush()
    return code


# --- predict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    name: str
    candidates: np.ndarray
    keep: int | None  # K of a top-K setting; None: dense

    @property
    def width(self) -> int:
        return len(self.candidates) if self.keep is None else self.keep


def _settings(control: dict[str, Any]) -> list[_Setting]:
    found = []
    for item in control.get("settings", []):
        keep = item.get("keep")
        found.append(
            _Setting(
                str(item["name"]),
                np.asarray(item["candidates"], dtype=np.int64),
                None if keep is None else int(keep),
            )
        )
    return found


def _answer(
    model: Model, features: np.ndarray, s: _Setting, reply: int, package: Path,
    where: str | None,
) -> int:  # fmt: skip
    """Call ``predict`` on one chunk and send its answer, or why it is refused with the line of
    the package it comes from: the failing line for an exception, else ``where`` (the line
    that defines ``predict``); returns 0, or the exit code of the refusal."""
    expected = (len(features), len(s.candidates))
    try:
        scores = np.asarray(model.predict(features, s.candidates))
    except BaseException as err:  # the model's failure is data for the run record
        traceback.print_exc()
        message = f"predict() raised {_short(err)} (setting {s.name})"
        send_error(reply, MODEL_ERROR, message, raised_at(err, package) or where)
        return EXIT_MODEL_ERROR
    try:
        if scores.shape != expected:
            send_error(
                reply,
                PROTOCOL,
                f"predict returned shape {scores.shape} for setting '{s.name}'; expected"
                f" (n_test, n_candidates) = {expected}",
                where,
            )
            return EXIT_PROTOCOL
        if scores.dtype.kind != "f":
            scores = scores.astype(np.float32)
        elif scores.dtype.newbyteorder("<") not in CODES:
            scores = scores.astype(np.float64)
        scores = np.ascontiguousarray(scores, dtype=scores.dtype.newbyteorder("<"))
        problem = nonfinite_message(s.name, scores)
        if problem is not None:
            send_error(reply, MODEL_ERROR, problem, where)
            return EXIT_MODEL_ERROR
        arrays = [scores] if s.keep is None else list(_top_k(scores, s.keep))
    except BaseException as err:  # scores the worker cannot use: the model's failure too
        traceback.print_exc()
        send_error(reply, MODEL_ERROR, f"predict(), setting {s.name}: {_short(err)}", where)
        return EXIT_MODEL_ERROR
    code = CODES[arrays[-1].dtype]
    head = REPLY.pack(OK, DENSE if s.keep is None else TOPK, code, 0, expected[0], s.width)
    write_all(reply, head)
    for array in arrays:
        write_all(reply, memoryview(np.ascontiguousarray(array).data))
    return 0


def _top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns per row, best first (ties: smaller column first); a row whose
    k-th and (k+1)-th scores tie is refused (harness.submission.predictions.top_k_from_scores)."""
    indices, top = top_k_from_scores(scores, k)
    return indices.astype("<i8"), top


def _private_channel(requests: int, replies: int) -> tuple[int, int]:
    """The protocol's descriptors moved out of 0 and 1 (containers pass the protocol on the
    standard streams), with stdin then /dev/null and stdout the stderr: whatever the model
    prints goes to the log, never into a reply."""
    requests, replies = os.dup(requests), os.dup(replies)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    _flush()
    os.dup2(2, 1)
    return requests, replies


def run_predict(
    package: Path, entrypoint: str, state: Path, requests: int, replies: int, seed: int
) -> int:
    """One prediction pass (see docs/worker.md); returns its exit code."""
    requests, replies = _private_channel(requests, replies)
    try:
        settings = _settings(read_json(requests))
    except (Closed, ValueError, KeyError, TypeError):
        return EXIT_PROTOCOL  # the harness sends the settings: nothing to tell it
    step = f"importing {entrypoint.split(':')[0]}"
    try:
        np.random.seed(seed % (2**32))
        model_class = _model_class(package, entrypoint)
        step = f"{model_class.__name__}.load()"
        model = model_class.load(state)  # type: ignore[attr-defined]
        if not callable(getattr(model, "predict", None)):
            raise Violation(
                EXIT_PROTOCOL,
                f"{model_class.__name__}.load() returned {type(model).__name__!s}, which has no"
                " predict(); load is a classmethod that returns the fitted model",
                defined_at(getattr(model_class, "load", None), "load", package),
            )
        where = defined_at(
            getattr(type(model), "predict", None) or model.predict, "predict", package
        )
    except BaseException as err:  # the model's failure is data for the run record
        failure = _failure(err, step, package)
        code = MODEL_ERROR if failure.code == EXIT_MODEL_ERROR else PROTOCOL
        with contextlib.suppress(Closed):
            send_error(replies, code, failure.message, failure.location)
        _flush()
        return failure.code
    try:
        write_all(replies, REPLY.pack(READY, 0, 0, 0, 0, 0))
        while True:
            op, index, n, cols, dtype = REQUEST.unpack(read_exact(requests, REQUEST.size))
            if op != OP_PREDICT:
                break
            features = np.empty((n, cols), dtype=np.dtype(dtype.rstrip(b"\0").decode()))
            read_into(requests, memoryview(features.data))
            code = _answer(model, features, settings[index], replies, package, where)
            if code:
                _flush()
                return code
        send_json(replies, {"peak_rss_mib": peak_rss_mib()})
    except Closed:
        return EXIT_PROTOCOL
    _flush()
    return 0


# --- check mode: the entrypoint alone, no data (``zsl submission validate``) --------------

#: Problems one check reports at most (the rest would repeat the same mistake).
CHECK_PROBLEMS = 20


def _place(location: str | None) -> tuple[str | None, int | None]:
    """(file, line) of a :func:`raised_at` / :func:`defined_at` location ``FILE:LINE[, …]``."""
    if location is None:
        return None, None
    head = location.split(", ", 1)[0]
    file, _, line = head.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else (head, None)


def _problem(
    message: str, location: str | None = None, *, file: str | None = None, line: int | None = None
) -> dict[str, Any]:
    """One finding of the check: the package file and line it is about, and what is wrong."""
    where_file, where_line = _place(location)
    return {
        "file": file or where_file,
        "line": line if line is not None else where_line,
        "message": message[:4000],
    }


def _closest(name: str, names: list[str]) -> str | None:
    """The name ``name`` was probably meant to be: a close spelling, else one that contains it
    or is contained in it, ignoring case (``Ridge`` for ``RidgeToEmbedding``)."""
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return close[0]
    lower = name.lower()
    within = [n for n in names if lower in n.lower() or n.lower() in lower]
    return within[0] if len(within) == 1 else None


def _did_you_mean(close: str | None) -> str:
    return f"; did you mean '{close}'?" if close else ""


def _package_modules(package: Path) -> list[str]:
    """The importable top-level names of the package: ``.py`` files and folders with one."""
    names = {p.stem for p in package.glob("*.py") if p.stem.isidentifier()}
    names |= {p.parent.name for p in package.glob("*/__init__.py") if p.parent.name.isidentifier()}
    return sorted(names)


def _source_of(module_name: str, package: Path) -> str | None:
    """The package file of a dotted module name (``a/b.py`` or ``a/b/__init__.py``), if any."""
    base = package.joinpath(*module_name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(package).as_posix()
    return None


def _classes_by_line(module: Any) -> list[tuple[int, str]]:
    """(line, name) of each class the module itself defines (not the ones it imports)."""
    found = []
    for name, value in list(vars(module).items()):
        if isinstance(value, type) and getattr(value, "__module__", None) == module.__name__:
            try:
                line = inspect.getsourcelines(value)[1]
            except Exception:  # a class built at run time has no source lines
                line = 1
            found.append((line, name))
    return sorted(found)


def _name_line(package: Path, source: str | None, name: str) -> int:
    """The first line of ``source`` that binds ``name`` at top level (``name =``, ``def name``,
    ``class name``, ``import … as name``), else 1."""
    if source is None:
        return 1
    word = re.escape(name)
    binds = re.compile(rf"^(?:(?:async\s+)?def\s+|class\s+)?{word}\s*[=(:]|^.*\bas\s+{word}\b")
    try:
        text = (package / source).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    for number, line in enumerate(text.splitlines(), start=1):
        if binds.match(line):
            return number
    return 1


def entrypoint_problems(package: Path, entrypoint: str) -> list[dict[str, Any]]:
    """What keeps ``entrypoint`` from running as a model, without data: the module imports (from
    the package's source), the name is a class, ``Class()`` builds it, and its ``fit`` and
    ``predict`` accept the arguments the worker passes (``inspect.signature``). Runs model code:
    call it in a process that may run it (:func:`check`)."""
    manifest = "submission.yaml"
    try:
        module_name, class_name = check_entrypoint(entrypoint)
    except SubmissionError as err:
        return [_problem(str(err), file=manifest)]
    source = _source_of(module_name, package)
    if source is None:
        modules = _package_modules(package)
        listing = f"its modules: {', '.join(modules)}" if modules else "it has no .py module"
        return [
            _problem(
                f"entrypoint '{entrypoint}': no module '{module_name}' in the package;"
                f" {listing}{_did_you_mean(_closest(module_name, modules))}",
                file=manifest,
            )
        ]
    try:
        module = import_entrypoint_module(package, entrypoint)
    except SubmissionError as err:
        return [_problem(str(err).replace(str(package), "the package"), file=manifest)]
    except BaseException as err:  # the module's own failure: its line
        traceback.print_exc()
        return [
            _problem(
                f"importing module '{module_name}' raised {_short(err)}",
                raised_at(err, package),
                file=source,
            )
        ]
    missing = object()
    try:
        found = getattr(module, class_name, missing)
    except BaseException as err:  # a module __getattr__ may raise anything
        return [
            _problem(
                f"looking up '{class_name}' in module '{module_name}' raised {_short(err)}",
                raised_at(err, package),
                file=source,
            )
        ]
    if found is missing:
        classes = _classes_by_line(module)
        names = [name for _, name in classes]
        close = _closest(class_name, names)
        # The line of the class it probably means; the module's first line without one.
        line = next((at for at, name in classes if name == close), 1)
        defines = f"the module defines: {', '.join(names)}" if names else "it defines no class"
        return [
            _problem(
                f"entrypoint '{class_name}' not found in module '{module_name}'; {defines}"
                + _did_you_mean(close),
                file=source,
                line=line,
            )
        ]
    if not isinstance(found, type):
        kind = "a function" if inspect.isroutine(found) else f"a {type(found).__name__} object"
        return [
            _problem(
                f"entrypoint '{class_name}' in module '{module_name}' is {kind}, not a class;"
                " the entrypoint names the model class, which the worker builds as Class() and"
                " whose fit(task) and predict(features, candidates) it calls",
                file=source,
                line=_name_line(package, source, class_name),
            )
        ]
    class_at = defined_at(found, class_name, package)
    try:
        model = found()
    except BaseException as err:  # the constructor's failure: its line, else the class's
        traceback.print_exc()
        return [
            _problem(
                f"{class_name}() raised {_short(err)}; the worker builds the model with no"
                " arguments (give every __init__ parameter a default)",
                raised_at(err, package)
                or defined_at(getattr(found, "__init__", None), "__init__", package)
                or class_at,
                file=source,
            )
        ]
    problems = []
    for name, args in PROTOCOL_CALLS:
        try:
            method = getattr(model, name, None)
        except BaseException as err:  # a property or __getattr__ of the model's
            problems.append(_problem(f"{class_name}.{name} raised {_short(err)}", class_at))
            continue
        if not callable(method):
            problems.append(
                _problem(
                    missing_methods_message(f"class '{class_name}'", [name]), class_at, file=source
                )
            )
            continue
        if name == "load" and not isinstance(
            inspect.getattr_static(found, name, None), classmethod | staticmethod
        ):
            problems.append(
                _problem(
                    f"{class_name}.load must be a classmethod (@classmethod def load(cls,"
                    " directory)): the worker calls it on the class, before any model exists",
                    defined_at(getattr(found, name, None), name, package) or class_at,
                    file=source,
                )
            )
            continue
        try:
            signature = inspect.signature(method)
        except Exception:  # not introspectable (a builtin, a C extension): the run will tell
            continue
        try:
            signature.bind(*args)
        except TypeError as err:
            at = defined_at(getattr(type(model), name, method), name, package) or class_at
            problems.append(
                _problem(
                    f"{class_name}.{name}{signature} cannot be called as"
                    f" {name}({', '.join(args)}), as the worker calls it: {err}",
                    at,
                    file=source,
                )
            )
    return problems


def _checked_problems(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The check process's findings, re-checked: it ran model code."""
    found = report.get("problems")
    if not isinstance(found, list):
        raise Violation(EXIT_PROTOCOL, "the check process sent a malformed report")
    problems = []
    for item in found[:CHECK_PROBLEMS]:
        if not isinstance(item, dict) or not isinstance(item.get("message"), str):
            raise Violation(EXIT_PROTOCOL, "the check process sent a malformed report")
        file, line = item.get("file"), item.get("line")
        problems.append(
            {
                "file": file[:500] if isinstance(file, str) else None,
                "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
                "message": item["message"][:4000],
            }
        )
    return problems


def check(package: Path, entrypoint: str, out: Path) -> int:
    """Check mode: write ``check.json`` (``{"entrypoint", "problems": [{file, line, message}]}``,
    see :func:`entrypoint_problems`) into ``out``; exit 0 once it is written, problems or not.

    Like a fit, the model code runs in a forked process, never in this one, which writes the
    findings only after every process the model started is gone (a file the model planted under
    the reserved name is refused, not trusted)."""
    out.mkdir(parents=True, exist_ok=True)
    folder = _OutDir(out)
    guard.set_undumpable()
    guard.become_subreaper()
    reaper = guard.Reaper()
    control_r, control_w = os.pipe()
    _flush()
    pid = os.fork()
    if pid == 0:  # the check process: runs model code
        try:
            os.close(control_r)
            send_json(control_w, {"problems": entrypoint_problems(package, entrypoint)})
        except BaseException:
            traceback.print_exc()
        finally:
            _flush()
            os._exit(0)
    os.close(control_w)
    try:
        problems = _checked_problems(read_json(control_r, 1 << 20))
    except (Closed, struct.error):
        status = reaper.wait(pid, timeout_s=5.0)
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            how = f"was killed by signal {name}"
        elif status is not None and os.WIFEXITED(status):
            how = f"exited with code {os.WEXITSTATUS(status)} (sys.exit or os._exit at import?)"
        else:
            how = "stopped answering"
        problems = [_problem(f"the process importing {entrypoint} {how} before it reported")]
    except (Violation, ValueError) as err:
        problems = [
            _problem(
                f"the check process sent {err}" if isinstance(err, ValueError) else err.message
            )
        ]
    finally:
        os.close(control_r)
    reaper.wait(pid, timeout_s=WAIT_S)
    reaper.sweep()
    if folder.planted(CHECK_JSON):
        folder.clear(CHECK_JSON)
        problems.append(
            _problem(
                f"model code created {CHECK_JSON} in the output folder; the name is reserved"
                " for the worker's findings"
            )
        )
    data = json.dumps({"entrypoint": entrypoint, "problems": problems}, indent=1) + "\n"
    folder.write(CHECK_JSON, lambda handle: handle.write(data.encode()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--check"]:
        return _check_main(args_in)
    parser = argparse.ArgumentParser(prog="python -m harness.worker.phases", description=__doc__)
    phases = parser.add_subparsers(dest="phase", required=True)
    fit = phases.add_parser("fit", help="fit one model on a one-fit bundle and save its state")
    fit.add_argument("bundle", type=Path)
    fit.add_argument("package", type=Path)
    fit.add_argument("entrypoint")
    fit.add_argument("out", type=Path)
    fit.add_argument("--seed", type=int, default=0)
    predict = phases.add_parser("predict", help="one prediction pass over a saved state")
    predict.add_argument("package", type=Path)
    predict.add_argument("entrypoint")
    predict.add_argument("state", type=Path)
    predict.add_argument("--requests", type=int, required=True)
    predict.add_argument("--replies", type=int, required=True)
    predict.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(args_in)
    if args.phase == "fit":
        return run_fit(args.bundle, args.package, args.entrypoint, args.out, args.seed)
    return run_predict(
        args.package, args.entrypoint, args.state, args.requests, args.replies, args.seed
    )


def _check_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.worker.phases --check",
        description="import a package's entrypoint and check it against the model protocol,"
        " without data; findings go to OUT/check.json",
    )
    parser.add_argument("--check", action="store_true", required=True)
    parser.add_argument("package", type=Path)
    parser.add_argument("entrypoint")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    return check(args.package, args.entrypoint, args.out)


if __name__ == "__main__":
    sys.exit(main())
