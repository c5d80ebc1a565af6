"""Storage: SQLAlchemy Core tables, Alembic migrations and the Store that returns domain records.

Postgres in production, SQLite as the embedded default; one schema and one code path for both.
"""

from inno_notify.adapters.db.engine import create_engine
from inno_notify.adapters.db.jobs import JobFilter, RecordNotFound, SummaryState
from inno_notify.adapters.db.migrate import migrate
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.db.sql import InvalidCursor

__all__ = [
    "InvalidCursor",
    "JobFilter",
    "RecordNotFound",
    "Store",
    "SummaryState",
    "create_engine",
    "migrate",
]
