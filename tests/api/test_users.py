"""The directory: list, read, create/replace and delete users; writes are the admin's."""

from __future__ import annotations

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DirectoryUser

from .support import Api

ALICE = {
    "name": "Alice",
    "slack_user_id": "U0123",
    "telegram_chat_id": 123456789,
    "channels": ["slack", "email"],
}


async def test_create_read_replace_delete(api: Api, store: Store) -> None:
    status, body, _ = await api.call("PUT", "/api/v1/users/alice@example.com", json=ALICE)
    assert (status, body) == (
        201,
        {
            "email": "alice@example.com",
            **ALICE,
            "nudges": True,
            "emails": True,
            "notify": "always",
            "muted_until": None,
            "preferences": {},
        },
    )
    assert await store.directory.get_user("alice@example.com") == DirectoryUser(
        "alice@example.com", "Alice", "U0123", 123456789, ("slack", "email")
    )
    status, body = await api.get("/api/v1/users/alice@example.com", "viewer")
    assert (status, body["channels"]) == (200, ["slack", "email"])

    status, body, _ = await api.call(
        "PUT", "/api/v1/users/alice@example.com", json={"email": "alice@example.com"}
    )
    assert (status, body["name"], body["channels"]) == (200, None, ["email"])

    status, _, _ = await api.call("DELETE", "/api/v1/users/alice@example.com")
    assert status == 204
    status, body = await api.get("/api/v1/users/alice@example.com")
    assert (status, body["error"]["code"]) == (404, "user_not_found")
    status, body, _ = await api.call("DELETE", "/api/v1/users/alice@example.com")
    assert (status, body["error"]["code"]) == (404, "user_not_found")


async def test_list_is_paginated_by_email(api: Api, store: Store) -> None:
    for name in ("dave", "alice", "carol", "bob", "erin"):
        await store.directory.upsert_user(DirectoryUser(f"{name}@example.com"))
    seen: list[str] = []
    query = {"limit": "2"}
    while True:
        status, body = await api.get("/api/v1/users", "viewer", params=query)
        assert status == 200
        seen += [u["email"] for u in body["items"]]
        if body["next_cursor"] is None:
            break
        query = {"limit": "2", "cursor": body["next_cursor"]}
    assert seen == [f"{n}@example.com" for n in ("alice", "bob", "carol", "dave", "erin")]


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        (b"{not json", "body"),
        (b"[]", "body"),
        (b'{"channels": ["pager"]}', "channels"),
        (b'{"channels": "email"}', "channels"),
        (b'{"telegram_chat_id": "123"}', "telegram_chat_id"),
        (b'{"telegram_chat_id": 9223372036854775808}', "telegram_chat_id"),
        (b'{"nickname": "al"}', "nickname"),
        (b'{"name": "a\\u0000b"}', "name"),
        (b'{"email": "mallory@example.com"}', "differs"),
    ],
)
async def test_bad_bodies_are_400(api: Api, store: Store, body: bytes, mentions: str) -> None:
    status, answer, _ = await api.call(
        "PUT", "/api/v1/users/alice@example.com", data=body, headers={"Content-Type": "application/json"}
    )
    assert (status, answer["error"]["code"]) == (400, "invalid_body")
    assert mentions in answer["error"]["message"]
    assert await store.directory.get_user("alice@example.com") is None


@pytest.mark.parametrize(
    ("method", "email"), [("GET", "not-an-email"), ("PUT", "a@b@c"), ("DELETE", "has space@x.org")]
)
async def test_bad_email_in_the_path_is_400(api: Api, method: str, email: str) -> None:
    status, body, _ = await api.call(method, f"/api/v1/users/{email}", json={})
    assert (status, body["error"]["code"]) == (400, "invalid_email")


async def test_unknown_query_parameter_on_a_write_is_400(api: Api) -> None:
    status, body, _ = await api.call("PUT", "/api/v1/users/alice@example.com?force=1", json={})
    assert (status, body["error"]["code"]) == (400, "invalid_parameter")
