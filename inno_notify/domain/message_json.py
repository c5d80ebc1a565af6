"""The one JSON encoding of the messages that travel whole in an outbox row's payload
(domain.messages, domain.bot_replies): written and read from the message's dataclass fields.

A message is fixed when it is planned and read back when it is sent, maybe by a newer version or
after a hand edit. A message is a plain frozen dataclass of text, numbers, times, enums, tuples
and such dataclasses; `encode` writes each field under its name, `decode` checks each value
against the field's type and raises ValueError instead of handing a renderer a value of the
wrong kind. A field absent (or null) takes its default.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Hashable, Mapping
from datetime import datetime
from typing import Any, TypeVar

# Messages are frozen dataclasses, so hashable: their field types are looked up once per class.
T = TypeVar("T", bound=Hashable)

MESSAGE_KEY = "message"
Json = dict[str, Any]


def read_message(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The message object of a row's payload (under MESSAGE_KEY)."""
    message = payload.get(MESSAGE_KEY)
    if not isinstance(message, Mapping):
        raise ValueError(f"the payload has no {MESSAGE_KEY!r} object")
    return message


def encode(value: Any) -> Any:
    """`value` as JSON: a dataclass as an object of its fields, a time in ISO 8601 with its zone,
    an enum as its value, a tuple as a list."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [encode(item) for item in value]
    return value


def decode(cls: type[T], data: Mapping[str, Any]) -> T:
    """The `cls` that `encode` wrote as `data`, each field checked against its type."""
    values: dict[str, Any] = {}
    for name, field in _fields(cls).items():
        value = data.get(name)
        if value is not None:
            values[name] = _decoded(name, field.kind, _checked(name, value, _json_type(field.kind)))
        elif not field.has_default:
            if not field.nullable:
                raise ValueError(f"{name}: missing")
            values[name] = None
    return cls(**values)


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    kind: Any  # the field's type, None left out of an optional one
    nullable: bool
    has_default: bool


@functools.cache
def _fields(cls: type) -> dict[str, _Field]:
    hints = typing.get_type_hints(cls)
    fields: dict[str, _Field] = {}
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        nullable = typing.get_origin(kind) in (typing.Union, types.UnionType)
        if nullable:
            (kind,) = (arg for arg in typing.get_args(kind) if arg is not type(None))
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fields[f.name] = _Field(kind, nullable, has_default)
    return fields


def _json_type(kind: Any) -> type | tuple[type, ...]:
    """What JSON holds for a value of `kind`."""
    if kind is float:
        return (int, float)
    if kind is int or kind is bool:
        return typing.cast(type, kind)
    if typing.get_origin(kind) is tuple:
        return list
    if dataclasses.is_dataclass(kind):
        return Mapping
    # Text, a time, an enum's value.
    return str


def _checked(name: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    # bool is an int to isinstance, never a number or a count here.
    if isinstance(value, bool) and kind is not bool:
        raise ValueError(f"{name}: expected {kind}, got bool")
    if not isinstance(value, kind):
        raise ValueError(f"{name}: expected {kind}, got {type(value).__name__}")
    return value


def _decoded(name: str, kind: Any, value: Any) -> Any:
    """`value`, already of `kind`'s JSON type, as a `kind`."""
    if kind is float:
        return float(value)
    if kind is datetime:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError(f"{name}: a time without zone")
        return parsed
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(value)
        except ValueError:
            raise ValueError(f"{name}: no {kind.__name__} {value!r}") from None
    if dataclasses.is_dataclass(kind):
        return decode(typing.cast(type, kind), value)
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        return tuple(_decoded(name, item, _checked(name, v, _json_type(item))) for v in value)
    return value
