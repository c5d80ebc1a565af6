"""Leader election in the database: the lease a replica must hold to do leader-only work, and the
fence every leader-only write checks inside its own transaction (docs/ha.md says why the database
and not a Kubernetes Lease).

- One row of `leader_leases` per lease name (the cluster name). Every time in it comes from the
  database's clock, never a replica's, so a skewed replica clock cannot make two leaders.
- `LeaseRepository.acquire` takes a lease that has expired (or that names the caller: it lost it
  and tries again) and with it a new term, one more than any term in the table. The takeover
  locks the row FOR UPDATE first, which waits for every fenced transaction in flight (they hold
  FOR KEY SHARE on the row): a write of the old term commits before the new term begins, or it
  sees the new term and fails.
- `renew` is a plain UPDATE (a FOR NO KEY UPDATE lock), which FOR KEY SHARE does not block: a long
  fenced transaction never delays a renewal. The repository has an engine of its own for the same
  reason: leader work filling the store's pool cannot starve the renewals either.
- `LeaseFence.check(conn)` is the first statement of a fenced transaction: it raises
  LostLeadership unless the lease still names this holder and term and has not expired.
- `live_claim` / `taken_over` tell a claim made under a term that no live lease holds any more:
  its claimer has stopped (a leader stops its work before its lease expires), so a new claimer
  may take it at once instead of waiting for the claim's own lease (outbox_repository, jobs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from inno_notify.adapters.db.engine import create_engine
from inno_notify.adapters.db.sql import dialect_insert
from inno_notify.adapters.db.tables import UTCDateTime, leader_leases

# The elector's own pool: a renewal and, while stepping down, a release.
LEASE_POOL_SIZE = 2


class FencedOut(Exception):
    """A write refused because its writer no longer holds what it worked under (a term, a claim)."""


class LostLeadership(FencedOut):
    """A leader-only write by a replica whose leadership term is over (or that never led)."""


@dataclass(frozen=True, slots=True)
class Lease:
    name: str
    holder: str
    term: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


# --- the database's clock -------------------------------------------------------------------------


class database_clock(FunctionElement[datetime]):
    """The database server's current time plus `seconds` (Postgres `clock_timestamp()`, SQLite
    `'now'`, both UTC), to compare with or store in a timestamp column."""

    type = UTCDateTime()
    inherit_cache = True

    def __init__(self, seconds: float = 0.0) -> None:
        super().__init__(sa.literal(float(seconds), sa.Float()))


@compiles(database_clock, "postgresql")
def _clock_postgresql(element: database_clock, compiler: SQLCompiler, **kw: Any) -> str:
    seconds = compiler.process(element.clauses, **kw)
    return f"(clock_timestamp() + make_interval(secs => CAST({seconds} AS double precision)))"


@compiles(database_clock, "sqlite")
def _clock_sqlite(element: database_clock, compiler: SQLCompiler, **kw: Any) -> str:
    # SQLite keeps timestamps as text 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC): strftime's %f gives
    # milliseconds, the zeros make it the same width, so text comparison is time comparison.
    seconds = compiler.process(element.clauses, **kw)
    return f"(strftime('%Y-%m-%d %H:%M:%f', 'now', ({seconds}) || ' seconds') || '000')"


# --- claims under a term ---------------------------------------------------------------------------


def live_claim(term: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """Whether a claim's term belongs to a lease that is still held (not expired)."""
    return sa.exists().where(leader_leases.c.term == term, leader_leases.c.expires_at > database_clock())


def taken_over(
    token: sa.ColumnElement[Any], term: sa.ColumnElement[Any], claimer_term: int
) -> sa.ColumnElement[bool]:
    """A claim that a claimer leading in `claimer_term` may take at once: it was made under another
    term that no live lease holds any more. Claims without a term (made with election off) are
    left to their own lease."""
    return sa.and_(token.is_not(None), term.is_not(None), term != claimer_term, ~live_claim(term))


# --- the fence ---------------------------------------------------------------------------------------


class Fence(Protocol):
    """Checked first in every leader-only write transaction: returns the term the transaction runs
    under (None where no election runs) or raises FencedOut."""

    async def check(self, conn: AsyncConnection) -> int | None: ...

    def holds(self) -> bool:
        """Whether, by this process's own clock, its leadership certainly still holds: asked before
        an act no transaction can fence, such as handing a message to a provider."""
        ...


class _Unfenced:
    """No election (SQLite, `ha.enabled: false`, tools, tests): every write goes through."""

    async def check(self, conn: AsyncConnection) -> None:
        return None

    def holds(self) -> bool:
        return True


UNFENCED: Fence = _Unfenced()


