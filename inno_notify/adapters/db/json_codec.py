"""One typed codec for records and the JSON columns: a domain type's fields define its stored shape.

Instead of a hand-written conversion per record and per JSON detail, both directions are derived
once per type from its type hints, so a field added to a domain dataclass is stored and read back
without touching the store:

- `json_dumper(T)` / `json_loader(T)` convert a value of type T to plain JSON and back: a
  dataclass is an object of its fields, a tuple a list, a Mapping an object, an enum its value, a
  datetime ISO-8601 text in UTC (`2026-11-30T13:00:00+00:00`, as the store always wrote it).
  Loading takes a missing key (a row written before the field existed) as the field's default and
  ignores keys it does not know; values of plain types (str, int, float, bool, object) come back
  exactly as stored, so 4 stays 4 and is not turned into 4.0.
- `RowCodec(T, table)` maps a record to a table row and back: a field is the column of the same
  name; enums are stored as their value, datetimes and plain values as they are (typed columns),
  everything else (tuples, mappings, nested dataclasses) is a JSON column through the above. A
  SQL NULL in a JSON column of a field that cannot be None reads as the field's default.

Text is not cleaned here: what reaches the store was bounded and NUL-stripped where it was parsed
(domain/parsing/storable.py).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, NamedTuple, TypeVar

import sqlalchemy as sa

T = TypeVar("T")
Convert = Callable[[Any], Any]

_PLAIN = (str, int, float, bool, object, type(None))


def parse_iso(value: str) -> datetime:
    """An ISO-8601 time with an offset, as an aware UTC datetime (naive text is refused).

    Raises ValueError for anything else, a time that leaves datetime's range in UTC included
    (0001-01-01T00:00:00+01:00)."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"time without a zone: {value!r}")
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(f"time out of range in UTC: {value!r}") from exc


def _dump_datetime(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _is_plain(tp: Any) -> bool:
    if tp is Any or tp in _PLAIN:
        return True
    if _is_union(tp):
        return all(_is_plain(arg) for arg in typing.get_args(tp))
    return False


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _optional_of(tp: Any) -> Any | None:
    """X for `X | None`, else None."""
    if not _is_union(tp):
        return None
    args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
    if len(args) != 1 or len(typing.get_args(tp)) != 2:
        return None
    return args[0]


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any, Callable[[], Any] | None], ...]:
    """(name, type, a maker of its default or None) of a dataclass's fields, hints resolved."""
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, Any, Callable[[], Any] | None]] = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out.append((f.name, hints[f.name], functools.partial(_same, f.default)))
        elif f.default_factory is not dataclasses.MISSING:
            out.append((f.name, hints[f.name], f.default_factory))
        else:
            out.append((f.name, hints[f.name], None))
    return tuple(out)


def _same(value: T) -> T:
    return value


@functools.cache
def json_dumper(tp: Any) -> Convert | None:
    """The conversion of a T to plain JSON; None when a T is JSON as it is."""
    return _derive(tp, _DUMP)


@functools.cache
def json_loader(tp: Any) -> Convert | None:
    """The conversion of plain JSON to a T; None when the JSON is the T as it is."""
    return _derive(tp, _LOAD)


class _Way(NamedTuple):
    """What one direction of conversion does with the types it does not just walk through."""

    convert: Callable[[Any], Convert | None]  # the direction itself (json_dumper or json_loader)
    time: Convert  # a datetime's
    enum: Callable[[type[enum.Enum]], Convert]
    dataclass: Callable[[type], Convert]
    tuple_as: type  # a JSON list, and a tuple again on the way back


