"""Directory users and teams, and checkpoints, through the Store."""

from __future__ import annotations

from inno_notify.adapters.db import Store

from .records import team, user


async def test_users_round_trip_update_and_delete(store: Store) -> None:
    alice = user()
    bob = user("bob@example.com", name=None, slack_user_id=None, telegram_chat_id=None, channels=("email",))
    await store.upsert_user(bob)
    await store.upsert_user(alice)
    assert await store.get_user("alice@example.com") == alice
    assert await store.list_users() == [alice, bob]

    moved = user(channels=("telegram",), telegram_chat_id=42)
    await store.upsert_user(moved)
    assert await store.get_user("alice@example.com") == moved

    assert await store.delete_user("alice@example.com")
    assert not await store.delete_user("alice@example.com")
    assert await store.get_user("alice@example.com") is None
    assert await store.list_users() == [bob]


async def test_replace_teams_replaces_the_whole_set(store: Store) -> None:
    voice = team("voice", namespaces=(), leads=(), slack_channel=None, notify_unowned=False)
    await store.replace_teams([voice, team()])
    assert await store.list_teams() == [team(), voice]

    await store.replace_teams([team("face", leads=("new@example.com",))])
    assert await store.list_teams() == [team("face", leads=("new@example.com",))]
    await store.replace_teams([])
    assert await store.list_teams() == []


async def test_checkpoints(store: Store) -> None:
    assert await store.get_checkpoint("jobs.resourceVersion") is None
    await store.set_checkpoint("jobs.resourceVersion", "100")
    await store.set_checkpoint("jobs.resourceVersion", "205")
    await store.set_checkpoint("digest.last_week", "2026-W48")
    assert await store.get_checkpoint("jobs.resourceVersion") == "205"
    assert await store.get_checkpoint("digest.last_week") == "2026-W48"


async def test_many_users_in_one_call_update_what_is_there(store: Store) -> None:
    await store.upsert_user(user("u0001@example.com", name="old name"))
    many = [user(f"u{i:04d}@example.com", telegram_chat_id=i) for i in range(1200)]
    # The same e-mail twice in one call: the last entry wins, as a second call would.
    await store.upsert_users([*many, user("u0002@example.com", telegram_chat_id=99_999)])
    stored = {u.email: u for u in await store.list_users()}
    assert len(stored) == 1200
    assert stored["u0001@example.com"].name == "Alice" and stored["u0001@example.com"].telegram_chat_id == 1
    assert stored["u0002@example.com"].telegram_chat_id == 99_999
    await store.upsert_users([])
