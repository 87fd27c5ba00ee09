"""Check a document from the cluster against its TypedDict before it is sent.

The ``ClusterAdmin`` returns plain dicts; this makes sure each has the fields (and types)
that ``cluster_admin.py`` promises, so that a broker bug shows up as one clear log line and
a 500 naming the field, rather than as a client parsing a half-document. Extra fields are
allowed and passed through.

Example: ``check(TopicStats, {"msgRateIn": 1.0})`` raises ``ShapeError("TopicStats:
missing msgThroughputIn, ...")``; ``{"storageSize": "12"}`` raises ``ShapeError(
"TopicStats.storageSize: expected int, got str")``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from georep.rest.errors import RestError


class ShapeError(RestError):
    """A document from the cluster does not match its promised shape (a bug): 500."""

    status = 500

    def __str__(self) -> str:
        return f"the cluster returned a malformed document: {super().__str__()}"


def check(shape: Any, value: object, where: str | None = None) -> None:
    _check(shape, value, where or str(getattr(shape, "__name__", shape)))


def _check(shape: Any, value: object, where: str) -> None:
    if is_typeddict(shape):
        _check_typeddict(shape, value, where)
        return
    origin = get_origin(shape)
    if origin is typing.NotRequired:
        _check(get_args(shape)[0], value, where)
    elif origin is list:
        if not isinstance(value, list):
            raise ShapeError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = get_args(shape)
        for index, element in enumerate(value):
            _check(item, element, f"{where}[{index}]")
    elif origin is dict:
        if not isinstance(value, Mapping):
            raise ShapeError(f"{where}: expected an object, got {type(value).__name__}")
        _, item = get_args(shape)
        for key, element in value.items():
            if not isinstance(key, str):
                raise ShapeError(f"{where}: key {key!r} is not a string")
            _check(item, element, f"{where}[{key!r}]")
    elif origin in (typing.Union, types.UnionType):
        errors = []
        for option in get_args(shape):
            try:
                _check(option, value, where)
                return
            except ShapeError as error:
                errors.append(str(error))
        raise ShapeError("; ".join(errors))
    elif shape is object:
        return
    elif shape is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ShapeError(f"{where}: expected a number, got {type(value).__name__}")
    elif shape is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShapeError(f"{where}: expected int, got {type(value).__name__}")
    elif shape in (str, bool, type(None)):
        if not isinstance(value, shape):
            raise ShapeError(f"{where}: expected {shape.__name__}, got {type(value).__name__}")
    else:  # pragma: no cover - a shape this checker does not know is a bug here
        raise TypeError(f"shapes.check cannot check {shape!r}")


def _check_typeddict(shape: Any, value: object, where: str) -> None:
    if not isinstance(value, Mapping):
        raise ShapeError(f"{where}: expected an object, got {type(value).__name__}")
    hints = get_type_hints(shape, include_extras=True)
    missing = sorted(key for key in required_keys(shape) if key not in value)
    if missing:
        raise ShapeError(f"{where}: missing {', '.join(missing)}")
    for key, field in hints.items():
        if key in value:
            _check(field, value[key], f"{where}.{key}")


def required_keys(shape: Any) -> frozenset[str]:
    """The TypedDict's required keys, from its evaluated hints (``__required_keys__`` misses
    ``NotRequired`` written in a string annotation before Python 3.12)."""
    hints = get_type_hints(shape, include_extras=True)
    return frozenset(
        key
        for key, hint in hints.items()
        if get_origin(hint) is not typing.NotRequired
        and (shape.__total__ or key in shape.__required_keys__)
    )
