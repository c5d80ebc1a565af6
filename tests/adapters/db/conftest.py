"""Makes the database fixtures available here until tests/conftest.py registers tests.db_support."""

from tests.db_support import (
    database_url,
    db_dialect,
    empty_database_url,
    postgres_session_database,
    sqlite_template,
    store,
)

__all__ = [
    "database_url",
    "db_dialect",
    "empty_database_url",
    "postgres_session_database",
    "sqlite_template",
    "store",
]
