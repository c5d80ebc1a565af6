"""typed recipient addresses in the outbox

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 14:00:00.000000

Issue 31: routing wrote where a row's recipient is reached into the row's payload (`name`,
`telegram_chat_id`, `slack_user_id`, `slack_channel`, `telegram_linkable`, `telegram_link_epoch`)
and the dispatcher parsed it back. It gets a JSON column of its own, `outbox.address`
(domain.model.RecipientAddress), which this revision fills for every existing row from those keys,
read as the dispatcher read them: a text where it is a non-empty string, a chat id where it is an
integer or the digits of one, and a link offer only where `telegram_linkable` is true, under its
`telegram_link_epoch` (0 for rows planned before epochs existed); a row with none of the keys gets
the empty address. Every row is kept, and so are the payloads: during a rolling upgrade the old
leader goes on sending the rows it finds, reading their addresses from there. The column is
nullable because that leader also goes on planning rows, which name no address (the codec reads
those from the payload). The downgrade puts each address's keys back into its payload, so that the
previous release still sends the rows planned since.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from inno_notify.adapters.db.migrations import ddl

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"

_TEXTS = ("name", "slack_user_id", "slack_channel")
_CHAT = "telegram_chat_id"
_LINKABLE = "telegram_linkable"
_EPOCH = "telegram_link_epoch"
_BATCH = 1000
_INTEGER = re.compile(r"-?[0-9]+")

JSONObject = dict[str, Any]
# A row's (payload, address) as they are to the (payload, address) it gets; None: left as it is.
Change = Callable[[JSONObject, JSONObject | None], tuple[JSONObject, JSONObject] | None]


def upgrade() -> None:
    ddl.add_columns("outbox", sa.Column("address", ddl.json_type(none_as_null=True), nullable=True))
    _rewrite(_address_from_payload)


def downgrade() -> None:
    _rewrite(_payload_with_address)
    ddl.drop_columns("outbox", "address")


def _rewrite(change: Change) -> None:
    """Each row's (payload, address) through `change`, in batches by id."""
    conn = op.get_bind()
    json_type = ddl.json_type(none_as_null=True)
    outbox = sa.table(
        "outbox",
        sa.column("id", ddl.big_id()),
        sa.column("payload", json_type),
        sa.column("address", json_type),
    )
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
            address = _object(row.address) if row.address is not None else None
            new = change(_object(row.payload), address)
            if new is not None:
                changed.append({"row_id": row.id, "new_payload": new[0], "new_address": new[1]})
        if changed:
            conn.execute(write, changed)


def _object(value: object) -> JSONObject:
    # The driver reads JSON already; an object is all a payload or an address ever was.
    return dict(value) if isinstance(value, Mapping) else {}


def _address_from_payload(payload: JSONObject, _: JSONObject | None) -> tuple[JSONObject, JSONObject]:
    address = {
        "name": _text(payload.get("name")),
        "telegram_chat_id": _chat_id(payload.get(_CHAT)),
        "slack_user_id": _text(payload.get("slack_user_id")),
        "slack_channel": _text(payload.get("slack_channel")),
        "telegram_link_epoch": _link_epoch(payload),
    }
    return payload, address


def _payload_with_address(
    payload: JSONObject, address: JSONObject | None
) -> tuple[JSONObject, JSONObject] | None:
    address = address or {}
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
