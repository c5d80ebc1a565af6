"""Brings a database to the newest schema revision, from inside a running event loop.

Alembic's configuration is built here in code (no alembic.ini) so that an installed package can
migrate itself: the scripts live in the package, next to the tables they describe. new_revision()
(``python -m inno_notify.adapters.db revision -m "…"``) autogenerates the next revision from the
difference between ``tables.metadata`` and a freshly migrated database.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from inno_notify.adapters.db.engine import create_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant shared by all replicas: concurrent `migrate` runs on Postgres queue on this lock.
_PG_MIGRATE_LOCK = 0x1770_7E7F


def alembic_config() -> Config:
    """The Alembic configuration of our migrations (no database attached yet)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: '%%' is a literal '%'.
    cfg.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def migrate(url: str) -> list[str]:
    """Upgrade the database at `url` to head; returns the revisions applied, oldest first ([] if none)."""
    cfg = alembic_config()
    applied: list[str] = []
    cfg.attributes["applied"] = applied
    # No statement timeout: a migration may rewrite big tables, or wait on another replica's.
    engine = create_engine(url, pool_size=1, statement_timeout_seconds=None)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade, cfg)
    finally:
        await engine.dispose()
    return applied


def _upgrade(connection: Connection, cfg: Config) -> None:
    if connection.dialect.name == "postgresql":
        # Nor one the database or role may set by default (ALTER DATABASE … SET statement_timeout).
        connection.execute(text("SET LOCAL statement_timeout = 0"))
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATE_LOCK})
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


async def new_revision(message: str, url: str | None = None) -> None:
    """Autogenerate the next numbered revision against `url` (default: a throwaway SQLite file)."""
    with tempfile.TemporaryDirectory() as tmp:
        url = url or f"sqlite+aiosqlite:///{tmp}/autogenerate.db"
        await migrate(url)
        head = head_revision()
        cfg = alembic_config()
        rev_id = f"{int(head or 0) + 1:04d}"
        engine = create_engine(url, pool_size=1, statement_timeout_seconds=None)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(_revision, cfg, message, rev_id)
        finally:
            await engine.dispose()


def _revision(connection: Connection, cfg: Config, message: str, rev_id: str) -> None:
    cfg.attributes["connection"] = connection
    command.revision(cfg, message=message, autogenerate=True, rev_id=rev_id)
