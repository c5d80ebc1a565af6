"""workflows, served models, pipeline events, job links

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 12:00:00.000000

Workflows and pipelines (issue 18): Argo Workflows and Airflow DAG runs with their step pods, the
KServe InferenceServices seen and the revision last announced, the messages pipelines posted (one
per key), and the links (an MLflow run) a job's summary shows.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"


def upgrade() -> None:
    json = ddl.json_type()
    ddl.create_table(
        "workflows",
        ["cluster", "uid"],
        *ddl.required(sa.String(), "cluster", "uid", "kind", "namespace", "name"),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        *ddl.optional(sa.String(), "owner", "team"),
        *ddl.optional(ddl.timestamp(), "created_at", "started_at", "finished_at"),
        sa.Column("record", json, nullable=False),
        sa.Column("quiet_since", ddl.timestamp(), nullable=True),
        sa.Column("summary_state", sa.String(), server_default="none", nullable=False),
        *ddl.optional(ddl.timestamp(), "due_at", "terminal_recorded_at"),
    )
    ddl.create_index("workflows", "kind", "summary_state", "quiet_since")
    ddl.create_index("workflows", "namespace", "name", "created_at")
    ddl.create_index("workflows", "summary_state", "due_at")

    ddl.create_table(
        "workflow_pods",
        ["cluster", "uid"],
        *ddl.required(sa.String(), "cluster", "uid", "workflow_uid", "namespace", "name"),
        sa.Column("record", json, nullable=False),
    )
    ddl.create_index("workflow_pods", "cluster", "workflow_uid")

    ddl.create_table(
        "served_models",
        ["cluster", "uid"],
        *ddl.required(sa.String(), "cluster", "uid", "namespace", "name"),
        sa.Column("revision", sa.String(), nullable=True),
        sa.Column("announced", sa.Boolean(), nullable=False),
        sa.Column("recorded_at", ddl.timestamp(), nullable=False),
    )

    ddl.create_table(
        "pipeline_events",
        ["id"],
        ddl.id_column(),
        *ddl.required(sa.String(), "key", "sender"),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("recipients", json, nullable=False),
        sa.Column("created_at", ddl.timestamp(), nullable=False),
        sa.UniqueConstraint("key", name=op.f("uq_pipeline_events_key")),
    )

    ddl.add_columns("jobs", sa.Column("links", json, nullable=True))


def downgrade() -> None:
    ddl.drop_columns("jobs", "links")
    op.drop_table("pipeline_events")
    op.drop_table("served_models")
    ddl.drop_index("workflow_pods", "cluster", "workflow_uid")
    op.drop_table("workflow_pods")
    ddl.drop_index("workflows", "summary_state", "due_at")
    ddl.drop_index("workflows", "namespace", "name", "created_at")
    ddl.drop_index("workflows", "kind", "summary_state", "quiet_since")
    op.drop_table("workflows")
