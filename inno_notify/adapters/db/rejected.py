"""The rejected_objects table: objects a cluster user wrote that could not be read or stored.

The ingestion pipeline sets such an object aside instead of stopping on it; this keeps one row per
(cluster, kind, uid), the newest reason and detail, when it was first and last seen refused, and
how many times. Queries run on a connection the caller owns (the Store decides the transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.json_codec import RowCodec
from inno_notify.adapters.db.sql import dialect_insert
from inno_notify.adapters.db.tables import rejected_objects
from inno_notify.domain.model import RejectedObject
from inno_notify.domain.parsing.storable import INDEXED_MAX_BYTES, KEY_MAX_BYTES, storable

_KEY = ("cluster", "kind", "uid")
# A row read back: the columns are the record's fields.
_ROWS = RowCodec(RejectedObject, rejected_objects)
DETAIL_MAX_BYTES = 1024


def _optional(value: str | None, max_bytes: int) -> str | None:
    return None if value is None else storable(value, max_bytes)


def _row(rejection: RejectedObject, at: datetime) -> dict[str, object]:
    # The values come from hostile objects and error messages: make them storable here too, where
    # they meet the database, whatever the caller did.
    return {
        "cluster": storable(rejection.cluster, INDEXED_MAX_BYTES),
        "kind": storable(rejection.kind, 64),
        "uid": storable(rejection.uid, KEY_MAX_BYTES),
        "namespace": _optional(rejection.namespace, INDEXED_MAX_BYTES),
        "name": _optional(rejection.name, INDEXED_MAX_BYTES),
        "reason": storable(rejection.reason, 64),
        "detail": _optional(rejection.detail, DETAIL_MAX_BYTES),
        "first_seen_at": rejection.first_seen_at or at,
        "last_seen_at": rejection.last_seen_at or at,
        "count": max(1, rejection.count),
    }


async def record(conn: AsyncConnection, rejections: Sequence[RejectedObject], at: datetime) -> None:
    """Upserts one row per object: a new one, or the stored one with its count raised and its reason,
    detail and last-seen time replaced."""
    rows: dict[tuple[object, ...], dict[str, object]] = {}
    for rejection in rejections:
        row = _row(rejection, at)
        key = tuple(row[k] for k in _KEY)
        earlier = rows.get(key)
        if earlier is not None:  # one statement may not touch a row twice (Postgres): add them up
            row["count"] = int(earlier["count"]) + int(row["count"])  # type: ignore[call-overload]
            row["first_seen_at"] = earlier["first_seen_at"]
        rows[key] = row
    if not rows:
        return
    stmt = dialect_insert(conn, rejected_objects)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(_KEY),
        set_={
            "namespace": stmt.excluded.namespace,
            "name": stmt.excluded.name,
            "reason": stmt.excluded.reason,
            "detail": stmt.excluded.detail,
            "last_seen_at": stmt.excluded.last_seen_at,
            "count": rejected_objects.c.count + stmt.excluded.count,
        },
    )
    await conn.execute(stmt, list(rows.values()))


async def list_recent(conn: AsyncConnection, cluster: str | None, limit: int) -> list[RejectedObject]:
    """The most recently refused objects first."""
    query = sa.select(rejected_objects)
    if cluster is not None:
        query = query.where(rejected_objects.c.cluster == cluster)
    query = query.order_by(
        rejected_objects.c.last_seen_at.desc(), rejected_objects.c.kind, rejected_objects.c.uid
    ).limit(limit)
    return [_ROWS.from_row(row) for row in (await conn.execute(query)).mappings()]
