"""pipeline event keys per token, and the recipients the rate limits count

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 10:00:00.000000

Issue 29: an idempotency key belongs to the token that posted it, so the unique key becomes
(sender, key) (every existing row stays: keys were unique, so are the pairs); `fingerprint` tells
the same key with another body apart (NULL for the events posted before, taken as the same body).
The per-token limit counts a sender's events of the last minute (index on sender, created_at); the
per-recipient limit counts `pipeline_event_recipients`, one row per event and resolved recipient,
filled from here on.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"


def upgrade() -> None:
    with op.batch_alter_table("pipeline_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fingerprint", sa.String(), nullable=True))
        batch_op.drop_constraint(batch_op.f("uq_pipeline_events_key"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_pipeline_events_sender_key"), ["sender", "key"])
        batch_op.create_index(batch_op.f("ix_pipeline_events_sender_created_at"), ["sender", "created_at"])
    ddl.create_table(
        "pipeline_event_recipients",
        ["event_id", "recipient"],
        sa.Column("event_id", ddl.big_id(), nullable=False),
        sa.Column("recipient", sa.String(), nullable=False),
        sa.Column("created_at", ddl.timestamp(), nullable=False),
    )
    ddl.create_index("pipeline_event_recipients", "recipient", "created_at")


def downgrade() -> None:
    ddl.drop_index("pipeline_event_recipients", "recipient", "created_at")
    op.drop_table("pipeline_event_recipients")
    # Keys were unique per sender only: a downgrade keeps each key's first event.
    op.execute(
        "DELETE FROM pipeline_events WHERE id NOT IN (SELECT MIN(id) FROM pipeline_events GROUP BY key)"
    )
    with op.batch_alter_table("pipeline_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pipeline_events_sender_created_at"))
        batch_op.drop_constraint(batch_op.f("uq_pipeline_events_sender_key"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_pipeline_events_key"), ["key"])
        batch_op.drop_column("fingerprint")
