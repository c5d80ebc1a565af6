"""Directory users and teams, and checkpoints, through the Store."""

from __future__ import annotations

from dataclasses import replace

from inno_notify.adapters.db import Store
from tests import stored

from .records import team, user


async def test_users_round_trip_update_and_delete(store: Store) -> None:
    alice = user()
    bob = user("bob@example.com", name=None, slack_user_id=None, telegram_chat_id=None, channels=("email",))
    await store.directory.upsert_user(bob)
    await store.directory.upsert_user(alice)
    assert await store.directory.get_user("alice@example.com") == alice
    assert await store.directory.list_users() == [alice, bob]

    moved = user(channels=("telegram",), telegram_chat_id=42)
    await store.directory.upsert_user(moved)
    # Another chat in the entry is a relink: a new link generation (issue 29).
    assert await store.directory.get_user("alice@example.com") == replace(moved, link_epoch=1)

    assert await store.directory.delete_user("alice@example.com")
    assert not await store.directory.delete_user("alice@example.com")
    assert await store.directory.get_user("alice@example.com") is None
    assert await store.directory.list_users() == [bob]


async def test_replace_teams_replaces_the_whole_set(store: Store) -> None:
    voice = team("voice", namespaces=(), leads=(), slack_channel=None, notify_unowned=False)
    await store.directory.replace_teams([voice, team()])
    assert await store.directory.list_teams() == [team(), voice]

    await store.directory.replace_teams([team("face", leads=("new@example.com",))])
    assert await store.directory.list_teams() == [team("face", leads=("new@example.com",))]
    await store.directory.replace_teams([])
    assert await store.directory.list_teams() == []


async def test_checkpoints(store: Store) -> None:
    assert await stored.get_checkpoint(store, "jobs.resourceVersion") is None
    await stored.set_checkpoint(store, "jobs.resourceVersion", "100")
    await stored.set_checkpoint(store, "jobs.resourceVersion", "205")
    await stored.set_checkpoint(store, "digest.last_week", "2026-W48")
    assert await stored.get_checkpoint(store, "jobs.resourceVersion") == "205"
    assert await stored.get_checkpoint(store, "digest.last_week") == "2026-W48"


async def test_many_users_in_one_call_update_what_is_there(store: Store) -> None:
    await store.directory.upsert_user(user("u0001@example.com", name="old name"))
    many = [user(f"u{i:04d}@example.com", telegram_chat_id=i) for i in range(1200)]
    # The same e-mail twice in one call: the last entry wins, as a second call would.
    await store.directory.upsert_users([*many, user("u0002@example.com", telegram_chat_id=99_999)])
    by_email = {u.email: u for u in await store.directory.list_users()}
    assert len(by_email) == 1200
    assert (
        by_email["u0001@example.com"].name == "Alice" and by_email["u0001@example.com"].telegram_chat_id == 1
    )
    assert by_email["u0002@example.com"].telegram_chat_id == 99_999
    await store.directory.upsert_users([])