class LeaseFence:
    """One replica's leadership as its writes see it: armed with a term while it leads.

    The elector arms it when it acquires the lease and disarms it the moment it stops leading, so
    from then on a leader-only write fails before it reaches the database. While armed, the check
    also asks the database (FOR KEY SHARE on the lease row, held to the transaction's end), so a
    write of a replica that does not yet know it lost (paused, cut off) fails too.

    A send to a provider cannot be fenced by a transaction, so the fence also keeps, on this
    process's monotonic clock, until when the leadership certainly holds (the elector's renew
    deadline, which ends before the lease can). A process frozen past that instant (SIGSTOP, a
    stalled node) finds `holds()` false the moment it runs again, before its elector has noticed.
    """

    def __init__(self, name: str, holder: str, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.holder = holder
        self._monotonic = monotonic
        self._term: int | None = None
        self._until: float | None = None

    @property
    def term(self) -> int | None:
        return self._term

    def arm(self, term: int, until: float | None = None) -> None:
        """Leads in `term`; `until`: the monotonic instant the leadership is certain until (None:
        until disarmed, for tools that hold a lease for the length of a run)."""
        self._term = term
        self._until = until

    def extend(self, until: float) -> None:
        """A renewal succeeded: certain until `until` now."""
        self._until = until

    def disarm(self) -> None:
        self._term = None
        self._until = None

    def holds(self) -> bool:
        if self._term is None:
            return False
        return self._until is None or self._monotonic() < self._until

    async def check(self, conn: AsyncConnection) -> int:
        term = self._term
        if term is None:
            raise LostLeadership(f"{self.holder} does not lead {self.name!r}")
        held = await conn.scalar(
            sa.select(leader_leases.c.term)
            .where(
                leader_leases.c.name == self.name,
                leader_leases.c.holder == self.holder,
                leader_leases.c.term == term,
                leader_leases.c.expires_at > database_clock(),
            )
            .with_for_update(read=True, key_share=True)
        )
        if held is None:
            raise LostLeadership(f"term {term} of {self.name!r} is over for {self.holder}")
        return term


# --- acquiring, renewing, releasing -------------------------------------------------------------------


class LeaseRepository:
    """The lease rows, on an engine of its own (see the module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    @classmethod
    def from_url(cls, url: str, *, idle_in_transaction_seconds: float | None = None) -> LeaseRepository:
        """`idle_in_transaction_seconds`: see engine.create_engine (a renewal frozen half-way)."""
        engine = create_engine(
            url, pool_size=LEASE_POOL_SIZE, idle_in_transaction_seconds=idle_in_transaction_seconds
        )
        return cls(engine)

    async def close(self) -> None:
        await self._engine.dispose()

    async def acquire(self, name: str, holder: str, lease_seconds: float) -> Lease | None:
        """The lease with a new term if it is free (expired, released, never taken, or naming
        `holder`), else None. One query while another replica holds it."""
        takeable = sa.or_(leader_leases.c.expires_at <= database_clock(), leader_leases.c.holder == holder)
        async with self._engine.begin() as conn:
            state = (
                await conn.execute(sa.select(takeable.label("takeable")).where(leader_leases.c.name == name))
            ).first()
            if state is None:
                return await self._insert(conn, name, holder, lease_seconds)
            if not state.takeable:
                return None
            # Waits for the fenced transactions in flight; re-checks the row once they are done.
            locked = await conn.scalar(
                sa.select(leader_leases.c.term)
                .where(leader_leases.c.name == name, takeable)
                .with_for_update()
            )
            if locked is None:
                return None  # renewed or taken by someone else meanwhile
            row = (
                await conn.execute(
                    sa.update(leader_leases)
                    .where(leader_leases.c.name == name)
                    .values(**_taken(holder, lease_seconds))
                    .returning(*leader_leases.c)
                )
            ).first()
        return _lease(row)

    async def _insert(
        self, conn: AsyncConnection, name: str, holder: str, lease_seconds: float
    ) -> Lease | None:
        statement = (
            dialect_insert(conn, leader_leases)
            .values(name=name, **_taken(holder, lease_seconds))
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(*leader_leases.c)
        )
        return _lease((await conn.execute(statement)).first())  # None: another candidate was first

    async def renew(self, name: str, holder: str, term: int, lease_seconds: float) -> bool:
        """Extends the lease `holder` holds in `term`; False if it is no longer held (expired or
        taken): then it cannot be renewed, only acquired again with a new term."""
        return await self._update_held(
            name,
            holder,
            term,
            unexpired=True,
            renewed_at=database_clock(),
            expires_at=database_clock(lease_seconds),
        )

    async def release(self, name: str, holder: str, term: int) -> bool:
        """Ends the lease now (its holder and term stay on record), so a candidate takes it at its
        next try instead of waiting for it to expire; False if it was not held in that term."""
        return await self._update_held(name, holder, term, unexpired=False, expires_at=database_clock())

    async def _update_held(
        self, name: str, holder: str, term: int, *, unexpired: bool, **values: Any
    ) -> bool:
        """Sets `values` on the lease if `holder` holds it in `term` (and, with `unexpired`, it has
        not expired); True if it did."""
        held = [leader_leases.c.name == name, leader_leases.c.holder == holder, leader_leases.c.term == term]
        if unexpired:
            held.append(leader_leases.c.expires_at > database_clock())
        async with self._engine.begin() as conn:
            result = await conn.execute(sa.update(leader_leases).where(*held).values(**values))
        return bool(result.rowcount == 1)

    async def get(self, name: str) -> Lease | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(sa.select(leader_leases).where(leader_leases.c.name == name))).first()
        return _lease(row)


def _next_term() -> sa.ScalarSelect[Any]:
    # One more than any term of any lease: two leases' live terms then differ (concurrent
    # acquisitions of two names could still draw the same number; that only delays a takeover,
    # because a claim is taken over only when no live lease holds its term).
    # An alias, so that inside an UPDATE of the table the subquery reads every row, not this one.
    every = leader_leases.alias("every_lease")
    return sa.select(sa.func.coalesce(sa.func.max(every.c.term), 0) + 1).scalar_subquery()


def _taken(holder: str, lease_seconds: float) -> dict[str, Any]:
    """The columns of a lease `holder` takes now, in a new term, for `lease_seconds`: as inserted
    for a name never taken, or set on a row taken over."""
    return {
        "holder": holder,
        "term": _next_term(),
        "acquired_at": database_clock(),
        "renewed_at": database_clock(),
        "expires_at": database_clock(lease_seconds),
    }


def _lease(row: sa.Row[Any] | None) -> Lease | None:
    if row is None:
        return None
    return Lease(row.name, row.holder, int(row.term), row.acquired_at, row.renewed_at, row.expires_at)
