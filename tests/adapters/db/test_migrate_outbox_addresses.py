"""Migration 0020 on an outbox with rows planned before it: each row gets the typed address its
payload held, read as the dispatcher read it (a chat id's digits as the number, junk as nothing, a
link offered only where the row said so), and keeps its payload and everything else, so that an old
leader still sending during a rolling upgrade finds what it reads; a row an old leader plans after it
(no address) reads its address from the payload; the downgrade puts every address back into its
payload; on both dialects."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.codec import notification_from_row
from inno_notify.adapters.db.tables import outbox
from inno_notify.domain.model import Channel, Notification, NotificationKind, RecipientAddress

from .revisions import columns_of, to, trip

AT = datetime(2026, 11, 30, 10, 5, tzinfo=UTC)
NUDGE = {"pod_uid": "p1", "gpus": []}

# dedup key: (the payload as routing, the digest or the bot wrote it before 0020, the address it has after)
ROWS: dict[str, tuple[dict[str, object], RecipientAddress]] = {
    "summary": (
        {"name": "Alice", "telegram_chat_id": 111, "slack_user_id": "U0ALICE"},
        RecipientAddress(name="Alice", telegram_chat_id=111, slack_user_id="U0ALICE"),
    ),
    "linkable": (
        {"name": "Bob", "telegram_linkable": True, "telegram_link_epoch": 3, "nudge": NUDGE},
        RecipientAddress(name="Bob", telegram_link_epoch=3),
    ),
    # Planned before link epochs existed: its link is minted under epoch 0, as the dispatcher did.
    "linkable-before-epochs": ({"telegram_linkable": True}, RecipientAddress(telegram_link_epoch=0)),
    "not-linkable": ({"telegram_linkable": "yes", "telegram_link_epoch": 2}, RecipientAddress()),
    "epoch-not-a-number": ({"telegram_linkable": True, "telegram_link_epoch": "2"}, RecipientAddress()),
    "team-channel": (
        {"slack_channel": "#face-gpu", "message": {"title": "t"}},
        RecipientAddress(slack_channel="#face-gpu"),
    ),
    "bot-reply": (
        {"telegram_chat_id": -1001234, "message": {"kind": "help"}},
        RecipientAddress(telegram_chat_id=-1001234),
    ),
    "chat-as-text": ({"telegram_chat_id": "-42"}, RecipientAddress(telegram_chat_id=-42)),
    "junk": (
        {"telegram_chat_id": "--42", "name": "", "slack_user_id": 7, "team": "face"},
        RecipientAddress(),
    ),
    "chat-true": ({"telegram_chat_id": True}, RecipientAddress()),
    "cluster-digest": ({"scope": "cluster", "week": "2026-W48", "timezone": "UTC"}, RecipientAddress()),
}
# Planned by the new release after the upgrade: its payload says what the message says, nothing more.
NEW = Notification(
    "new",
    NotificationKind.JOB_SUMMARY,
    Channel.EMAIL,
    "carol@x.org",
    AT,
    AT,
    address=RecipientAddress(name="Carol", slack_user_id="U0C", telegram_link_epoch=5),
    payload={"message": {"title": "t"}},
)


def _insert(connection: Connection, key: str, payload: dict[str, object]) -> None:
    """A row as the release before 0020 inserts it (naming no address)."""
    postgres = connection.dialect.name == "postgresql"
    at: object = AT if postgres else "2026-11-30 10:05:00.000000"
    json_payload = "CAST(:p AS JSONB)" if postgres else ":p"
    connection.execute(
        sa.text(
            "INSERT INTO outbox (dedup_key, kind, channel, recipient, status, payload, created_at,"
            f" due_at, next_attempt_at, attempts) VALUES (:k, 'job_summary', 'email', 'a@x.org',"
            f" 'pending', {json_payload}, :at, :at, :at, 0)"
        ),
        {"k": key, "p": json.dumps(payload), "at": at},
    )


def _seed(connection: Connection) -> None:
    for key, (payload, _) in ROWS.items():
        _insert(connection, key, payload)


def _rows(connection: Connection) -> dict[str, Notification]:
    rows = connection.execute(sa.select(outbox)).mappings()
    return {row["dedup_key"]: notification_from_row(row) for row in rows}


def _stored_addresses(connection: Connection) -> dict[str, object]:
    return dict(connection.execute(sa.select(outbox.c.dedup_key, outbox.c.address)).all())


def _payloads(connection: Connection) -> dict[str, dict[str, object]]:
    rows = connection.execute(sa.text("SELECT dedup_key, payload FROM outbox"))
    return {key: json.loads(p) if isinstance(p, str) else p for key, p in rows}


async def test_0020_gives_each_row_the_address_its_payload_held(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0019"), _seed)
        stored = await db.run(to("0020"), _stored_addresses)
        rows = await db.run(_rows)
        await db.run(lambda conn: conn.execute(sa.insert(outbox).values(codec.notification_to_row(NEW))))
        # Filled in the column itself, for every row: none is left to the payload reading.
        assert all(isinstance(address, dict) for address in stored.values())
        assert {key: (row.address, dict(row.payload)) for key, row in rows.items()} == {
            key: (address, payload) for key, (payload, address) in ROWS.items()
        }
        assert all(row.created_at == AT for row in rows.values())  # the rest of the row as it was

        assert "address" not in await db.run(to("0019", down=True), columns_of("outbox"))
        payloads = await db.run(_payloads)
        # What the dispatcher of 0019 reads from each payload is the address the row had.
        assert {key: codec.legacy_address(p) for key, p in payloads.items()} == {
            **{key: address for key, (_, address) in ROWS.items()},
            "new": NEW.address,
        }
        assert payloads["new"] == {
            "message": {"title": "t"},
            "name": "Carol",
            "slack_user_id": "U0C",
            "telegram_linkable": True,
            "telegram_link_epoch": 5,
        }
        assert payloads["summary"] == ROWS["summary"][0] and payloads["junk"] == ROWS["junk"][0]
        assert (await db.up_to_head())[0] == "0020"


async def test_a_row_an_old_leader_plans_after_the_upgrade_reads_its_address_from_its_payload(
    database_url: str,
) -> None:
    async with trip(database_url) as db:
        rows = await db.run(_seed, _rows)
        assert {key: row.address for key, row in rows.items()} == {key: a for key, (_, a) in ROWS.items()}
