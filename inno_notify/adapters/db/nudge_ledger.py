"""The nudges of each team and UTC day, kept beside the outbox for the weekly digest.

The digest's "idle GPUs in running pods" needs a team's nudges of one week. The outbox holds them,
but nothing there finds a team's rows of a week without visiting every workload the team ran that
week (a probe of the workload's pod and of the outbox each: tens of milliseconds per digest on a
million jobs), and the schema gains no index for it. So the live check, in the transaction that
enqueues a nudge, also adds it to a small ledger: one `checkpoints` row per team and UTC day
(`nudges/{team}/{YYYY-MM-DD}`, a JSON list of entries), which a digest reads with eight key
lookups whatever its zone. Adding an entry is idempotent (an entry is its pod and its time), and
only a nudge whose outbox rows were new is added, so a replayed or raced round counts once. The
digest's statement reads the rows itself (digest_queries.py: `day_keys`, `entries_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.sql import dialect_insert
from inno_notify.adapters.db.tables import checkpoints
from inno_notify.domain.digest import NudgeEntry

__all__ = ["MAX_DAY_KEYS", "day_keys", "entries_of", "read", "record"]

_FIELDS = (
    "cluster",
    "pod_uid",
    "namespace",
    "pod",
    "kind",
    "owner",
    "observed_at",
    "idle_since",
    "idle_gpu_equivalents",
)


def _key(team: str, day: date) -> str:
    return f"nudges/{team}/{day.isoformat()}"


def _entries(value: str | None) -> list[NudgeEntry]:
    if not value:
        return []
    found = []
    for item in orjson.loads(value):
        if isinstance(item, list) and len(item) == len(_FIELDS):
            found.append(NudgeEntry(*item))
    return found


def _identity(entry: NudgeEntry) -> tuple[str, str, float]:
    return (entry.cluster, entry.pod_uid, entry.observed_at)


async def record(conn: AsyncConnection, entries: Sequence[tuple[str, NudgeEntry]]) -> None:
    """Adds (team, entry) pairs to their days' rows, in the caller's transaction."""
    by_key: dict[str, list[NudgeEntry]] = {}
    for team, entry in entries:
        day = datetime.fromtimestamp(entry.observed_at, tz=UTC).date()
        by_key.setdefault(_key(team, day), []).append(entry)
    for key, new in sorted(by_key.items()):
        # Create the row if need be, then hold it while merging: two writers wait for each other.
        await conn.execute(
            dialect_insert(conn, checkpoints).on_conflict_do_nothing(index_elements=["key"]),
            [{"key": key, "value": "[]"}],
        )
        query = sa.select(checkpoints.c.value).where(checkpoints.c.key == key)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()
        merged = {_identity(e): e for e in _entries(await conn.scalar(query))}
        merged.update({_identity(e): e for e in new})
        value = orjson.dumps([[getattr(e, f) for f in _FIELDS] for e in merged.values()]).decode()
        await conn.execute(sa.update(checkpoints).where(checkpoints.c.key == key).values(value=value))


def day_keys(team: str, start: datetime, end: datetime) -> list[str]:
    """The keys of the team's rows of the UTC days that [start, end) touches (at most
    MAX_DAY_KEYS for a week: 169 hours starting late in a UTC day touch nine)."""
    first = start.astimezone(UTC).date()
    last = (end - timedelta(microseconds=1)).astimezone(UTC).date()
    return [_key(team, first + timedelta(days=n)) for n in range((last - first).days + 1)]


MAX_DAY_KEYS = 9


def entries_of(values: Iterable[str | None]) -> list[NudgeEntry]:
    """The entries of the rows' values (the caller keeps its week's)."""
    found: list[NudgeEntry] = []
    for value in values:
        found.extend(_entries(value))
    return found


async def read(conn: AsyncConnection, team: str, start: datetime, end: datetime) -> list[NudgeEntry]:
    """The team's entries of the UTC days that [start, end) touches (the caller keeps its week's)."""
    keys = day_keys(team, start, end)
    rows = await conn.execute(sa.select(checkpoints.c.value).where(checkpoints.c.key.in_(keys)))
    return entries_of(rows.scalars())
