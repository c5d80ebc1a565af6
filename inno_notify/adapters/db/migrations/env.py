"""Alembic environment: runs on a connection handed in by inno_notify.adapters.db.migrate.

The stock async template calls asyncio.run(), which cannot run inside the service's event loop;
instead migrate() opens the async connection itself and passes its sync face in
``config.attributes["connection"]`` (through ``AsyncConnection.run_sync``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

import sqlalchemy as sa
from alembic import context
from alembic.migration import MigrationContext, MigrationInfo
from sqlalchemy.engine import Connection

from inno_notify.adapters.db.tables import UTCDateTime, metadata

config = context.config


def _record_applied(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    applied = config.attributes.get("applied")
    if applied is not None and step.is_upgrade:
        applied.append(step.up_revision_id)


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    # Revisions must not import tables.py (it will change after them): spell our types in plain SQLAlchemy.
    if type_ != "type":
        return False
    if isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    if isinstance(obj, sa.JSON):
        autogen_context.imports.add("from sqlalchemy.dialects import postgresql")
        return 'sa.JSON().with_variant(postgresql.JSONB(), "postgresql")'
    return False


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things: batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
        on_version_apply=_record_applied,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run migrations through inno_notify.adapters.db.migrate "
        "(`inno-notify migrate`, or `python -m inno_notify.adapters.db`), not the alembic CLI"
    )
if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported")
run_migrations(connection)
