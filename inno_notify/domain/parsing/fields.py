"""Typed readers for the loosely typed JSON dicts the Kubernetes API returns.

Objects arrive as plain dicts (camelCase keys, missing keys instead of nulls, sometimes explicit
nulls). Reading them through these helpers keeps the parsers free of ``isinstance`` noise and makes
one decision everywhere: a missing or null field reads as empty, a malformed one raises
:class:`ParseError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "JsonObject",
    "ParseError",
    "condition",
    "conditions",
    "integer",
    "mapping",
    "objects",
    "string_map",
    "text",
    "timestamp",
]

JsonObject = Mapping[str, Any]


class ParseError(ValueError):
    """A Kubernetes object whose shape we cannot read."""


_EMPTY: JsonObject = {}


def mapping(obj: JsonObject, key: str) -> JsonObject:
    value = obj.get(key)
    if value is None:
        return _EMPTY
    # Checking against dict first skips the slow ABC check for what json/orjson always produce.
    if type(value) is dict:
        return value
    if not isinstance(value, Mapping):
        raise ParseError(f"{key}: expected an object, got {type(value).__name__}")
    return value


def objects(obj: JsonObject, key: str) -> Sequence[JsonObject]:
    """A list of objects (``containers``, ``conditions``); entries that are not objects are skipped."""
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ParseError(f"{key}: expected a list, got {type(value).__name__}")
    return [item for item in value if type(item) is dict or isinstance(item, Mapping)]


def string_map(obj: JsonObject, key: str) -> dict[str, str]:
    """Labels and annotations: values are strings by API contract; anything else is stringified."""
    return {
        str(k): v if isinstance(v, str) else str(v) for k, v in mapping(obj, key).items() if v is not None
    }


def text(obj: JsonObject, key: str) -> str | None:
    value = obj.get(key)
    if value is None or value == "":
        return None
    return str(value)


def integer(obj: JsonObject, key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ParseError(f"{key}: expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise ParseError(f"{key}: expected an integer, got {value!r}") from exc


def timestamp(obj: JsonObject, key: str) -> datetime | None:
    """An RFC 3339 ``Time`` or ``MicroTime`` field as an aware UTC datetime."""
    value = obj.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ParseError(f"{key}: expected an RFC 3339 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ParseError(f"{key}: not an RFC 3339 time: {value!r}") from exc
    if parsed.tzinfo is None:
        # The API always writes UTC with "Z"; a naive value can only be a hand-written object.
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def conditions(status: JsonObject) -> dict[str, JsonObject]:
    """``status.conditions`` by type; if a type repeats, the last entry wins as it does in kubectl."""
    return {str(c.get("type")): c for c in objects(status, "conditions")}


def condition(status: JsonObject, type_: str) -> JsonObject | None:
    """The condition of that type if its status is "True", else None."""
    found = conditions(status).get(type_)
    if found is None or str(found.get("status")) != "True":
        return None
    return found
