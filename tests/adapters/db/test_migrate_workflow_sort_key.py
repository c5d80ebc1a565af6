"""Migration 0018 on a database with workflows: each keeps its row and gains the job list's sort key
(finished, else created, else the epoch), and it goes down and up again, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inno_notify.adapters.db import create_engine, migrate
from inno_notify.adapters.db.codec import EPOCH
from inno_notify.adapters.db.tables import workflows

from .test_migrate_link_epochs import _to

CREATED = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
FINISHED = datetime(2026, 11, 30, 10, 5, 0, 123456, tzinfo=UTC)


def _seed(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"
    json = "CAST(:r AS JSONB)" if postgres else ":r"

    def at(when: datetime | None) -> object:
        return None if when is None or postgres else when.replace(tzinfo=None).isoformat(" ")

    for uid, created, finished in (
        ("done", CREATED, FINISHED),
        ("running", CREATED, None),
        ("bare", None, None),
    ):
        connection.execute(
            sa.text(
                "INSERT INTO workflows (cluster, uid, kind, namespace, name, status, created_at,"
                " finished_at, record, summary_state)"
                f" VALUES ('c', :u, 'argo', 'ns', :u, 'running', :c, :f, {json}, 'none')"
            ),
            {
                "u": uid,
                "c": created if postgres else at(created),
                "f": finished if postgres else at(finished),
                "r": "{}",
            },
        )


def _sort_keys(connection: Connection) -> dict[str, datetime | None]:
    rows = connection.execute(sa.select(workflows.c.uid, workflows.c.sort_at))
    return {uid: sort_at for uid, sort_at in rows}


async def test_0018_gives_every_workflow_its_sort_key(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url, statement_timeout_seconds=None)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0017")
            await conn.run_sync(_seed)
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0018")
        async with engine.connect() as conn:
            keys = await conn.run_sync(_sort_keys)
        assert keys == {"done": FINISHED, "running": CREATED, "bare": EPOCH}
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0017", True)
            columns = await conn.run_sync(
                lambda c: {col["name"] for col in sa.inspect(c).get_columns("workflows")}
            )
        assert "sort_at" not in columns
        assert (await migrate(empty_database_url))[0] == "0018"
    finally:
        await engine.dispose()
