"""typed recipient addresses in the outbox

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 14:00:00.000000

Issue 31: routing wrote where a row's recipient is reached into the row's payload (`name`,
`telegram_chat_id`, `slack_user_id`, `slack_channel`, `telegram_linkable`, `telegram_link_epoch`)
and the dispatcher parsed it back. It moves to a JSON column of its own, `outbox.address`
(domain.model.RecipientAddress), and the payload keeps what the message says. Every existing row's
keys are moved, read as the dispatcher read them: a text is kept when it is a non-empty string, a
chat id when it is an integer or the digits of one, and a link is offered only where
`telegram_linkable` is true, under its `telegram_link_epoch` (0 for rows planned before epochs
existed). A row with none of the keys keeps the column's default, the empty address. Every row is
kept. The downgrade puts the keys back into the payload, so that the previous release still sends
the rows planned since.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"

_TEXTS = ("name", "slack_user_id", "slack_channel")
_CHAT = "telegram_chat_id"
_LINKABLE = "telegram_linkable"
_EPOCH = "telegram_link_epoch"
_KEYS = frozenset((*_TEXTS, _CHAT, _LINKABLE, _EPOCH))
_BATCH = 1000
_INTEGER = re.compile(r"-?[0-9]+")

JSONObject = dict[str, Any]
# A row's (payload, address) as they are to (payload, address) as they become; None: left as it is.
Move = Callable[[JSONObject, JSONObject], tuple[JSONObject, JSONObject] | None]


def upgrade() -> None:
    ddl.add_columns(
        "outbox", sa.Column("address", ddl.json_type(none_as_null=True), nullable=False, server_default="{}")
    )
    _rewrite(_moved_to_address)


def downgrade() -> None:
    _rewrite(_moved_to_payload)
    ddl.drop_columns("outbox", "address")


def _outbox() -> sa.TableClause:
    json_type = ddl.json_type(none_as_null=True)
    return sa.table(
        "outbox",
        sa.column("id", ddl.big_id()),
        sa.column("payload", json_type),
        sa.column("address", json_type),
    )


def _rewrite(move: Move) -> None:
    """Each row's (payload, address) through `move`, in batches by id; a row `move` leaves as it
    was (None) is not written."""
    conn = op.get_bind()
    outbox = _outbox()
    read = sa.select(outbox.c.id, outbox.c.payload, outbox.c.address).order_by(outbox.c.id).limit(_BATCH)
    write = (
        sa.update(outbox)
        .where(outbox.c.id == sa.bindparam("row_id"))
        .values(payload=sa.bindparam("new_payload"), address=sa.bindparam("new_address"))
    )
    last = None
    while True:
        rows = conn.execute(read if last is None else read.where(outbox.c.id > last)).all()
        if not rows:
            return
        last = rows[-1].id
        changed = []
        for row in rows:
            moved = move(_object(row.payload), _object(row.address))
            if moved is not None:
                changed.append({"row_id": row.id, "new_payload": moved[0], "new_address": moved[1]})
        if changed:
            conn.execute(write, changed)


def _object(value: object) -> JSONObject:
    # The driver's JSON reading; an object is all a payload or an address ever was.
    return dict(value) if isinstance(value, Mapping) else {}


def _moved_to_address(payload: JSONObject, _: JSONObject) -> tuple[JSONObject, JSONObject] | None:
    if not _KEYS & payload.keys():
        return None
    address: JSONObject = {
        "name": _text(payload.get("name")),
        "telegram_chat_id": _chat_id(payload.get(_CHAT)),
        "slack_user_id": _text(payload.get("slack_user_id")),
        "slack_channel": _text(payload.get("slack_channel")),
        "telegram_link_epoch": _link_epoch(payload),
    }
    return {k: v for k, v in payload.items() if k not in _KEYS}, address


def _moved_to_payload(payload: JSONObject, address: JSONObject) -> tuple[JSONObject, JSONObject] | None:
    keys = {k: address[k] for k in (*_TEXTS, _CHAT) if address.get(k) is not None}
    if address.get(_EPOCH) is not None:
        keys |= {_LINKABLE: True, _EPOCH: address[_EPOCH]}
    return ({**payload, **keys}, address) if keys else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _chat_id(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else None


def _link_epoch(payload: Mapping[str, Any]) -> int | None:
    if payload.get(_LINKABLE) is not True:
        return None
    epoch = payload.get(_EPOCH, 0)
    # The dispatcher offered no link under an epoch that is no integer; nor does the address.
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
