"""The summary bookkeeping jobs and workflows share, written once for both tables.

A job (its usage) and a workflow (its summary) go the same way once they end: the end is recorded
once (`terminal_recorded_at`, the summary state, when the summary is due), the summarizer leases
the due rows under a claim token and its leadership term, and each later write settles a row only
while that claim still holds it. A claimer that cannot settle rows releases them
(`release`), so that the next claim takes them without waiting out the lease. The tables differ
only in the names of those columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db.leases import taken_over
from inno_notify.adapters.db.sql import chunks

# An end to record, by uid: (when it ended, the summary state, when its summary is due or None).
End = tuple[datetime, str, datetime | None]


@dataclass(frozen=True, slots=True)
class Lease:
    """What one claim leases: up to `limit` rows due by `now` (of `cluster`; None: every cluster),
    for `seconds`, under `token` and the claimer's leadership `term` (None: no election)."""

    now: datetime
    limit: int
    seconds: float
    token: str | None
    term: int | None
    cluster: str | None


@dataclass(frozen=True, slots=True)
class SummaryColumns:
    """A table keyed by (cluster, uid) with its summary bookkeeping columns."""

    table: sa.Table
    due: sa.Column[Any]
    token: sa.Column[Any]
    term: sa.Column[Any]

    async def record_ends(self, conn: AsyncConnection, cluster: str, ends: Mapping[str, End]) -> int:
        """Records the ends of the rows whose end is not recorded yet, locking them first (a
        replica replaying the same ends waits, then finds nothing to do); returns how many."""
        t = self.table.c
        fresh: list[str] = []
        for chunk in chunks(list(ends)):
            result = await conn.execute(
                sa.select(t.uid)
                .where(t.cluster == cluster, t.uid.in_(chunk), t.terminal_recorded_at.is_(None))
                .with_for_update()
            )
            fresh.extend(result.scalars())
        if not fresh:
            return 0
        await conn.execute(
            sa.update(self.table)
            .where(t.cluster == cluster, t.uid == sa.bindparam("b_uid"))
            .values(
                {
                    t.terminal_recorded_at: sa.bindparam("b_at"),
                    t.summary_state: sa.bindparam("b_state"),
                    self.due: sa.bindparam("b_due"),
                }
            ),
            [
                {"b_uid": uid, "b_at": at, "b_state": state, "b_due": due}
                for uid in fresh
                for at, state, due in [ends[uid]]
            ],
        )
        return len(fresh)

    def lease_due(self, waiting: Sequence[str], lease: Lease) -> sa.Update:
        """The UPDATE … RETURNING that takes `lease` of the rows in a `waiting` summary state whose
        due time has come, oldest due first, due again after the lease. A claimer with a term also
        takes, at once, rows leased under a term no live lease holds any more (leases.taken_over)."""
        t = self.table.c
        claimable = self.due <= lease.now
        if lease.term is not None:
            claimable = sa.or_(claimable, taken_over(self.token, self.term, lease.term))
        due = (
            sa.select(t.cluster, t.uid)
            .where(
                t.summary_state.in_(list(waiting)),
                claimable,
                *([] if lease.cluster is None else [t.cluster == lease.cluster]),
            )
            .order_by(self.due, t.cluster, t.uid)
            .limit(lease.limit)
            .with_for_update(skip_locked=True)  # SQLite has no row locks; its one writer serialises claims
        )
        return (
            sa.update(self.table)
            .where(sa.tuple_(t.cluster, t.uid).in_(due))
            .values(
                {
                    self.due: lease.now + timedelta(seconds=lease.seconds),
                    self.token: lease.token,
                    self.term: lease.term,
                }
            )
            .returning(*self.table.c)
        )

    def release(self, cluster: str, uids: Sequence[str], token: str, due: datetime) -> sa.Update:
        """The UPDATE that ends `token`'s claim on those of the rows (of `cluster`, keyed by
        `uids`) it still holds, due again at `due` instead of at the end of the lease. Rows the
        claim settled or gave up, or that another claim took, are left as they are."""
        t = self.table.c
        return (
            sa.update(self.table)
            .where(t.cluster == cluster, t.uid.in_(list(uids)), self.token == token)
            .values({self.due: due, self.token: None, self.term: None})
        )

    def held(self, cluster: str, uid: str, token: str | None) -> list[sa.ColumnElement[bool]]:
        """The row, and with `token` only while that claim holds it."""
        held = [self.table.c.cluster == cluster, self.table.c.uid == uid]
        if token is not None:
            held.append(self.token == token)
        return held
