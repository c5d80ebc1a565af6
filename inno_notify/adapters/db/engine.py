"""Builds the async engine for either dialect with the settings each one needs to behave.

SQLite (the embedded default) needs WAL so readers do not block the writer, foreign keys turned
on per connection, a busy timeout instead of instant "database is locked" errors, and real
transactions (the driver's own implicit BEGIN handling skips them for SELECT and DDL). Postgres
needs pool sizing. JSON goes through orjson on both.

Every statement is time-limited (`statement_timeout_seconds`), so that a runaway query or a lock
wait cannot hold a pooled connection, and the task awaiting it, forever: Postgres enforces
`statement_timeout` on the server and asyncpg's `command_timeout` a little later on the client (a
server or network gone silent); SQLite aborts a statement from a progress handler once it has run
that long. `None` or 0 leaves statements unlimited (`migrate` uses that: a migration may
legitimately take long, or wait on another replica's).

Transactions state their intent. A connection opened with the READ_INTENT execution option (the
store's `read()`) begins a plain, deferred transaction on SQLite, which takes no lock until it
reads and never the write lock, so readers run beside a writer in WAL mode. Every other
transaction begins IMMEDIATE, taking the write lock up front: a deferred transaction that reads
and then writes fails at once with "database is locked" (no busy wait) when another connection
wrote in between, which is exactly what a read-merge-write batch does. Postgres needs neither.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 10_000
POSTGRES_POOL_SIZE = 10
POSTGRES_MAX_OVERFLOW = 10
# The service's default; the `database_statement_timeout_seconds` setting overrides it.
DEFAULT_STATEMENT_TIMEOUT_SECONDS = 60.0
# asyncpg gives up this much after the server should have: the server's cancel, a clean error that
# leaves the connection usable, normally comes first.
CLIENT_TIMEOUT_MARGIN_SECONDS = 5.0
# SQLite calls the progress handler every this many virtual-machine instructions: often enough to
# stop within milliseconds of the deadline; each call is one clock read.
SQLITE_PROGRESS_STEPS = 50_000

# Execution option naming what a connection's transactions do; see READ_INTENT.
INTENT_OPTION = "inno_notify_intent"
READ_INTENT = {INTENT_OPTION: "read"}

_DEADLINE_KEY = "inno_notify_statement_deadline"
_PG_QUERY_CANCELED = "57014"  # SQLSTATE of a statement cut by statement_timeout (or a cancel request)
_SQLITE_INTERRUPT = 9  # SQLITE_INTERRUPT: the progress handler stopped the statement


def _json_dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def create_engine(
    url: str,
    *,
    pool_size: int = POSTGRES_POOL_SIZE,
    max_overflow: int = POSTGRES_MAX_OVERFLOW,
    echo: bool = False,
    pre_ping: bool = True,
    statement_timeout_seconds: float | None = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
    idle_in_transaction_seconds: float | None = None,
) -> AsyncEngine:
    """An AsyncEngine for `sqlite+aiosqlite://…` or `postgresql+asyncpg://…`.

    `pre_ping` tests each pooled Postgres connection with a round trip before handing it out. The
    service keeps it (a long-lived worker must survive a database restart); the admin API turns it
    off, because on its hottest path the ping is one round trip in every few, and a dead pooled
    connection there costs one failed request, which the client retries.

    Postgres keeps `pool_size` connections and opens up to `max_overflow` more for a burst, each
    closed again when it comes back to a full pool.

    `statement_timeout_seconds` bounds every statement (None or 0: no bound); a statement past it
    fails with a DBAPIError and the connection stays usable.

    `idle_in_transaction_seconds` (Postgres; None: no bound) ends, on the server, a session that
    sat that long inside a transaction without sending a statement: its process is frozen (a stop
    signal, a VM pause) or cut off. With election on, a leader frozen inside a fenced transaction
    holds a lock on its lease row that a takeover waits for (leases.py); without this bound, the
    other replica could not lead until the frozen one thawed (found by bench/soak.py).
    """
    parsed = make_url(url)
    timeout = statement_timeout_seconds if (statement_timeout_seconds or 0) > 0 else None
    common: dict[str, Any] = {"echo": echo, "json_serializer": _json_dumps, "json_deserializer": orjson.loads}
    if parsed.get_backend_name() == "sqlite":
        engine = create_async_engine(url, **common)
        _configure_sqlite(engine, timeout)
        return engine
    connect_args: dict[str, Any] = {}
    server_settings: dict[str, str] = {}
    if timeout is not None:
        connect_args["command_timeout"] = timeout + CLIENT_TIMEOUT_MARGIN_SECONDS
        server_settings["statement_timeout"] = str(max(1, math.ceil(timeout * 1000)))
    if idle_in_transaction_seconds:
        milliseconds = max(1, math.ceil(idle_in_transaction_seconds * 1000))
        server_settings["idle_in_transaction_session_timeout"] = str(milliseconds)
    if server_settings:
        connect_args["server_settings"] = server_settings
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=pre_ping,
        connect_args=connect_args,
        **common,
    )


def is_statement_timeout(exc: BaseException) -> bool:
    """True for the error of a statement cut short by its time limit, on either database."""
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    return (
        getattr(orig, "sqlstate", None) == _PG_QUERY_CANCELED
        or getattr(orig, "sqlite_errorcode", None) == _SQLITE_INTERRUPT
    )


def is_connection_lost(exc: BaseException) -> bool:
    """True for the error of a statement whose connection was lost: the server restarted, an
    administrator terminated its backend, the network dropped, or the connection broke during
    COMMIT (then whether the transaction committed is unknown). SQLAlchemy has invalidated the
    connection and the connections pooled before it, so the next transaction gets a fresh one."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


