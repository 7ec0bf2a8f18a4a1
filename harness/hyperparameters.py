"""The hyperparameters a model chose: the protocol, its limits and the one check.

Protocol (scikit-learn style, like ``coef_`` or ``best_params_``): after ``fit``, a model may
set the attribute ``hyperparameters_`` to a *flat* dict from names to JSON scalars (``str``,
``int``, ``float``, ``bool`` or ``None``; numpy scalars are read as their Python value), for
instance ``{"lambda": 0.1, "gamma": 1.0}`` for what it chose on the validation split. A model
without the attribute (or with ``None``) exposes nothing; that is not an error.

The worker reads the attribute right after each fit (the ``validation`` fit, when a metric
needs validation predictions, and the ``main`` fit) and writes it into ``worker.json``; the
harness reads it back from there without trust (:mod:`harness.runners.outputs`), and the run
record keeps it per fit (:attr:`harness.records.RunRecord.hyperparameters`). Both sides run
:func:`check_hyperparameters`, so a bad value is one protocol error naming the key, whether the
model set it or something rewrote ``worker.json``.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

import numpy as np

__all__ = [
    "ATTRIBUTE",
    "MAX_BYTES",
    "HyperparameterError",
    "Hyperparameters",
    "check_hyperparameters",
    "model_hyperparameters",
]

#: The attribute a fitted model sets.
ATTRIBUTE = "hyperparameters_"
#: At most this many names per fit.
MAX_KEYS = 64
#: A name is 1 to this many characters.
MAX_KEY_CHARS = 64
#: A string value holds at most this many characters.
MAX_STRING_CHARS = 256
#: The whole dict, as compact JSON, holds at most this many bytes.
MAX_BYTES = 8192

Scalar = str | int | float | bool | None
Hyperparameters = dict[str, Scalar]

_KINDS = "a JSON scalar (str, int, float, bool or None)"


class HyperparameterError(ValueError):
    """A model's ``hyperparameters_`` breaks the protocol; the message names the key."""


def _scalar(value: Any, where: str) -> Scalar:
    # bool before int (bool is an int); a numpy scalar (np.float64, np.int64, np.bool_) is read
    # as its Python value; anything else (arrays, lists, dicts, objects) is refused.
    if isinstance(value, np.generic) and not isinstance(value, np.str_ | np.bytes_):
        value = value.item()
    if value is None or isinstance(value, bool | str):
        scalar: Scalar = str(value) if isinstance(value, str) else value
    elif isinstance(value, numbers.Integral):
        scalar = int(value)
    elif isinstance(value, numbers.Real):
        scalar = float(value)
    else:
        raise HyperparameterError(f"{where} is a {type(value).__name__}; expected {_KINDS}")
    if isinstance(scalar, float) and not math.isfinite(scalar):
        raise HyperparameterError(f"{where} is {scalar}; expected a finite number")
    if isinstance(scalar, str) and len(scalar) > MAX_STRING_CHARS:
        raise HyperparameterError(
            f"{where} is a string of {len(scalar)} characters; at most {MAX_STRING_CHARS}"
        )
    return scalar


def check_hyperparameters(value: Any, owner: str) -> Hyperparameters:
    """``value`` as a checked flat dict of JSON scalars, keys sorted.

    ``owner`` names the value in messages (``"ESZSL.hyperparameters_"``, ``"worker.json
    hyperparameters['main']"``): each message begins with it and the key, e.g.
    ``ESZSL.hyperparameters_['lam'] is a ndarray; expected a JSON scalar (str, int, float, bool
    or None)``.

    Raises
    ------
    HyperparameterError
        Not a dict; a key that is not a non-empty string of at most :data:`MAX_KEY_CHARS`
        characters; more than :data:`MAX_KEYS` keys; a value that is not a JSON scalar, not
        finite, or a string longer than :data:`MAX_STRING_CHARS`; more than :data:`MAX_BYTES`
        bytes of JSON in all.
    """
    if not isinstance(value, dict):
        raise HyperparameterError(
            f"{owner} is a {type(value).__name__}; expected a dict of names to JSON scalars"
        )
    if len(value) > MAX_KEYS:
        raise HyperparameterError(f"{owner} has {len(value)} keys; at most {MAX_KEYS}")
    out: Hyperparameters = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            shown = repr(key)[:80]
            raise HyperparameterError(
                f"{owner} has the key {shown}; keys are strings of 1 to {MAX_KEY_CHARS} characters"
            )
        out[key] = _scalar(item, f"{owner}[{key!r}]")
    size = len(json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > MAX_BYTES:
        raise HyperparameterError(f"{owner} takes {size} bytes as JSON; at most {MAX_BYTES}")
    return dict(sorted(out.items()))


def model_hyperparameters(model: object) -> Hyperparameters:
    """What a fitted model exposes (:data:`ATTRIBUTE`), checked; ``{}`` when it sets nothing."""
    value = getattr(model, ATTRIBUTE, None)
    if value is None:
        return {}
    return check_hyperparameters(value, f"{type(model).__name__}.{ATTRIBUTE}")
