"""Which write failures are the database's and pass, and which are the data's and never will.

Ingestion retries a batch only while the database itself is in trouble (connection lost, server
shutting down, a statement or lock timeout, a serialization failure); a failure caused by a value in
the batch (SQLSTATE class 22 data exception, 23 integrity violation, 54 program limit such as an
index row too large; a value the driver cannot encode) would fail the same way forever, so the
batch is split until the object is found. Postgres reports the SQLSTATE; asyncpg errors reach us
wrapped by SQLAlchemy without a specific class, so the code is what we go by. SQLite has no codes:
there, OperationalError ("database is locked", I/O) is the transient kind.
"""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

__all__ = ["describe", "is_database_error", "is_transient", "sqlstate"]

# 08 connection exception, 25 invalid transaction state (a read-only server during failover),
# 40 transaction rollback (serialization failure, deadlock), 53 insufficient resources,
# 55 object not in prerequisite state (lock not available), 57 operator intervention (statement
# timeout, admin shutdown), 58 system error (I/O).
_TRANSIENT_CLASSES = frozenset({"08", "25", "40", "53", "55", "57", "58"})
_DETAIL_MAX = 300


def sqlstate(exc: BaseException) -> str | None:
    """The Postgres SQLSTATE of a failed statement, if the driver gave one."""
    orig = getattr(exc, "orig", None)
    for source in (orig, exc):
        code = getattr(source, "sqlstate", None) or getattr(source, "pgcode", None)
        if isinstance(code, str) and len(code) == 5:
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """True when retrying the same write later can succeed: the failure says nothing about the data."""
    if isinstance(exc, ConnectionError | TimeoutError | OSError):
        return True
    if isinstance(exc, sa_exc.TimeoutError | sa_exc.DisconnectionError):
        return True  # the pool had no connection to give, or the one it gave was dead
    if not isinstance(exc, sa_exc.DBAPIError):
        # A value the driver or our codec could not encode (StatementError around a TypeError, an
        # OverflowError…), or anything else: the data's fault.
        return False
    if exc.connection_invalidated:
        return True
    code = sqlstate(exc)
    if code is not None:
        return code[:2] in _TRANSIENT_CLASSES
    # Without a code: OperationalError (SQLite's "database is locked") and InterfaceError (a driver
    # whose connection went away) are about the database, not the data.
    return isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError)


def is_database_error(exc: BaseException) -> bool:
    """True when the database or its driver refused the write (rather than our own code failing)."""
    return isinstance(exc, sa_exc.SQLAlchemyError)


def describe(exc: BaseException) -> str:
    """One short line for a log or a rejected record: the driver's message and SQLSTATE, without the
    statement or its parameters (SQLAlchemy's own message carries both)."""
    orig = getattr(exc, "orig", None) or exc
    first_line = (str(orig).strip().splitlines() or [""])[0]
    code = sqlstate(exc)
    text = f"{type(orig).__name__}{f' [{code}]' if code else ''}: {first_line}"
    return text[:_DETAIL_MAX]
