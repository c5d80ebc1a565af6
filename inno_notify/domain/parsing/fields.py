"""Typed readers for the loosely typed JSON dicts the Kubernetes API returns.

Objects arrive as plain dicts (camelCase keys, missing keys instead of nulls, sometimes explicit
nulls). Reading them through these helpers keeps the parsers free of ``isinstance`` noise and makes
one decision everywhere: a missing or null field reads as empty, a malformed one raises
:class:`ParseError` naming the field and a reason from a small fixed set (the reason is a metric
label, so it must never carry the value). Every string comes back storable (see :mod:`.storable`),
every integer within the range of the column it ends in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .storable import (
    INDEXED_MAX_BYTES,
    INT32_MAX,
    INT32_MIN,
    TEXT_MAX_BYTES,
    storable,
    storable_key,
    storable_map,
)

__all__ = [
    "BAD_KEY",
    "BAD_QUANTITY",
    "BAD_TIME",
    "MALFORMED",
    "MISSING_FIELD",
    "OUT_OF_RANGE",
    "WRONG_TYPE",
    "JsonObject",
    "ParseError",
    "SetAside",
    "condition",
    "conditions",
    "finite",
    "identity",
    "indexed_text",
    "integer",
    "key",
    "labelled_uid",
    "mapping",
    "objects",
    "required_identity",
    "string_map",
    "text",
    "timestamp",
]

JsonObject = Mapping[str, Any]

# Why an object was refused: the `reason` label of inno_notify_rejected_objects_total.
MALFORMED = "malformed"
WRONG_TYPE = "wrong_type"
MISSING_FIELD = "missing_field"
OUT_OF_RANGE = "out_of_range"
BAD_TIME = "bad_time"
BAD_QUANTITY = "bad_quantity"
BAD_KEY = "bad_key"

# Times outside these years are not a cluster's: refusing them keeps date arithmetic (due times,
# durations) from overflowing further on.
_FIRST_YEAR = 1900
_LAST_YEAR = 8999
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,19}")
# Label keys are at most 253 + 1 + 63 characters in Kubernetes.
_MAP_KEY_MAX_BYTES = 512


class ParseError(ValueError):
    """A Kubernetes object whose shape we cannot read; ``reason`` is one of this module's constants."""

    def __init__(self, message: str, reason: str = MALFORMED) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SetAside:
    """One value of an object that was kept: the value was dropped (read as absent), and why.

    Parsers append these to the ``notes`` list a caller passes, so the caller can count them; the
    reason is a fixed word, never the value.
    """

    field: str
    reason: str


_EMPTY: JsonObject = {}


def _kind(value: object) -> str:
    return type(value).__name__


def mapping(obj: JsonObject, key: str) -> JsonObject:
    value = obj.get(key)
    if value is None:
        return _EMPTY
    # Checking against dict first skips the slow ABC check for what json/orjson always produce.
    if type(value) is dict:
        return value
    if not isinstance(value, Mapping):
        raise ParseError(f"{key}: expected an object, got {_kind(value)}", WRONG_TYPE)
    return value


def objects(obj: JsonObject, key: str) -> Sequence[JsonObject]:
    """A list of objects (``containers``, ``conditions``); entries that are not objects are skipped."""
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ParseError(f"{key}: expected a list, got {_kind(value)}", WRONG_TYPE)
    return [item for item in value if type(item) is dict or isinstance(item, Mapping)]


