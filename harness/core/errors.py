__all__ = [
    "HarnessError",
    "HierarchyError",
    "IntegrityError",
    "MetricError",
    "NotApplicableError",
    "PredictionError",
    "RunnerError",
    "SpecError",
    "SubmissionError",
    "error_text",
    "network_error_text",
]
"""Errors the harness raises on purpose.

Each one carries a message a user can act on: what is wrong, where (file, key, row), and what to
do. The CLI prints the message on one line and exits with ``exit_code``; anything else is a bug
and keeps its traceback.
"""


class HarnessError(Exception):
    """A known failure caused by the input (a spec, a package, a file): exit code 1."""

    exit_code = 1


class SpecError(HarnessError):
    """A benchmark spec is malformed."""


class IntegrityError(HarnessError):
    """A frozen artifact or a record does not match its recorded hash: exit code 2."""

    exit_code = 2


class HierarchyError(HarnessError):
    """A hierarchy is malformed (unknown node, cycle) or a query is impossible."""


class SubmissionError(HarnessError):
    """A submission package is malformed or was refused."""


class PredictionError(SubmissionError):
    """A prediction file was refused."""


class NotApplicableError(SubmissionError):
    """A valid package cannot run on this benchmark: it uses a kind of class embedding the
    benchmark lacks (:mod:`harness.class_embedding`). Not the package's fault: ``zsl demo``
    skips it and ``zsl ci pr`` reports it as not applicable."""


class RunnerError(HarnessError):
    """Model code failed, timed out or broke the protocol."""


class MetricError(HarnessError, ValueError):
    """A metric got input it cannot score."""


def error_text(err: BaseException) -> str:
    """What to show of any exception: a HarnessError's message, else its type and message.

    A failure the harness did not mean (a bug, or something a submission provoked) keeps its
    type's name, so that it is reported as what it is. A broken ``__str__`` (a hostile
    exception) gives the type's name alone.
    """
    try:
        message = str(err)
    except Exception:  # the message itself must not fail the report of the failure
        message = ""
    if isinstance(err, HarnessError):
        return message or type(err).__name__
    return f"{type(err).__name__}: {message}" if message else type(err).__name__


def network_error_text(err: BaseException) -> str:
    """The innermost cause of a failed download, in a few words.

    Network libraries wrap the cause several times over (requests' ``ConnectionError`` holds
    urllib3's ``MaxRetryError``, whose ``reason`` holds a ``NameResolutionError`` caused by
    ``socket.gaierror``): the innermost one says what happened (``[Errno -2] Name or service not
    known``) without the wrappers' repetition of the URL.

    >>> import socket, urllib.error
    >>> network_error_text(urllib.error.URLError(socket.gaierror(-2, "Name or service not known")))
    '[Errno -2] Name or service not known'
    """
    seen: set[int] = set()
    current = err
    while id(current) not in seen:
        seen.add(id(current))
        inner = getattr(current, "reason", None)
        if not isinstance(inner, BaseException):
            first = current.args[0] if current.args else None
            inner = first if isinstance(first, BaseException) else current.__cause__
        if not isinstance(inner, BaseException):
            break
        current = inner
    return str(current) or type(current).__name__
