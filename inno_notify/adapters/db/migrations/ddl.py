"""The column, key and index builders the revisions (versions/) share, so each says only what it changes.

Revisions must not import tables.py (it changes after them), and neither may this module. What
a builder builds is part of every revision that calls it: once a revision uses a builder, what
the builder builds never changes (tests/adapters/db/test_migrate.py migrates up from nothing and
compares with tables.py on both dialects). A new need gets a new builder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# The jobs columns the digest read besides team and finished_at when revision 0004 was written: the
# INCLUDE columns of ix_jobs_team_finished_at from 0004 to 0012 (tables.DIGEST_JOB_COLUMNS now).
DIGEST_JOB_COLUMNS_0004 = [
    "cluster",
    "uid",
    "owner",
    "status",
    "exit_reason",
    "gpus_requested",
    "memory_requested_bytes",
    "created_at",
    "first_scheduled_at",
]


def json_type(*, none_as_null: bool = False) -> sa.types.TypeEngine[Any]:
    """JSON, JSONB on Postgres; none_as_null (from 0010 on): Python None binds as SQL NULL."""
    return sa.JSON(none_as_null=none_as_null).with_variant(
        postgresql.JSONB(none_as_null=none_as_null), "postgresql"
    )


def big_id() -> sa.types.TypeEngine[int]:
    # SQLite only autoincrements an INTEGER PRIMARY KEY (the rowid).
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def id_column() -> sa.Column[int]:
    """An autoincrementing 64-bit `id` (the table's primary key)."""
    return sa.Column("id", big_id(), autoincrement=True, nullable=False)


def timestamp() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def required(type_: sa.types.TypeEngine[Any], *names: str) -> list[sa.Column[Any]]:
    """NOT NULL columns of one type, in the order named."""
    return [sa.Column(name, type_, nullable=False) for name in names]


def optional(type_: sa.types.TypeEngine[Any], *names: str) -> list[sa.Column[Any]]:
    """Nullable columns of one type, in the order named."""
    return [sa.Column(name, type_, nullable=True) for name in names]


def claim_columns(prefix: str = "") -> list[sa.Column[Any]]:
    """A claim's token, checked by every write of what it claimed, and the leadership term it was made in."""
    return [
        sa.Column(f"{prefix}claim_token", sa.String(), nullable=True),
        sa.Column(f"{prefix}claim_term", sa.BigInteger(), nullable=True),
    ]


def claim_column_names(prefix: str = "") -> list[str]:
    """claim_columns' names, last first: the order a downgrade drops them in."""
    return [column.name for column in reversed(claim_columns(prefix))]


def job_foreign_key(table: str) -> sa.ForeignKeyConstraint:
    """(cluster, job_uid) -> jobs: the row goes with its job."""
    return sa.ForeignKeyConstraint(
        ["cluster", "job_uid"],
        ["jobs.cluster", "jobs.uid"],
        name=op.f(f"fk_{table}_cluster_job_uid_jobs"),
        ondelete="CASCADE",
    )


def create_table(table: str, key: Sequence[str], *items: sa.schema.SchemaItem) -> None:
    """A table whose primary key is `key`, named pk_<table> as tables.NAMING_CONVENTION names it."""
    op.create_table(table, *items, sa.PrimaryKeyConstraint(*key, name=op.f(f"pk_{table}")))


def _index_name(table: str, columns: Sequence[str]) -> str:
    # tables.NAMING_CONVENTION's "ix".
    return op.f(f"ix_{table}_{'_'.join(columns)}")


def create_index(table: str, *columns: str, **dialect_kw: Any) -> None:
    """An index on `columns`, named as tables.NAMING_CONVENTION names it."""
    op.create_index(_index_name(table, columns), table, list(columns), **dialect_kw)


def drop_index(table: str, *columns: str) -> None:
    op.drop_index(_index_name(table, columns), table_name=table)


def rebuild_index(table: str, columns: Sequence[str], include: list[str]) -> None:
    """Postgres only: the index on `columns` again, with `include` as its INCLUDE columns.

    SQLite has no INCLUDE: its plain index stays as it is. The rebuild blocks writes to the table
    while it runs (seconds per million jobs).
    """
    if op.get_bind().dialect.name != "postgresql":
        return
    drop_index(table, *columns)
    create_index(table, *columns, postgresql_include=include)


def add_columns(table: str, *columns: sa.Column[Any]) -> None:
    """Columns added in one batch (SQLite: in place, ALTER TABLE … ADD COLUMN)."""
    with op.batch_alter_table(table, schema=None) as batch_op:
        for column in columns:
            batch_op.add_column(column)


def drop_columns(table: str, *names: str) -> None:
    """Columns dropped in one batch (SQLite: the table copied once, without them)."""
    with op.batch_alter_table(table, schema=None) as batch_op:
        for name in names:
            batch_op.drop_column(name)
