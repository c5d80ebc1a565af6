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
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:  # type: ignore[type-arg]
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "workflows",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("uid", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("team", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("record", _json(), nullable=False),
        sa.Column("quiet_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("summary_state", sa.String(), server_default="none", nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("terminal_recorded_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("cluster", "uid", name=op.f("pk_workflows")),
    )
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workflows_kind_summary_state_quiet_since"),
            ["kind", "summary_state", "quiet_since"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_workflows_namespace_name_created_at"),
            ["namespace", "name", "created_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_workflows_summary_state_due_at"), ["summary_state", "due_at"], unique=False
        )

    op.create_table(
        "workflow_pods",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("uid", sa.String(), nullable=False),
        sa.Column("workflow_uid", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("record", _json(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "uid", name=op.f("pk_workflow_pods")),
    )
    with op.batch_alter_table("workflow_pods", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workflow_pods_cluster_workflow_uid"), ["cluster", "workflow_uid"], unique=False
        )

    op.create_table(
        "served_models",
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("uid", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("revision", sa.String(), nullable=True),
        sa.Column("announced", sa.Boolean(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "uid", name=op.f("pk_served_models")),
    )

    op.create_table(
        "pipeline_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("sender", sa.String(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("recipients", _json(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipeline_events")),
        sa.UniqueConstraint("key", name=op.f("uq_pipeline_events_key")),
    )

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("links", _json(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("links")
    op.drop_table("pipeline_events")
    op.drop_table("served_models")
    with op.batch_alter_table("workflow_pods", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflow_pods_cluster_workflow_uid"))
    op.drop_table("workflow_pods")
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflows_summary_state_due_at"))
        batch_op.drop_index(batch_op.f("ix_workflows_namespace_name_created_at"))
        batch_op.drop_index(batch_op.f("ix_workflows_kind_summary_state_quiet_since"))
    op.drop_table("workflows")
