"""A person's own preferences over the directory, the rows a mute holds, and one update's transaction
(used linking tokens, the update offset, /status figures), on Postgres and SQLite."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import cast

import pytest
import sqlalchemy as sa
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import Store, preferences, tables
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.domain.delivery import plan_batch
from inno_notify.domain.model import Channel, JobStatus, NotificationKind, NotifyMode
from inno_notify.domain.preferences import Origin, Preferences, Via
from tests import stored

from .records import T0, job, notification, usage, user

BY_CHAT = Origin(Via.TELEGRAM, T0, "555")
BY_API = Origin(Via.API, T0, "ops")


async def test_preferences_override_the_directory_and_survive_a_reseed(store: Store) -> None:
    entry = user(telegram_chat_id=None, channels=("slack", "email"))
    await store.directory.upsert_user(entry)
    await store.directory.change_preferences(
        entry.email,
        T0,
        changes={"telegram_chat_id": 555, "channels": ("slack", "email", "telegram")},
        origin=BY_CHAT,
    )

    # Linking the chat started a new link generation (issue 29).
    linked = replace(entry, telegram_chat_id=555, channels=("slack", "email", "telegram"), link_epoch=1)
    assert await store.directory.get_user(entry.email) == linked
    assert await store.directory.list_users() == [linked]
    # The entry as written is untouched, and a restart re-seeding it from the YAML file changes nothing.
    assert await stored.directory_user(store, entry.email) == entry
    await store.directory.upsert_user(entry)
    assert await store.directory.get_user(entry.email) == linked

    prefs = await store.directory.get_preferences(entry.email)
    assert prefs is not None
    assert prefs.origins == {"telegram_chat_id": BY_CHAT, "channels": BY_CHAT}


async def test_an_unlinked_chat_overrides_the_directory_chat_and_a_reset_restores_it(store: Store) -> None:
    entry = user(telegram_chat_id=42, channels=("telegram", "email"))
    await store.directory.upsert_user(entry)
    await store.directory.change_preferences(
        entry.email, T0, changes={"telegram_chat_id": None, "channels": ("email",)}, origin=BY_CHAT
    )
    assert await store.directory.get_user(entry.email) == replace(
        entry, telegram_chat_id=None, channels=("email",), telegram_stopped=True, link_epoch=1
    )

    await store.directory.change_preferences(
        entry.email, T0, changes={"notify": NotifyMode.FAILURE}, origin=BY_API
    )
    await store.directory.change_preferences(entry.email, T0, reset=("telegram_chat_id", "channels"))
    assert await store.directory.get_user(entry.email) == replace(
        entry, notify=NotifyMode.FAILURE, link_epoch=2
    )
    prefs = await store.directory.get_preferences(entry.email)
    assert prefs is not None and prefs.origins == {"notify": BY_API}


async def test_a_muted_recipient_s_rows_are_held_then_go_out_as_one_message(store: Store) -> None:
    until = T0 + timedelta(hours=2)
    await store.directory.change_preferences(
        "alice@example.com", T0, changes={"muted_until": until}, origin=BY_CHAT
    )
    alice = [notification(f"a{i}", due=T0 + timedelta(minutes=i), group_key=None) for i in range(3)]
    bob = notification("b", recipient="bob@example.com", group_key=None)
    await store.outbox.enqueue([*alice, bob])
    planner = partial(plan_batch, now=T0 + timedelta(minutes=5), group_wait_seconds=30)

    claim = await store.outbox.claim(T0 + timedelta(minutes=5), 10, 60, planner)

    assert [[r.dedup_key for r in m] for m in claim.messages] == [["b"]]
    page, _ = await store.outbox.list_notifications(limit=10)
    held = {n.dedup_key: n for n in page if n.recipient == "alice@example.com"}
    assert {(n.next_attempt_at, n.due_at, n.attempts) for n in held.values()} == {(until, until, 0)}
    (sent,) = claim.messages[0]
    assert sent.id is not None
    await stored.mark_sent(store, claim, [(sent.id, "1", T0)])
    assert await store.outbox.next_due() == until
    # Nothing of alice's is due before the mute ends: a claim an hour later takes nothing.
    assert (await store.outbox.claim(T0 + timedelta(hours=1), 10, 60)).rows == 0

    after = partial(plan_batch, now=until, group_wait_seconds=30)
    released = await store.outbox.claim(until, 10, 60, after)
    assert [sorted(r.dedup_key for r in m) for m in released.messages] == [["a0", "a1", "a2"]]


async def test_unmute_releases_what_waited_and_a_shorter_mute_is_not_held_to_the_longer(store: Store) -> None:
    long = T0 + timedelta(hours=8)
    await store.directory.change_preferences(
        "alice@example.com", T0, changes={"muted_until": long}, origin=BY_CHAT
    )
    await store.outbox.enqueue(
        [notification("a", group_key=None), notification("d", kind=NotificationKind.DIGEST)]
    )
    assert (await store.outbox.claim(T0, 10, 60)).rows == 0

    short = T0 + timedelta(hours=1)
    now = T0 + timedelta(minutes=10)
    await store.directory.change_preferences(
        "alice@example.com", now, changes={"muted_until": short}, origin=BY_CHAT
    )
    assert (await store.outbox.claim(now, 10, 60)).rows == 0  # held again, to the new end
    assert await store.outbox.next_due() == short

    later = T0 + timedelta(minutes=20)
    await store.directory.change_preferences(
        "alice@example.com", later, changes={"muted_until": None}, origin=BY_CHAT
    )
    claim = await store.outbox.claim(later, 10, 60)
    assert sorted(r.dedup_key for m in claim.messages for r in m) == ["a", "d"]


async def test_bot_replies_are_never_held(store: Store) -> None:
    await store.directory.change_preferences(
        "alice@example.com", T0, changes={"muted_until": T0 + timedelta(hours=1)}, origin=BY_CHAT
    )
    reply = notification(
        "r", kind=NotificationKind.BOT_REPLY, channel=Channel.TELEGRAM, recipient="alice@example.com"
    )
    await store.outbox.enqueue([reply])
    assert (await store.outbox.claim(T0, 10, 60)).rows == 1


async def test_a_linking_token_is_used_once_and_expired_uses_are_pruned(store: Store) -> None:
    expires = T0 + timedelta(hours=1)
    async with store.directory.bot_transaction(fenced=True) as tx:
        assert await tx.use_link_token("tok-1", "alice@example.com", 555, T0, expires)
    async with store.directory.bot_transaction(fenced=True) as tx:
        assert not await tx.use_link_token("tok-1", "alice@example.com", 666, T0, expires)
    # Once tok-1 has expired its row goes: an expired token is refused for that before any look-up.
    async with store.directory.bot_transaction(fenced=True) as tx:
        assert await tx.use_link_token("tok-2", "bob@example.com", 777, expires, expires + timedelta(hours=1))
        assert await tx.use_link_token("tok-1", "alice@example.com", 555, expires, expires)


async def test_the_update_offset_only_moves_forward_and_rolls_back_with_its_update(store: Store) -> None:
    assert await store.directory.telegram_offset("4242") == 0
    async with store.directory.bot_transaction(fenced=True) as tx:
        await tx.set_offset("4242", 10)
    await store.directory.set_telegram_offset("4242", 7)
    assert await store.directory.telegram_offset("4242") == 10
    assert await store.directory.telegram_offset("999") == 0

    with pytest.raises(RuntimeError):
        async with store.directory.bot_transaction(fenced=True) as tx:
            await tx.set_offset("4242", 11)
            await tx.enqueue([notification("reply-11", kind=NotificationKind.BOT_REPLY)])
            raise RuntimeError("the handling failed")
    assert await store.directory.telegram_offset("4242") == 10
    assert await store.outbox.delivery_statuses(["reply-11"]) == {}


class _Deposed:
    """A fence (leases.Fence) of a replica that does not lead."""

    async def check(self, conn: AsyncConnection) -> int | None:
        raise LostLeadership("this replica does not lead")

    def holds(self) -> bool:
        return False


async def test_the_poller_s_writes_are_fenced_and_a_webhook_s_are_not(database_url: str) -> None:
    deposed = Store.from_url(database_url, _Deposed())
    try:
        with pytest.raises(LostLeadership):
            async with deposed.directory.bot_transaction(fenced=True) as tx:
                await tx.set_offset("4242", 5)
        with pytest.raises(LostLeadership):
            await deposed.directory.set_telegram_offset("4242", 5)
        async with deposed.directory.bot_transaction(fenced=False) as tx:
            assert await tx.use_link_token("tok", "alice@example.com", 1, T0, T0 + timedelta(hours=1))
        assert await deposed.directory.telegram_offset("4242") == 0
    finally:
        await deposed.close()


async def test_owner_status_running_jobs_and_the_week_s_measured_gpu_hours(store: Store) -> None:
    week = T0 - timedelta(days=1)
    running = [
        job(f"run-{i}", status=JobStatus.RUNNING, finished_at=None, started_at=T0 - timedelta(hours=i))
        for i in range(12)
    ]
    finished = job("done", owner="Alice@Example.COM", finished_at=T0 - timedelta(hours=1))
    unmeasured = job("bare", finished_at=T0 - timedelta(hours=2))
    last_week = job("old", finished_at=week - timedelta(hours=1))
    someone_else = job("bob", owner="bob@example.com", finished_at=T0 - timedelta(hours=1))
    await stored.upsert_jobs(store, [*running, finished, unmeasured, last_week, someone_else])
    for uid in ("done", "old", "bob"):
        await stored.save_usage(store, "default", uid, usage())

    async with store.directory.bot_transaction(fenced=False) as tx:
        status = await tx.owner_status("alice@example.com", week, T0)

    assert status.running_total == 12
    assert [j.name for j in status.running] == [f"train-run-{i}" for i in range(11, 1, -1)]
    assert (status.finished_jobs, status.measured_jobs) == (2, 1)
    assert status.gpu_hours_held == pytest.approx(4.0)
    assert status.gpu_hours_used == pytest.approx(110.5 / 60)

    async with store.directory.bot_transaction(fenced=False) as tx:
        nothing = await tx.owner_status("carol@example.com", week, T0)
    # Nothing measured is no figure, not zero.
    assert (nothing.finished_jobs, nothing.gpu_hours_held, nothing.gpu_hours_used) == (0, None, None)


async def test_deleting_a_user_forgets_their_preferences(store: Store) -> None:
    await store.directory.upsert_user(user(telegram_chat_id=None))
    await store.directory.change_preferences(
        "alice@example.com", T0, changes={"telegram_chat_id": 5}, origin=BY_CHAT
    )
    assert await store.directory.delete_user("alice@example.com")
    await store.directory.upsert_user(user(telegram_chat_id=None))
    assert await store.directory.get_preferences("alice@example.com") is None
    assert (await store.directory.get_user("alice@example.com")) == user(telegram_chat_id=None)


async def test_every_change_of_a_chat_from_any_surface_moves_the_link_epoch_and_every_write_the_version(
    store: Store,
) -> None:
    """Issue 29: the epoch voids older linking tokens; the version tells caches to read again."""
    entry = user(telegram_chat_id=None, channels=("email",))
    versions = [await store.directory.version()]

    async def epoch() -> int:
        found = await store.directory.get_user(entry.email)
        assert found is not None
        versions.append(await store.directory.version())
        return found.link_epoch

    await store.directory.upsert_user(entry)
    assert await epoch() == 0
    await store.directory.change_preferences(
        entry.email, T0, changes={"notify": NotifyMode.FAILURE}, origin=BY_API
    )
    assert await epoch() == 0  # no chat changed
    await store.directory.change_preferences(entry.email, T0, changes={"telegram_chat_id": 7}, origin=BY_CHAT)
    assert await epoch() == 1
    await store.directory.upsert_user(replace(entry, telegram_chat_id=8))  # an admin's edit of the entry
    assert await epoch() == 2
    await store.directory.upsert_user(replace(entry, telegram_chat_id=8))  # the same again
    assert await epoch() == 2
    await store.directory.change_preferences(entry.email, T0, changes={"muted_until": T0}, origin=BY_CHAT)
    assert await epoch() == 2
    await store.directory.replace_teams([])
    assert await epoch() == 2
    assert len(set(versions)) == len(versions)  # every write moved it, each to a value of its own


async def test_a_mute_s_scope_is_stored_and_holds_only_its_channels(store: Store) -> None:
    until = T0 + timedelta(hours=2)
    await store.directory.change_preferences(
        "alice@example.com",
        T0,
        changes={"muted_until": until, "muted_channels": ("telegram",)},
        origin=BY_CHAT,
    )
    prefs = await store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.muted_channels == ("telegram",)
    mail = notification("m", group_key=None)
    chat = replace(notification("t", group_key=None), channel=Channel.TELEGRAM)
    await store.outbox.enqueue([mail, chat])

    claim = await store.outbox.claim(T0 + timedelta(minutes=5), 10, 60)

    assert [r.dedup_key for m in claim.messages for r in m] == ["m"]
    # A mute set without a scope (the API's) holds every channel again.
    await store.directory.change_preferences(
        "alice@example.com", T0, changes={"muted_until": until}, origin=BY_API
    )
    prefs = await store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.muted_channels is None


BY_LINK = Origin(Via.EMAIL, T0)


async def test_who_turned_e_mail_off_in_the_directory_or_not_is_in_the_snapshot(store: Store) -> None:
    """The one-click unsubscribe (issue 33) holds for addresses outside the directory too: routing
    reads them from the directory snapshot, in lower case, beside the users and teams."""
    entry = user(channels=("email", "slack"), slack_user_id="U1")
    await store.directory.upsert_user(entry)
    before = await store.directory.version()
    await store.directory.change_preferences(entry.email, T0, changes={"emails": False}, origin=BY_LINK)
    await store.directory.change_preferences(
        "Outside@Example.org", T0, changes={"emails": False}, origin=BY_API
    )
    await store.directory.change_preferences("still@example.org", T0, changes={"emails": True}, origin=BY_API)
    assert await store.directory.version() != before  # caches of the directory read it again

    snapshot = await store.directory.snapshot()
    assert snapshot.email_off == {"alice@example.com", "outside@example.org"}
    # The directory entry is untouched: e-mail off is no channel change.
    assert snapshot.users == {"alice@example.com": entry}
    prefs = await store.directory.get_preferences(entry.email)
    assert prefs is not None and (prefs.emails, prefs.origins) == (False, {"emails": BY_LINK})

    await store.directory.change_preferences("Outside@Example.org", T0, reset=("emails",))
    assert (await store.directory.snapshot()).email_off == {"alice@example.com"}


@pytest.mark.parametrize(
    ("value", "origin", "off"),
    [
        (None, None, False),  # never said
        (True, BY_API, False),
        (False, BY_LINK, True),
        (False, None, True),  # its origin lost: the value still holds
        (None, BY_LINK, True),  # said, but the value is gone: e-mail stays off
        (False, {"via": "carrier pigeon"}, True),  # an origin that does not read
    ],
)
async def test_a_stored_e_mail_preference_that_does_not_read_keeps_e_mail_off(
    store: Store, value: bool | None, origin: Origin | dict[str, str] | None, off: bool
) -> None:
    origins = {} if origin is None else {"emails": origin.encode() if isinstance(origin, Origin) else origin}
    async with store.engine.begin() as conn:
        await preferences.save_preferences(conn, Preferences("alice@example.com"), T0)
        await conn.execute(
            sa.update(tables.user_preferences).values(emails=value, origins=origins),
        )
    prefs = await store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.email_off is off
    assert ((await store.directory.snapshot()).email_off == {"alice@example.com"}) is off


@pytest.mark.parametrize(
    ("raw", "said", "read"), [(1, True, False), ("false", True, False), ("x", False, False)]
)
def test_a_stored_e_mail_value_of_another_type_reads_as_off(raw: object, said: bool, read: bool) -> None:
    """What another driver might hand over for the column (SQLAlchemy's own hands over booleans)."""
    row = {
        **preferences.to_row(Preferences("alice@example.com"), T0),
        "emails": raw,
        "origins": {"emails": BY_API.encode()} if said else {},
    }
    assert preferences.from_row(cast(RowMapping, row)).emails is read