def _scalar_text(key: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        # Only scalars are turned into text: str() of a nested value could be huge or recurse deep.
        try:
            return str(value)
        except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit
            raise ParseError(f"{key}: a number too long to be text", OUT_OF_RANGE) from exc
    raise ParseError(f"{key}: expected a string, got {_kind(value)}", WRONG_TYPE)


def string_map(obj: JsonObject, key: str) -> dict[str, str]:
    """Labels and annotations: values are strings by API contract; other scalars are stringified,
    nested values refused. Keys and values come back storable, at most MAP_MAX_ENTRIES of them."""
    values: dict[str, str] = {}
    for name, value in mapping(obj, key).items():
        if type(value) is str:
            values[str(name)] = value
        elif value is not None:
            values[str(name)] = _scalar_text(key, value)
    return storable_map(values, _MAP_KEY_MAX_BYTES, TEXT_MAX_BYTES)


def text(obj: JsonObject, key: str, max_bytes: int = TEXT_MAX_BYTES) -> str | None:
    """A string field, storable and capped at ``max_bytes`` (use INDEXED_MAX_BYTES for indexed ones)."""
    value = obj.get(key)
    if value is None or value == "":
        return None
    cleaned = storable(_scalar_text(key, value), max_bytes)
    return cleaned or None


def indexed_text(obj: JsonObject, key: str) -> str | None:
    """A string that ends in an indexed column (names, namespaces, reasons summaries show)."""
    return text(obj, key, INDEXED_MAX_BYTES)


def _string(obj: JsonObject, key: str, expected: str) -> str | None:
    """A field that only a string can be (a uid, a time): None when missing, null or empty."""
    value = obj.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ParseError(f"{key}: expected {expected}, got {_kind(value)}", WRONG_TYPE)
    return value


def key(obj: JsonObject, field: str) -> str | None:
    """A uid: a string stored and compared as written, so one that is not storable as is is refused."""
    value = _string(obj, field, "a string")
    if value is None:
        return None
    kept = storable_key(value)
    if kept is None:
        raise ParseError(f"{field}: not usable as a key (too long, NUL or invalid UTF-8)", BAD_KEY)
    return kept


def labelled_uid(labels: Mapping[str, object], label: str) -> str | None:
    """The uid a label names (a Job's controller-uid on its pods, a Kueue Workload's job-uid): a
    label anyone may write, so one that is there but not usable as a key is refused."""
    value = labels.get(label)
    if not value:
        return None
    uid = storable_key(value) if isinstance(value, str) else None
    if uid is None:
        raise ParseError(f"label {label}: not usable as a job uid", BAD_KEY)
    return uid


def required_identity(
    metadata: JsonObject, kind: str, *, generate_name: bool = False
) -> tuple[str, str, str]:
    """An object's uid, namespace and name (with `generate_name`, its generateName where it has no
    name yet); an object without all three cannot be recorded."""
    uid = key(metadata, "uid")
    namespace = indexed_text(metadata, "namespace")
    name = indexed_text(metadata, "name")
    if name is None and generate_name:
        name = indexed_text(metadata, "generateName")
    if uid is None or namespace is None or name is None:
        raise ParseError(f"{kind} without metadata.uid, namespace or name", MISSING_FIELD)
    return uid, namespace, name


def integer(obj: JsonObject, key: str, low: int = INT32_MIN, high: int = INT32_MAX) -> int | None:
    """An integer field within [low, high] (default: a 32-bit column). Strings of ASCII digits are
    read too; other scripts' digits ("²", "٣") and Python's "1_000" are not integers here."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ParseError(f"{key}: expected an integer, got bool", WRONG_TYPE)
    if isinstance(value, str):
        if not _INTEGER_TEXT.fullmatch(value):
            raise ParseError(f"{key}: expected an integer, got a string that is not one", WRONG_TYPE)
        number = int(value)
    elif isinstance(value, int):
        number = value
    else:
        raise ParseError(f"{key}: expected an integer, got {_kind(value)}", WRONG_TYPE)
    if not low <= number <= high:
        raise ParseError(f"{key}: outside [{low}, {high}]", OUT_OF_RANGE)
    return number


def timestamp(obj: JsonObject, key: str) -> datetime | None:
    """An RFC 3339 ``Time`` or ``MicroTime`` field as an aware UTC datetime."""
    value = _string(obj, key, "an RFC 3339 string")
    if value is None:
        return None
    if len(value) > 64:
        raise ParseError(f"{key}: not an RFC 3339 time ({len(value)} characters)", BAD_TIME)
    try:
        parsed = datetime.fromisoformat(value)
        # The API always writes UTC with "Z"; a naive value can only be a hand-written object.
        parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ParseError(f"{key}: not an RFC 3339 time: {value!r}", BAD_TIME) from exc
    if not _FIRST_YEAR <= parsed.year <= _LAST_YEAR:
        raise ParseError(f"{key}: {value!r} is outside the years {_FIRST_YEAR}-{_LAST_YEAR}", OUT_OF_RANGE)
    return parsed


def finite(key: str, value: float, high: float) -> float:
    """``value`` if it is a finite number within [0, high], else a ParseError."""
    if not math.isfinite(value) or not 0 <= value <= high:
        raise ParseError(f"{key}: {value:.3g} is outside [0, {high:.3g}]", OUT_OF_RANGE)
    return value


def identity(obj: object) -> tuple[str | None, str | None, str | None]:
    """(uid, namespace, name) of any object, as far as it can be read; never raises.

    For naming an object that is being set aside, so everything here is storable and a uid that is
    not usable as a key reads as None.
    """
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None, None, None
    uid, namespace, name = metadata.get("uid"), metadata.get("namespace"), metadata.get("name")
    return (
        storable_key(uid) if isinstance(uid, str) and uid else None,
        storable(namespace, INDEXED_MAX_BYTES) if isinstance(namespace, str) and namespace else None,
        storable(name, INDEXED_MAX_BYTES) if isinstance(name, str) and name else None,
    )


def conditions(status: JsonObject) -> dict[str, JsonObject]:
    """``status.conditions`` by type; if a type repeats, the last entry wins as it does in kubectl.
    Conditions whose type is not a string are not conditions we read."""
    return {c["type"]: c for c in objects(status, "conditions") if isinstance(c.get("type"), str)}


def condition(status: JsonObject, type_: str) -> JsonObject | None:
    """The condition of that type if its status is "True", else None."""
    found = conditions(status).get(type_)
    if found is None or found.get("status") != "True":
        return None
    return found
