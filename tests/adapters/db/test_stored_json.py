"""Rows written before the typed codec still read back exactly, on both databases.

`tests/fixtures/store/old_codec_json_columns.json` holds every JSON column as the hand-written
codec (adapters/db/codec.py before the typed one, commit 91de1c7) wrote it for the records of
records.py. Each row goes into the database with those JSON values as stored, then is read through
the store's readers and must equal the record it was written from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from inno_notify.adapters.db import Store, codec, tables
from inno_notify.domain.model import Link
from tests import stored

from .records import job, notification, pod, recommendations, team, usage, user

FIXTURE = Path(__file__).parents[2] / "fixtures" / "store" / "old_codec_json_columns.json"
OLD = json.loads(FIXTURE.read_text())
LINKS = (Link("Logs", "https://logs.example.com/x?a=1&b=2"), Link("Run", "https://wandb.example.com/r"))


async def _insert(store: Store, table: sa.Table, row: Mapping[str, Any], old_json: Mapping[str, Any]) -> None:
    """The row with its JSON columns replaced by the stored old values."""
    assert set(old_json) <= {c.name for c in table.c if isinstance(c.type, sa.JSON) or "JSON" in repr(c.type)}
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(table).values({**row, **old_json}))


async def test_old_jobs_and_pods_read_back_unchanged(store: Store) -> None:
    record = job()
    linked = job("job-links", links=LINKS)
    await _insert(store, tables.jobs, codec.job_to_row(record), OLD["jobs"])
    await _insert(store, tables.jobs, codec.job_to_row(linked), {**OLD["jobs"], **OLD["linked_job"]})
    await _insert(store, tables.pods, codec.pod_to_row(pod()), OLD["pods"])

    assert await stored.get_job(store, "default", "job-1") == record
    assert await stored.get_job(store, "default", "job-links") == linked
    assert await stored.pods_of(store, "default", "job-1") == [pod()]


async def test_old_usage_and_recommendations_read_back_unchanged(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    await _insert(store, tables.usage, codec.usage_to_row("default", "job-1", usage()), OLD["usage"])
    recs = recommendations()
    assert len(recs) == len(OLD["recommendations"])
    for position, (rec, old_json) in enumerate(zip(recs, OLD["recommendations"], strict=True)):
        row = codec.recommendation_to_row("default", "job-1", position, rec)
        await _insert(store, tables.recommendations, row, old_json)

    assert await store.usage.get_usage("default", "job-1") == usage()
    assert await stored.recommendations_of(store, "default", "job-1") == list(recs)


async def test_old_outbox_users_and_teams_read_back_unchanged(store: Store) -> None:
    await _insert(store, tables.outbox, codec.notification_to_row(notification()), OLD["outbox"])
    await _insert(store, tables.users, codec.user_to_row(user()), OLD["users"])
    await _insert(store, tables.teams, codec.team_to_row(team()), OLD["teams"])

    [row], _ = await store.outbox.list_notifications()
    # A new row is first due when it is due (codec.notification_to_row).
    assert replace(row, id=None) == replace(notification(), next_attempt_at=notification().due_at)
    assert await stored.directory_user(store, user().email) == user()
    assert await store.directory.list_teams() == [team()]


def _new_json() -> dict[str, Any]:
    linked = job("job-links", links=LINKS)
    rows = {
        "jobs": codec.job_to_row(job()),
        "linked_job": codec.job_to_row(linked),
        "pods": codec.pod_to_row(pod()),
        "usage": codec.usage_to_row("default", "job-1", usage()),
        "outbox": codec.notification_to_row(notification()),
        "users": codec.user_to_row(user()),
        "teams": codec.team_to_row(team()),
    }
    out: dict[str, Any] = {name: {column: rows[name][column] for column in OLD[name]} for name in rows}
    # Fields the domain gained after the old codec, at their defaults (a multi-pod run's figures per
    # role, issue 28): written as new keys after the old ones, which stay as they were.
    detail = dict(out["usage"]["detail"])
    assert (detail.pop("replicas"), detail.pop("held_after_end"), detail.pop("gpu_model")) == ([], None, None)
    out["usage"] = {**out["usage"], "detail": detail}
    out["recommendations"] = [
        {
            column: codec.recommendation_to_row("default", "job-1", i, rec)[column]
            for column in ("amounts", "evidence")
        }
        for i, rec in enumerate(recommendations())
    ]
    return out


@pytest.mark.parametrize("table", sorted(OLD))
def test_the_typed_codec_writes_the_json_the_old_one_wrote(table: str) -> None:
    # The same text, key order included: rows written from now on are the rows already stored.
    assert json.dumps(_new_json()[table]) == json.dumps(OLD[table])
