"""One typed codec for records and the JSON columns: a domain type's fields define its stored shape.

Instead of a hand-written conversion per record and per JSON detail, both directions are derived
once per type from its type hints, so a field added to a domain dataclass is stored and read back
without touching the store:

- `json_dumper(T)` / `json_loader(T)` convert a value of type T to plain JSON and back: a
  dataclass is an object of its fields, a tuple a list, a Mapping an object, an enum its value, a
  datetime ISO-8601 text in UTC (`2026-11-30T13:00:00+00:00`, as the store always wrote it).
  Loading takes a missing key (a row written before the field existed) as the field's default,
  a null as None (an enum's is refused), and ignores keys it does not know; values of plain types
  (str, int, float, bool, object) come back exactly as stored, so 4 stays 4 and is not turned
  into 4.0. What is no T raises ValueError (pydantic's ValidationError).
- `RowCodec(T, table)` maps a record to a table row and back: a field is the column of the same
  name; enums are stored as their value, datetimes and plain values as they are (typed columns),
  everything else (tuples, mappings, nested dataclasses) is a JSON column through the above. A
  SQL NULL in a column of a field that cannot be None reads as the field's default.

Both directions are pydantic's (`TypeAdapter(T)` derives the walk over dataclasses, tuples,
mappings, enums and optionals; pydantic-core's validator and serializer run it in compiled code).
Where pydantic's own reading differs from what the store has always written, its core schema is
adjusted before the validator and serializer are built from it (`_as_stored`): pydantic would turn
4 into 4.0 for a float and coerce between str, int and bool, write UTC as `Z`, and take a time
without a zone.

Text is not cleaned here: what reaches the store was bounded and NUL-stripped where it was parsed
(domain/parsing/storable.py).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from pydantic import TypeAdapter
from pydantic_core import CoreConfig, CoreSchema, SchemaSerializer, SchemaValidator
from pydantic_core import core_schema as cs

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
    # Most times are in UTC already (parse_iso's): no conversion to pay for on the hot path.
    return (value if value.tzinfo is UTC else value.astimezone(UTC)).isoformat()


def _load_datetime(value: Any) -> datetime:
    # A typed column's value is a datetime already (the database driver's), taken as it is.
    return value if isinstance(value, datetime) else parse_iso(value)


def _is_plain(tp: Any) -> bool:
    if tp is Any or tp in _PLAIN:
        return True
    if _is_union(tp):
        return all(_is_plain(arg) for arg in typing.get_args(tp))
    return False


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _may_be_none(tp: Any) -> bool:
    return tp is Any or tp is object or (_is_union(tp) and type(None) in typing.get_args(tp))


def _is_datetime(tp: Any) -> bool:
    if _is_union(tp):
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return len(args) == 1 and args[0] is datetime
    return tp is datetime


# --- pydantic's schema, read as the store wrote ------------------------------------------------

# Plain values are taken and written as they are, as the store always did (no 4 → 4.0, no "1" → 1).
_AS_THEY_ARE = frozenset({"any", "none", "str", "int", "float", "bool"})
_ANY = cs.any_schema()
_TIME = cs.no_info_plain_validator_function(
    _load_datetime, serialization=cs.plain_serializer_function_ser_schema(_dump_datetime)
)
# The keys of a core schema that hold the schemas of its parts (a field, an item, a choice, a
# definition); the other keys are settings and values (defaults, classes, serializers) left as they are.
_PARTS = ("schema", "items_schema", "keys_schema", "values_schema", "choices", "fields", "definitions")
# A float the store holds as it came (NaN, ±inf) is written so, not as null.
_CONFIG = CoreConfig(ser_json_inf_nan="constants")


def _as_stored(schema: CoreSchema) -> CoreSchema:
    """A copy of pydantic's core schema with the store's reading of plain values, times and nulls."""
    return typing.cast(CoreSchema, _rewrite(schema, frozenset(_enum_refs(schema))))


def _rewrite(schema: Any, enums: frozenset[str]) -> Any:
    if isinstance(schema, list):
        return [_rewrite(part, enums) for part in schema]
    if isinstance(schema, tuple):  # a union's choice with its label
        return tuple(_rewrite(part, enums) for part in schema)
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in _AS_THEY_ARE:
        return _ANY
    if kind == "datetime":
        return _TIME
    out = {key: _rewrite(value, enums) if key in _PARTS else value for key, value in schema.items()}
    if kind == "nullable" and out["schema"] is _ANY:
        return _ANY
    if kind == "union" and all((c[0] if isinstance(c, tuple) else c) is _ANY for c in out["choices"]):
        return _ANY
    if kind == "dataclass-field":
        # A null stored for a field reads as None, as the store always read it back; an enum's
        # null was always refused (every enum column is NOT NULL).
        out["schema"] = _accepting_null(out["schema"], enums)
    return out


def _enum_refs(schema: Any) -> Iterator[str]:
    """The references of the enums in a schema (one used twice is a definition, referred to)."""
    if isinstance(schema, (list, tuple)):
        for part in schema:
            yield from _enum_refs(part)
    elif isinstance(schema, dict):
        if schema.get("type") == "enum" and "ref" in schema:
            yield schema["ref"]
        for key in _PARTS:
            yield from _enum_refs(schema.get(key))


def _accepting_null(schema: dict[str, Any], enums: frozenset[str]) -> dict[str, Any]:
    kind = schema["type"]
    if kind == "default":
        return {**schema, "schema": _accepting_null(schema["schema"], enums)}
    if kind in ("nullable", "any", "enum") or (kind == "definition-ref" and schema["schema_ref"] in enums):
        return schema
    return dict(cs.nullable_schema(typing.cast(CoreSchema, schema)))


def _leaving_out(schema: Any, cls: type, names: frozenset[str]) -> Any:
    """A copy of a schema whose dataclass `cls` does not write the fields `names` (a record type
    does not hold another of its kind, so only the record itself is concerned)."""
    if isinstance(schema, (list, tuple)):
        return type(schema)(_leaving_out(part, cls, names) for part in schema)
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "dataclass" and schema["cls"] is cls:
        args = schema["schema"]
        fields = [{**f, "serialization_exclude": True} if f["name"] in names else f for f in args["fields"]]
        return {**schema, "schema": {**args, "fields": fields}}
    return {key: _leaving_out(value, cls, names) if key in _PARTS else value for key, value in schema.items()}


@functools.cache
def _stored_schema(tp: Any) -> CoreSchema:
    return _as_stored(TypeAdapter(tp).core_schema)


def _dumper(schema: CoreSchema) -> Convert:
    # The hot paths call pydantic-core's serializer and validator directly, built once per type.
    return functools.partial(SchemaSerializer(schema, _CONFIG).to_python, mode="json")


@functools.cache
def _loader(tp: Any) -> Convert:
    return SchemaValidator(_stored_schema(tp)).validate_python


@functools.cache
def json_dumper(tp: Any) -> Convert | None:
    """The conversion of a T to plain JSON; None when a T is JSON as it is."""
    return None if _is_plain(tp) else _dumper(_stored_schema(tp))


@functools.cache
def json_loader(tp: Any) -> Convert | None:
    """The conversion of plain JSON to a T; None when the JSON is the T as it is."""
    return None if _is_plain(tp) else _loader(tp)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of a record's fields `names`, as a tuple."""
    if len(names) == 1:
        return lambda record: (getattr(record, names[0]),)
    return operator.attrgetter(*names) if names else lambda _: ()