def _derive(tp: Any, way: _Way) -> Convert | None:
    # Both directions walk a type alike (plain values as they are, None through an optional, the
    # items of a list, tuple or mapping); `way` says what each does with the rest.
    if _is_plain(tp):
        return None
    inner = _optional_of(tp)
    if inner is not None:
        each = way.convert(inner)
        return None if each is None else (lambda v: None if v is None else each(v))
    if tp is datetime:
        return way.time
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return way.enum(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple or origin is list:
        item, made = way.convert(args[0]), way.tuple_as if origin is tuple else list
        if item is None:
            return made
        return (lambda v: [item(x) for x in v]) if made is list else (lambda v: made([item(x) for x in v]))
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        value = way.convert(args[1]) if args else None
        return dict if value is None else (lambda v: {k: value(x) for k, x in v.items()})
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return way.dataclass(tp)
    raise TypeError(f"no JSON codec for {tp!r}")


def _enum_value(value: enum.Enum) -> Any:
    return value.value


# --- generated conversions ----------------------------------------------------------------------
# A record's conversion is compiled once per type into one expression over its fields, as
# dataclasses compiles __init__: as fast as the hand-written copies it replaces, which the
# ingestion and dispatch paths run for every row.


def _compile(name: str, arg: str, body: str, env: dict[str, Any]) -> Convert:
    namespace: dict[str, Any] = {}
    exec(f"def {name}({arg}):\n    {body}\n", env, namespace)
    return typing.cast(Convert, namespace[name])


def _bind(env: dict[str, Any], value: Any) -> str:
    key = f"_c{len(env)}"
    env[key] = value
    return key


def _dump_expr(expr: str, tp: Any, env: dict[str, Any]) -> str:
    inner = _optional_of(tp)
    if inner is not None and json_dumper(inner) is not None:
        key = _bind(env, json_dumper(inner))
        return f"(None if ({key}v := {expr}) is None else {key}({key}v))"
    dump = json_dumper(tp)
    return expr if dump is None else f"{_bind(env, dump)}({expr})"


def _load_expr(expr: str, tp: Any, env: dict[str, Any], default: Callable[[], Any] | None = None) -> str:
    """`expr` converted to a T; with `default`, a None is replaced by the default."""
    inner = _optional_of(tp)
    load = json_loader(tp if inner is None else inner)
    if default is not None:
        fallback = f"{_bind(env, default)}()"
    elif inner is not None and load is not None:
        fallback = "None"
    else:
        return expr if load is None else f"{_bind(env, load)}({expr})"
    key = _bind(env, load) if load is not None else None
    value = f"{key}({key}v)" if key else f"_v{len(env)}"
    if key is None:
        return f"({fallback} if ({value} := {expr}) is None else {value})"
    return f"({fallback} if ({key}v := {expr}) is None else {value})"


def _dataclass_dumper(cls: type) -> Convert:
    env: dict[str, Any] = {}
    items = [f"{name!r}: {_dump_expr(f'v.{name}', tp, env)}" for name, tp, _ in _fields(cls)]
    return _compile("dump", "v", "return {" + ", ".join(items) + "}", env)


def _dataclass_loader(cls: type) -> Convert:
    env: dict[str, Any] = {"cls": cls}
    fields = _fields(cls)
    plan = [(name, json_loader(tp)) for name, tp, _ in fields]
    if all(convert is None for _, convert in plan):
        # Nothing to convert: the object is the keyword arguments (a missing key is defaulted).
        fast = _compile("load", "d", "return cls(**d)", env)
    else:
        args = ", ".join(f"{name}={_load_expr(f'd[{name!r}]', tp, env)}" for name, tp, _ in fields)
        fast = _compile("load", "d", f"return cls({args})", env)

    def load(data: Mapping[str, Any]) -> Any:
        try:
            return fast(data)
        except (KeyError, TypeError):
            # A key the JSON lacks (written before the field existed): the field's default.
            kwargs = {}
            for name, convert in plan:
                if name in data:
                    value = data[name]
                    kwargs[name] = value if convert is None or value is None else convert(value)
            return cls(**kwargs)

    return load


def _is_datetime(tp: Any) -> bool:
    return (_optional_of(tp) or tp) is datetime


_DUMP = _Way(json_dumper, _dump_datetime, lambda _: _enum_value, _dataclass_dumper, list)
_LOAD = _Way(json_loader, parse_iso, lambda tp: tp, _dataclass_loader, tuple)


class RowCodec(Generic[T]):
    """A record type's fields as the columns of a table (see the module docstring).

    With `rest`, the fields without a column of their own are stored together as one JSON object
    in that column (a usage's per-GPU detail); without it, such fields are not stored.
    """

    def __init__(self, cls: type[T], table: sa.Table, *, rest: str | None = None) -> None:
        names = set(table.c.keys()) - ({rest} if rest else set())
        fields = _fields(typing.cast(type, cls))
        own = [f for f in fields if f[0] in names]
        others = [f for f in fields if f[0] not in names] if rest else []
        self.columns = tuple(name for name, _, _ in own)

        # Typed columns take datetimes and plain values as they are, enums as their value;
        # anything else is a JSON column.
        env: dict[str, Any] = {}
        items = [
            f"{name!r}: " + (f"r.{name}" if _is_datetime(tp) else _dump_expr(f"r.{name}", tp, env))
            for name, tp, _ in own
        ]
        if rest:
            nested = [f"{name!r}: {_dump_expr(f'r.{name}', tp, env)}" for name, tp, _ in others]
            items.append(f"{rest!r}: {{{', '.join(nested)}}}")
        self.to_row: Callable[[T], dict[str, Any]] = _compile(
            "to_row", "r", "return {" + ", ".join(items) + "}", env
        )

        # A NULL reads as None where the field may be None, else as the field's default.
        env = {"cls": cls}
        args = [
            f"{name}="
            + (
                f"row[{name!r}]"
                if _is_datetime(tp)
                else _load_expr(f"row[{name!r}]", tp, env, None if _may_be_none(tp) else default)
            )
            for name, tp, default in own
        ]
        if rest:
            env["rest"] = _rest_loader(others)
            args.append(f"**rest(row[{rest!r}])")
        self.from_row: Callable[[Mapping[Any, Any]], T] = _compile(
            "from_row", "row", f"return cls({', '.join(args)})", env
        )


def _rest_loader(fields: Sequence[tuple[str, Any, Any]]) -> Convert:
    """The fields stored together in one JSON object, as keyword arguments."""
    env: dict[str, Any] = {}
    items = ", ".join(f"{name!r}: {_load_expr(f'd[{name!r}]', tp, env)}" for name, tp, _ in fields)
    fast = _compile("rest", "d", "return {" + items + "}", env)
    plan = [(name, json_loader(tp)) for name, tp, _ in fields]

    def load(data: Mapping[str, Any] | None) -> dict[str, Any]:
        try:
            return typing.cast(dict[str, Any], fast(data))
        except (KeyError, TypeError):
            # A key written before the field existed (or no object): the field's default.
            return {
                name: data[name] if convert is None or data[name] is None else convert(data[name])
                for name, convert in plan
                if data and name in data
            }

    return load


def _may_be_none(tp: Any) -> bool:
    return tp is Any or tp is object or (_is_union(tp) and type(None) in typing.get_args(tp))
