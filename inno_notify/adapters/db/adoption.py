"""Advice adoption in the store: a family's previous advice, the judged runs, and their sums.

The usage collector (leader) asks for the previous run of a new run's family and the advice it was
given, judges the new run (domain.adoption) and records the outcome here once: the row is keyed by
the new run, and a second write of the same run (a re-measurement, a claim taken over after a
crash) changes nothing. The digest and `GET /api/v1/adoption` read sums grouped by team, owner and
outcome, which SQL computes on both databases; domain.adoption.tally adds them up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.jobs import measured_runs, recommendations_of
from inno_notify.adapters.db.json_codec import Convert, RowCodec, json_loader
from inno_notify.adapters.db.sql import dialect_insert, finished_in
from inno_notify.adapters.db.tables import advice_adoption, jobs
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.adoption import Adoption, AdoptionTally, AdviceCheck, Outcome, tally
from inno_notify.domain.model import JobRecord, Recommendation

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AdoptionGroup:
    """The adoption of one person of one team over a window."""

    team: str | None
    owner: str | None
    tally: AdoptionTally


# The columns are the record's fields; `checks` is the JSON of its AdviceChecks.
_ROWS = RowCodec(Adoption, advice_adoption)
_CHECK = cast(Convert, json_loader(AdviceCheck))


def _check_from_json(data: Any) -> AdviceCheck | None:
    if not isinstance(data, Mapping):
        return None
    try:
        return cast(AdviceCheck, _CHECK(data))
    except (KeyError, TypeError, ValueError):
        return None


def to_row(adoption: Adoption) -> dict[str, Any]:
    return _ROWS.to_row(adoption)


def from_row(row: RowMapping) -> Adoption:
    """A stored row; a check that no longer reads (an older spelling) is left out, logged."""
    raw = row["checks"] if isinstance(row["checks"], list) else []
    checks = [c for c in (_check_from_json(item) for item in raw) if c is not None]
    if len(checks) != len(raw):
        unreadable = len(raw) - len(checks)
        log.warning("adoption of job %r: %d stored check(s) unreadable", row["job_uid"], unreadable)
    return replace(_ROWS.from_row({**row, "checks": []}), checks=tuple(checks))


async def previous_advice(
    conn: AsyncConnection, cluster: str, namespace: str, family: str, before: datetime, exclude_uid: str
) -> tuple[JobRecord, list[Recommendation]] | None:
    """The family's newest measured run that finished before `before`, and its advice."""
    query = measured_runs(cluster, namespace, family, before).where(jobs.c.uid != exclude_uid).limit(1)
    row = (await conn.execute(query)).mappings().first()
    if row is None:
        return None
    previous = codec.job_from_row(row)
    return previous, await recommendations_of(conn, cluster, previous.uid)


async def record(conn: AsyncConnection, adoption: Adoption) -> bool:
    """Stores the run's adoption unless it is stored already; True when this call stored it."""
    stmt = dialect_insert(conn, advice_adoption).values(to_row(adoption))
    result = await conn.execute(stmt.on_conflict_do_nothing(index_elements=["cluster", "job_uid"]))
    return bool(result.rowcount)


def group_sums(*conditions: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """The judged runs matching `conditions`, summed per (team, owner, outcome): the one GROUP BY
    that `groups` and the digest's statement (digest_queries.py) run; `tally_groups` reads it."""
    t = advice_adoption.c
    return (
        sa.select(
            t.team,
            t.owner,
            t.outcome,
            sa.func.count().label("runs"),
            sa.func.sum(t.gpu_hours_freed).label("gpu"),
            sa.func.sum(t.memory_gib_hours_freed).label("memory"),
        )
        .where(*conditions)
        .group_by(t.team, t.owner, t.outcome)
    )


GroupSum = tuple[str | None, str | None, str, int, float | None, float | None]


def tally_groups(sums: Iterable[GroupSum]) -> list[AdoptionGroup]:
    """The rows of `group_sums` (team, owner, outcome, runs, GPU-hours and GiB-hours freed) as one
    tally per (team, owner), by team then owner (nulls last)."""
    rows: dict[tuple[str | None, str | None], list[tuple[Outcome, int, float | None, float | None]]] = {}
    for team, owner, outcome, runs, gpu, memory in sums:
        try:
            known = Outcome(outcome)
        except ValueError:
            continue  # an outcome this version does not know counts nowhere
        rows.setdefault((team, owner), []).append((known, int(runs), gpu, memory))
    ordered = sorted(rows, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or ""))
    return [AdoptionGroup(team, owner, tally(rows[(team, owner)])) for team, owner in ordered]


async def groups(
    conn: AsyncConnection,
    *,
    team: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    cluster: str | None = None,
) -> list[AdoptionGroup]:
    """Adoption per (team, owner) of the new runs that finished in [since, until), by team then
    owner (nulls last): one GROUP BY in the database, summed per group here."""
    conditions = finished_in(advice_adoption, since, until, cluster)
    if team is not None:
        conditions.append(advice_adoption.c.team == team)
    result = await conn.execute(group_sums(*conditions))
    return tally_groups((r.team, r.owner, r.outcome, r.runs, r.gpu, r.memory) for r in result)


class AdoptionRepository(Repository):
    """The store's adoption side (`Store.adoption`): leader-only writes are fenced."""

    previous_advice = reads(previous_advice)

    async def record(self, adoption: Adoption) -> bool:
        """Stores the run's adoption once (leader-only); True when this call stored it."""
        async with self._leader_write() as conn:
            return await record(conn, adoption)

    async def get(self, cluster: str, uid: str) -> Adoption | None:
        async with self.read() as conn:
            query = sa.select(advice_adoption).where(
                advice_adoption.c.cluster == cluster, advice_adoption.c.job_uid == uid
            )
            row = (await conn.execute(query)).mappings().first()
        return None if row is None else from_row(row)

    groups = reads(groups)