class RowCodec(Generic[T]):
    """A record type's fields as the columns of a table (see the module docstring).

    With `rest`, the fields without a column of their own are stored together as one JSON object
    in that column (a usage's per-GPU detail); without it, such fields are not stored.
    """

    def __init__(self, cls: type[T], table: sa.Table, *, rest: str | None = None) -> None:
        names = set(table.c.keys()) - ({rest} if rest else set())
        record_type: Any = cls  # a dataclass, hashable for the caches
        hints = typing.get_type_hints(record_type)
        fields = dataclasses.fields(record_type)
        own = [f for f in fields if f.name in names]
        self.columns = tuple(f.name for f in own)
        self._rest = rest
        self._others = tuple(f.name for f in fields if f.name not in names) if rest else ()
        # A NULL reads as None where the field may be None, else as the field's default.
        self._defaulted = frozenset(
            f.name
            for f in own
            if not _may_be_none(hints[f.name])
            and not _is_datetime(hints[f.name])
            and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
        )
        # Typed columns of plain values and datetimes take the record's values as they are, read in
        # one go; pydantic writes the rest (enums, JSON columns, the `rest` object), and only that:
        # going through it for every column would cost more than the whole row once did.
        as_they_are = frozenset(
            f.name for f in own if _is_plain(hints[f.name]) or _is_datetime(hints[f.name])
        )
        unstored = frozenset() if rest else frozenset(f.name for f in fields if f.name not in names)
        self._values = _getter(self.columns)
        self._dump = _dumper(_leaving_out(_stored_schema(record_type), record_type, as_they_are | unstored))
        self._load = _loader(record_type)

    def to_row(self, record: T) -> dict[str, Any]:
        row = dict(zip(self.columns, self._values(record), strict=True))
        written: dict[str, Any] = self._dump(record)
        if self._rest:
            row[self._rest] = {name: written.pop(name) for name in self._others}
        row.update(written)  # the row's keys already, in the fields' order
        return row

    def from_row(self, row: Mapping[Any, Any]) -> T:
        defaulted = self._defaulted
        values = {
            name: value for name in self.columns if (value := row[name]) is not None or name not in defaulted
        }
        if self._rest and (stored := row[self._rest]):
            # A key the object does not know is left aside; a missing one is the field's default.
            values = {**stored, **values}
        return typing.cast(T, self._load(values))
