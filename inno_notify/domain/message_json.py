"""Reading and writing the JSON a message row carries in its payload (domain.messages,
domain.bot_replies), checked field by field.

A message is fixed when it is planned and read back when it is sent, maybe by a newer version or
after a hand edit: each reader here checks the type of what it reads and raises ValueError
instead of handing a renderer a value of the wrong kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

MESSAGE_KEY = "message"
Json = dict[str, Any]


def read_message(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The message object of a row's payload (under MESSAGE_KEY, beside the addresses)."""
    message = payload.get(MESSAGE_KEY)
    if not isinstance(message, Mapping):
        raise ValueError(f"the payload has no {MESSAGE_KEY!r} object")
    return message


def read_field(
    data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, optional: bool = True
) -> Any:
    value = data.get(name)
    if value is None:
        if optional:
            return None
        raise ValueError(f"{name}: missing")
    # bool is an int to isinstance, never a number or a count here.
    if isinstance(value, bool) and kind is not bool:
        raise ValueError(f"{name}: expected {kind}, got bool")
    if not isinstance(value, kind):
        raise ValueError(f"{name}: expected {kind}, got {type(value).__name__}")
    return value


def read_text(data: Mapping[str, Any], name: str) -> str | None:
    value: str | None = read_field(data, name, str)
    return value


def read_required_text(data: Mapping[str, Any], name: str) -> str:
    value: str = read_field(data, name, str, optional=False)
    return value


def read_number(data: Mapping[str, Any], name: str) -> float | None:
    value = read_field(data, name, (int, float))
    return None if value is None else float(value)


def read_integer(data: Mapping[str, Any], name: str) -> int | None:
    value: int | None = read_field(data, name, int)
    return value


def read_time(data: Mapping[str, Any], name: str) -> datetime | None:
    value = read_text(data, name)
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"{name}: a time without zone")
    return parsed


def read_objects(data: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    """A list of objects; none where the field is absent."""
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise ValueError(f"{name}: expected a list of objects")
    return value


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
