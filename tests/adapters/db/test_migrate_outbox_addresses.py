"""Migration 0019 on an outbox with rows planned before it: each row's recipient address moves from
its payload to the typed `address` column, read as the dispatcher read it (a chat id's digits as the
number, junk as nothing, a link offered only where the row said so), the message content stays in
the payload, every row is kept; the downgrade puts the keys back; on both dialects."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inno_notify.adapters.db import codec, create_engine, migrate
from inno_notify.adapters.db.codec import notification_from_row
from inno_notify.adapters.db.tables import outbox
from inno_notify.domain.model import Notification, RecipientAddress

from .test_migrate_link_epochs import _to

AT = datetime(2026, 11, 30, 10, 5, tzinfo=UTC)
NUDGE = {"pod_uid": "p1", "gpus": []}

# dedup key: (the payload as routing, the digest or the bot wrote it before 0019,
#             the address it has after, the payload it keeps)
ROWS: dict[str, tuple[dict[str, object], RecipientAddress, dict[str, object]]] = {
    "summary": (
        {"name": "Alice", "telegram_chat_id": 111, "slack_user_id": "U0ALICE"},
        RecipientAddress(name="Alice", telegram_chat_id=111, slack_user_id="U0ALICE"),
        {},
    ),
    "linkable": (
        {"name": "Bob", "telegram_linkable": True, "telegram_link_epoch": 3, "nudge": NUDGE},
        RecipientAddress(name="Bob", telegram_link_epoch=3),
        {"nudge": NUDGE},
    ),
    # Planned before link epochs existed: its link is minted under epoch 0, as the dispatcher did.
    "linkable-before-epochs": ({"telegram_linkable": True}, RecipientAddress(telegram_link_epoch=0), {}),
    "not-linkable": (
        {"telegram_linkable": "yes", "telegram_link_epoch": 2},
        RecipientAddress(),
        {},
    ),
    "epoch-not-a-number": (
        {"telegram_linkable": True, "telegram_link_epoch": "2"},
        RecipientAddress(),
        {},
    ),
    "team-channel": (
        {"slack_channel": "#face-gpu", "message": {"title": "t"}},
        RecipientAddress(slack_channel="#face-gpu"),
        {"message": {"title": "t"}},
    ),
    "bot-reply": (
        {"telegram_chat_id": -1001234, "message": {"kind": "help"}},
        RecipientAddress(telegram_chat_id=-1001234),
        {"message": {"kind": "help"}},
    ),
    "chat-as-text": ({"telegram_chat_id": "-42"}, RecipientAddress(telegram_chat_id=-42), {}),
    "junk": (
        {"telegram_chat_id": "--42", "name": "", "slack_user_id": 7, "team": "face"},
        RecipientAddress(),
        {"team": "face"},
    ),
    "chat-true": ({"telegram_chat_id": True}, RecipientAddress(), {}),
    "cluster-digest": (
        {"scope": "cluster", "week": "2026-W48", "timezone": "UTC"},
        RecipientAddress(),
        {"scope": "cluster", "week": "2026-W48", "timezone": "UTC"},
    ),
}


def _seed(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"
    at: object = AT if postgres else "2026-11-30 10:05:00.000000"
    payload = "CAST(:p AS JSONB)" if postgres else ":p"
    for key, (before, _, _) in ROWS.items():
        connection.execute(
            sa.text(
                "INSERT INTO outbox (dedup_key, kind, channel, recipient, status, payload, created_at,"
                f" due_at, next_attempt_at, attempts) VALUES (:k, 'job_summary', 'email', 'a@x.org',"
                f" 'pending', {payload}, :at, :at, :at, 0)"
            ),
            {"k": key, "p": json.dumps(before), "at": at},
        )


def _rows(connection: Connection) -> dict[str, Notification]:
    return {
        row["dedup_key"]: notification_from_row(row)
        for row in connection.execute(sa.select(outbox)).mappings()
    }


def _payloads(connection: Connection) -> dict[str, object]:
    rows = connection.execute(sa.text("SELECT dedup_key, payload FROM outbox"))
    return {key: json.loads(p) if isinstance(p, str) else p for key, p in rows}


async def test_0019_moves_each_row_s_address_out_of_its_payload(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url, statement_timeout_seconds=None)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0018")
            await conn.run_sync(_seed)
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0019")
        async with engine.connect() as conn:
            rows = await conn.run_sync(_rows)
        assert {key: (row.address, dict(row.payload)) for key, row in rows.items()} == {
            key: (address, payload) for key, (_, address, payload) in ROWS.items()
        }
        assert all(row.created_at == AT for row in rows.values())  # the rest of the row as it was

        async with engine.begin() as conn:
            await conn.run_sync(_to, "0018", True)
            columns = await conn.run_sync(
                lambda c: {col["name"] for col in sa.inspect(c).get_columns("outbox")}
            )
            payloads = await conn.run_sync(_payloads)
        assert "address" not in columns
        # What the dispatcher of 0018 reads back from each payload, the address as 0019 read it.
        assert payloads["summary"] == ROWS["summary"][0]
        assert payloads["linkable"] == ROWS["linkable"][0]
        assert payloads["linkable-before-epochs"] == {"telegram_linkable": True, "telegram_link_epoch": 0}
        assert payloads["chat-as-text"] == {"telegram_chat_id": -42}
        assert payloads["junk"] == {"team": "face"}
        assert payloads["cluster-digest"] == ROWS["cluster-digest"][0]
        assert await migrate(empty_database_url) == ["0019"]
    finally:
        await engine.dispose()


async def test_a_row_that_names_no_address_reads_as_the_empty_one(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            # An older replica's insert names no address column: the column's default.
            await conn.execute(
                sa.insert(outbox).values(
                    dedup_key="older-writer",
                    kind="job_summary",
                    channel="email",
                    recipient="a@x.org",
                    status="pending",
                    payload={},
                    created_at=AT,
                    due_at=AT,
                    attempts=0,
                )
            )
            rows = await conn.run_sync(_rows)
        assert rows["older-writer"].address == RecipientAddress()
        # A NULL, which no writer leaves, reads as the empty address too.
        row = {**codec.notification_to_row(rows["older-writer"]), "id": 1, "address": None}
        row |= {"failed_at": None, "claim_token": None, "claim_term": None}
        assert notification_from_row(row).address == RecipientAddress()
    finally:
        await engine.dispose()
