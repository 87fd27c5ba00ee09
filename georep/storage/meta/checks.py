"""Argument checks the metadata repositories run before a call goes to its thread: a
value the database would refuse, or store wrongly, is InvalidArgument here instead."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from georep.storage.errors import InvalidArgument
from georep.storage.meta.models import name_chars_max


def check_int(what: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidArgument(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= name_chars_max:
        raise InvalidArgument(f"{what} must be 1..{name_chars_max} characters, got {value!r}")
    return value


def check_names(what: str, values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise InvalidArgument(f"{what}s must be a collection of strings, got {values!r}")
    return frozenset(check_name(what, value) for value in values)


def check_duration(seconds: object) -> float:
    if (
        not isinstance(seconds, int | float)
        or isinstance(seconds, bool)
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        raise InvalidArgument(f"a duration must be finite seconds > 0, got {seconds!r}")
    return float(seconds)


def check_custom(custom: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(custom, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in custom.items()
    ):
        raise InvalidArgument(f"custom metadata must map strings to strings, got {custom!r}")
    return dict(custom)
