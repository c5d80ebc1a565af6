"""The few SQL building blocks that differ between Postgres and SQLite, in one place.

Both dialects speak INSERT … ON CONFLICT, but through separate SQLAlchemy constructs; and both
cap the number of bound parameters, so long IN lists go in chunks. Cursors for keyset pagination
are opaque to clients but just the last row's sort key underneath. The window of finish times the
report queries share is here too, and `fetch`: a read of one statement straight through the driver
on Postgres, for the hottest reads (the API's job list, the weekly digest).
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

T = TypeVar("T")

# Well under both limits (SQLite 32766 variables, Postgres 32767 arguments) and still few round trips.
IN_CHUNK = 1000
# What a cursor value may be: the columns it is compared with are BIGINT and text, and neither
# database takes an integer outside 64 bits or a NUL in text (SQLite's driver raises
# OverflowError, Postgres refuses the statement).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
MAX_CURSOR_TEXT = 1000
# Compiled statements `fetch` keeps: one per statement object in use (the callers build each shape
# once and keep it, so this bounds what a caller choosing shapes, the job list's page sizes, adds).
STATEMENTS_KEPT = 256


class InvalidCursor(ValueError):
    """A pagination cursor that this store did not hand out."""


def dialect_insert(conn: AsyncConnection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    name = conn.dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {name!r} (use Postgres or SQLite)")


def upsert(
    conn: AsyncConnection, table: sa.Table, keys: Sequence[str], update: Sequence[str]
) -> postgresql.Insert | sqlite.Insert:
    """INSERT … ON CONFLICT (keys) DO UPDATE SET each of `update` to the incoming value."""
    stmt = dialect_insert(conn, table)
    return stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in update})


async def upsert_rows(
    conn: AsyncConnection,
    table: sa.Table,
    keys: Sequence[str],
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str] | None = None,
) -> None:
    """Upserts `rows` by `keys`, the last row of each key winning: a stored row takes the incoming
    `columns` (None: all the rows carry) and keeps the others (what the store owns)."""
    if not rows:
        return
    rows = last_per_key(rows, keys)
    update = [c for c in (rows[0] if columns is None else columns) if c not in keys]
    await conn.execute(upsert(conn, table, keys, update), rows)


async def newest_run(
    conn: AsyncConnection, table: sa.Table, namespace: str, name: str, uid: str | None, cluster: str | None
) -> sa.RowMapping | None:
    """The row of the newest run of that name in the namespace (by creation, then uid), or of the one
    with that uid; of any cluster when `cluster` is None. Jobs and workflows are looked up alike."""
    query = sa.select(table).where(table.c.namespace == namespace, table.c.name == name)
    if uid is not None:
        query = query.where(table.c.uid == uid)
    if cluster is not None:
        query = query.where(table.c.cluster == cluster)
    query = query.order_by(table.c.created_at.desc().nulls_last(), table.c.uid.desc()).limit(1)
    return (await conn.execute(query)).mappings().first()


def last_per_key(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Keeps the last row of each key: one statement may not touch the same row twice (Postgres)."""
    by_key = {tuple(row[k] for k in keys): row for row in rows}
    return list(by_key.values())


def finished_in(
    table: sa.Table, since: datetime | None, until: datetime | None, cluster: str | None = None
) -> list[sa.ColumnElement[bool]]:
    """The conditions of the rows of `table` that finished in [since, until) (None: that end open),
    of `cluster` (None: any)."""
    conditions: list[sa.ColumnElement[bool]] = []
    if since is not None:
        conditions.append(table.c.finished_at >= since)
    if until is not None:
        conditions.append(table.c.finished_at < until)
    if cluster is not None:
        conditions.append(table.c.cluster == cluster)
    return conditions


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def rows_in(
    conn: AsyncConnection, query: sa.Select[Any], column: sa.ColumnElement[Any], values: Iterable[Any]
) -> list[sa.RowMapping]:
    """The rows of `query` whose `column` is one of `values` (each asked for once), one round trip
    per chunk of them."""
    found: list[sa.RowMapping] = []
    for chunk in chunks(list(dict.fromkeys(values))):
        found.extend((await conn.execute(query.where(column.in_(chunk)))).mappings())
    return found


async def grouped_in(
    conn: AsyncConnection,
    query: sa.Select[Any],
    column: sa.Column[str],
    values: Iterable[str],
    decode: Callable[[sa.RowMapping], T],
) -> dict[str, list[T]]:
    """The rows of `rows_in`, decoded and grouped by their `column` value, each group in the order read."""
    found: dict[str, list[T]] = {}
    for row in await rows_in(conn, query, column, values):
        found.setdefault(row[column.name], []).append(decode(row))
    return found


def encode_cursor(values: Sequence[str | int]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(values))).decode().rstrip("=")


def decode_cursor(cursor: str, types: Sequence[type]) -> list[Any]:
    try:
        values = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, orjson.JSONDecodeError, ValueError) as exc:
        raise InvalidCursor("invalid cursor") from exc
    if (
        not isinstance(values, list)
        or len(values) != len(types)
        or not all(type(v) is t and _storable(v) for v, t in zip(values, types, strict=True))
    ):
        raise InvalidCursor("invalid cursor")
    return values


def _storable(value: object) -> bool:
    if isinstance(value, int):
        return _INT64_MIN <= value <= _INT64_MAX
    if isinstance(value, str):
        return len(value) <= MAX_CURSOR_TEXT and "\x00" not in value
    return True


Statement = sa.Select[Any] | sa.CompoundSelect[Any]


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # the bound parameters in positional order
    fixed: Mapping[str, Any]  # values bound at build time (a JSON key, say)


@functools.lru_cache(maxsize=STATEMENTS_KEPT)
def _compile(statement: Statement, dialect: Dialect) -> _Compiled:
    compiled = statement.compile(dialect=dialect)
    names = tuple(compiled.positiontup or ())
    fixed = {name: bind.value for name, bind in compiled.binds.items() if not bind.required}
    return _Compiled(compiled.string, names, fixed)


async def fetch(conn: AsyncConnection, statement: Statement, params: Mapping[str, Any]) -> list[Any]:
    """The rows of one read statement (built once and kept by the caller, every value a named bound
    parameter). On Postgres the compiled SQL runs on asyncpg's connection itself, outside any
    transaction: one statement reads one snapshot at READ COMMITTED, so a BEGIN and a ROLLBACK
    would only add two round trips, and SQLAlchemy's execution and result processing cost more CPU
    than asyncpg's own on the paths that use this (measured on the job list: 2.3 ms against 1.0 ms
    per page). Rows hold the driver's values (no result processing: a caller reads plain columns,
    or decodes its JSON itself). SQLite goes through SQLAlchemy as usual."""
    if conn.dialect.name != "postgresql":
        return list(await conn.execute(statement, dict(params)))
    compiled = _compile(statement, conn.dialect)
    args = [params[n] if n in params else compiled.fixed[n] for n in compiled.names]
    # The checked-out connection's driver connection, without get_raw_connection's greenlet hop.
    driver: Any = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
    try:
        records: list[Any] = await driver.fetch(compiled.sql, *args)
    except Exception as exc:
        # SQLAlchemy did not see this statement fail, so it would pool a dead connection again.
        await conn.invalidate(exc)
        raise
    return records
