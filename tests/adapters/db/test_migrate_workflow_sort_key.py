"""Migration 0018 on a database with workflows: each keeps its row and gains the job list's sort key
(finished, else created, else the epoch), and it goes down and up again, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inno_notify.adapters.db.codec import EPOCH
from inno_notify.adapters.db.tables import workflows

from .revisions import columns_of, to, trip

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
    async with trip(empty_database_url) as db:
        await db.run(to("0017"), _seed)
        assert await db.run(to("0018"), _sort_keys) == {"done": FINISHED, "running": CREATED, "bare": EPOCH}
        assert "sort_at" not in await db.run(to("0017", down=True), columns_of("workflows"))
        assert (await db.up_to_head())[0] == "0018"