class _StatementDeadline:
    """When the statement running on one SQLite connection must stop (monotonic seconds)."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = math.inf

    def passed(self) -> int:
        # Called by SQLite in the driver's thread; non-zero interrupts the statement.
        return 1 if time.monotonic() > self.at else 0


def _configure_sqlite(engine: AsyncEngine, timeout: float | None) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" hook below (the documented recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()
        if timeout is not None:
            deadline = _StatementDeadline()
            record.info[_DEADLINE_KEY] = deadline
            dbapi_connection.run_async(
                lambda driver: driver.set_progress_handler(deadline.passed, SQLITE_PROGRESS_STEPS)
            )

    @event.listens_for(engine.sync_engine, "invalidate")
    def _on_invalidate(dbapi_connection: Any, _record: Any, exception: BaseException | None) -> None:
        # SQLAlchemy invalidates and closes a connection whose task was cancelled mid-statement.
        # The interrupted statement, still referenced from the cancelled frames, would keep the
        # closed connection alive with its transaction, and the database's one write lock, until
        # the garbage collector came by: end the transaction first (after the statement, which
        # its deadline stops).
        with contextlib.suppress(Exception):
            dbapi_connection.run_async(lambda driver: driver.rollback())

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(INTENT_OPTION) == READ_INTENT[INTENT_OPTION]:
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    if timeout is None:
        return

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _start(connection: Any, *_: Any) -> None:
        deadline = connection.info.get(_DEADLINE_KEY)
        if deadline is not None:
            deadline.at = time.monotonic() + timeout

    def _clear(connection: Any) -> None:
        # Outside a statement nothing may be interrupted: a COMMIT runs SQLite instructions too.
        deadline = None if connection is None else connection.info.get(_DEADLINE_KEY)
        if deadline is not None:
            deadline.at = math.inf

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _done(connection: Any, *_: Any) -> None:
        _clear(connection)

    @event.listens_for(engine.sync_engine, "handle_error")
    def _failed(context: Any) -> None:
        # A cancelled task (CancelledError, not an Exception) leaves its statement running in the
        # driver's thread: the deadline stays armed so that it still stops there.
        if isinstance(context.original_exception, Exception):
            _clear(context.connection)
