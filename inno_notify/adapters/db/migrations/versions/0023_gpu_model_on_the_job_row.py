"""the GPU model a job ran on, kept on its row

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03 17:00:00.000000

Issue 34: the Job resource names its `gpu_model` (CONTRACT.md §5), the model of the GPUs that held
most of the job's GPU-minutes (domain.accounting). The usage round writes it with the usage, into
the usage's detail and as a copy on the job's row (jobs.usage_copies), so that the job list shows it
from the row. This revision adds the column (text, one line of at most 128 bytes: the writer
cleans it) and fills it for the jobs measured before from their stored per-GPU rows (the usage
detail's `gpus`, each with its `model` and `held_minutes`): the model with the most held minutes,
cleaned alike; NULL where no row names one. The downgrade drops the column (the detail keeps its
`gpu_model`, which the previous release ignores).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"

_BATCH = 1000
# As domain.parsing.storable.label_name at this revision, frozen here.
_MAX_BYTES = 128
_MARK = "…[truncated]"
_CONTROL_TO_SPACE = {c: " " for c in (*range(0x20), *range(0x7F, 0xA0))}


def upgrade() -> None:
    ddl.add_columns("jobs", sa.Column("gpu_model", sa.String(), nullable=True))
    _fill()


def downgrade() -> None:
    ddl.drop_columns("jobs", "gpu_model")


def _fill() -> None:
    """Each measured job's model from its usage detail, in batches by key."""
    conn = op.get_bind()
    usage = sa.table(
        "usage", sa.column("cluster"), sa.column("job_uid"), sa.column("detail", ddl.json_type())
    )
    jobs = sa.table("jobs", sa.column("cluster"), sa.column("uid"), sa.column("gpu_model"))
    read = (
        sa.select(usage.c.cluster, usage.c.job_uid, usage.c.detail)
        .order_by(usage.c.cluster, usage.c.job_uid)
        .limit(_BATCH)
    )
    write = (
        sa.update(jobs)
        .where(jobs.c.cluster == sa.bindparam("b_cluster"), jobs.c.uid == sa.bindparam("b_uid"))
        .values(gpu_model=sa.bindparam("b_model"))
    )
    last: tuple[str, str] | None = None
    while True:
        after = read if last is None else read.where(sa.tuple_(usage.c.cluster, usage.c.job_uid) > last)
        rows = conn.execute(after).all()
        if not rows:
            return
        last = (rows[-1].cluster, rows[-1].job_uid)
        models = [
            {"b_cluster": row.cluster, "b_uid": row.job_uid, "b_model": model}
            for row in rows
            if (model := _most_held(row.detail)) is not None
        ]
        if models:
            conn.execute(write, models)


def _most_held(detail: object) -> str | None:
    gpus = detail.get("gpus") if isinstance(detail, Mapping) else None
    minutes: dict[str, float] = {}
    for gpu in gpus if isinstance(gpus, list) else ():
        if not isinstance(gpu, Mapping):
            continue
        model = _name(gpu.get("model"))
        held: Any = gpu.get("held_minutes")
        if model is not None:
            weight = float(held) if isinstance(held, int | float) and not isinstance(held, bool) else 0.0
            minutes[model] = minutes.get(model, 0.0) + weight
    return min(minutes, key=lambda m: (-minutes[m], m)) if minutes else None


def _name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = " ".join(value.translate(_CONTROL_TO_SPACE).split())
    encoded = name.encode("utf-8", "replace")
    if len(encoded) > _MAX_BYTES:
        name = encoded[: _MAX_BYTES - len(_MARK.encode())].decode("utf-8", "ignore") + _MARK
    return name or None
