"""Users through the API with their own preferences: shown with where each came from, set and
dropped by PUT (admin), recorded under the token's name."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DirectoryUser, NotifyMode
from inno_notify.domain.preferences import Origin, Via
from inno_notify.service.planner import DirectoryPlanner
from tests.service.support import ALL_CHANNELS, FakeClock, finished_job

from .support import NOW, Api

ALICE = DirectoryUser("alice@example.com", "Alice", telegram_chat_id=None, channels=("email",))


async def test_a_user_shows_what_they_set_in_their_chat_and_where_it_came_from(
    api: Api, store: Store
) -> None:
    await store.directory.upsert_user(ALICE)
    chat = Origin(Via.TELEGRAM, NOW - timedelta(hours=1), "555")
    await store.directory.change_preferences(
        ALICE.email,
        NOW,
        changes={"telegram_chat_id": 555, "channels": ("email", "telegram"), "notify": NotifyMode.FAILURE},
        origin=chat,
    )

    status, body = await api.get("/api/v1/users/alice@example.com", "viewer")

    assert status == 200
    assert (body["telegram_chat_id"], body["channels"], body["notify"]) == (
        555,
        ["email", "telegram"],
        "failure",
    )
    assert body["preferences"]["notify"] == {
        "value": "failure",
        "via": "telegram",
        "by": "555",
        "at": "2026-12-01T11:00:00Z",
    }
    assert set(body["preferences"]) == {"telegram_chat_id", "channels", "notify"}
    status, page = await api.get("/api/v1/users", "viewer")
    assert page["items"] == [body]


async def test_put_sets_and_drops_preferences_as_the_token_s_holder(api: Api, store: Store) -> None:
    await store.directory.upsert_user(ALICE)
    await store.directory.change_preferences(
        ALICE.email, NOW, changes={"telegram_chat_id": 555}, origin=Origin(Via.TELEGRAM, NOW, "555")
    )
    until = NOW + timedelta(hours=3)
    body = {
        "name": "Alice",
        "channels": ["email"],
        "preferences": {"notify": "failure", "muted_until": until.isoformat()},
    }
    status, shown, _ = await api.call("PUT", "/api/v1/users/alice@example.com", json=body)

    assert status == 200
    assert (shown["notify"], shown["muted_until"], shown["telegram_chat_id"]) == (
        "failure",
        "2026-12-01T15:00:00Z",
        555,
    )
    assert shown["preferences"]["muted_until"]["via"] == "api"
    assert shown["preferences"]["muted_until"]["by"] == "ops"
    assert shown["preferences"]["telegram_chat_id"]["via"] == "telegram"  # not named: kept

    # null drops a preference: the directory's value stands again.
    body["preferences"] = {"telegram_chat_id": None, "muted_until": None}
    status, shown, _ = await api.call("PUT", "/api/v1/users/alice@example.com", json=body)
    assert status == 200
    assert (shown["telegram_chat_id"], shown["muted_until"], shown["notify"]) == (None, None, "failure")
    assert set(shown["preferences"]) == {"notify"}
    prefs = await store.directory.get_preferences(ALICE.email)
    assert prefs is not None and prefs.muted_until is None


async def test_viewers_may_not_change_preferences(api: Api, store: Store) -> None:
    await store.directory.upsert_user(ALICE)
    status, body, _ = await api.call(
        "PUT", "/api/v1/users/alice@example.com", "viewer", json={"preferences": {"notify": "failure"}}
    )
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert await store.directory.get_preferences(ALICE.email) is None


@pytest.mark.parametrize(
    "preferences",
    [
        {"notify": "never"},
        {"notify": 1},
        {"muted_until": "2026-12-01T15:00:00"},
        {"muted_until": "tomorrow"},
        {"muted_until": (NOW + timedelta(hours=721)).isoformat()},
        {"channels": []},
        {"channels": ["pager"]},
        {"telegram_chat_id": "555"},
        {"telegram_chat_id": 2**63},
        {"email": "mallory@example.com"},
        [],
    ],
)
async def test_bad_preferences_are_refused_and_change_nothing(
    api: Api, store: Store, preferences: object
) -> None:
    await store.directory.upsert_user(ALICE)
    status, body, _ = await api.call(
        "PUT", "/api/v1/users/alice@example.com", json={"channels": ["slack"], "preferences": preferences}
    )
    assert (status, body["error"]["code"]) == (400, "invalid_body")
    assert await store.directory.get_user(ALICE.email) == ALICE
    assert await store.directory.get_preferences(ALICE.email) is None


@pytest.mark.parametrize(
    ("preferences", "channels"),
    [
        ({"notify": "failure"}, []),  # a succeeded job's summary: none any more
        ({"channels": ["slack", "email"]}, ["email", "slack"]),
        ({"telegram_chat_id": 555, "channels": ["telegram"]}, ["telegram"]),
    ],
)
async def test_a_change_through_the_api_applies_to_the_next_planned_message_on_another_replica(
    api: Api, store: Store, database_url: str, preferences: dict[str, object], channels: list[str]
) -> None:
    """Issue 29: the planner's directory follows an edit at once, on any replica sharing the
    database, not after its cache has aged."""
    await store.directory.upsert_user(replace(ALICE, slack_user_id="U1"))
    replica = Store.from_url(database_url)
    try:
        clock = FakeClock()
        planner = DirectoryPlanner(replica, ALL_CHANNELS, 30.0, clock)
        before = await planner(finished_job("j1"), clock())
        assert [r.channel.value for r in before] == ["email"]

        body = {"name": "Alice", "channels": ["email"], "slack_user_id": "U1", "preferences": preferences}
        status, _, _ = await api.call("PUT", "/api/v1/users/alice@example.com", json=body)
        assert status == 200

        after = await planner(finished_job("j2"), clock())  # the same instant
        assert sorted(r.channel.value for r in after) == channels
        # Nothing changed since: the directory is not read again, only its version.
        loads = planner.loads
        await planner(finished_job("j3"), clock())
        assert planner.loads == loads
    finally:
        await replica.close()
