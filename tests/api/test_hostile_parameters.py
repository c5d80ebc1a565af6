"""Hostile cursors and parameters: anything a client can send is a 400 (or a valid answer), never a
500. A cursor is opaque base64 over JSON, so a client can forge any JSON it likes: integers past 64
bits (2**63 used to reach the database and come back as a 500), NUL in text, times out of range,
NaN, other types, deep nesting."""

from __future__ import annotations

import base64

import pytest

from inno_notify.adapters.db import Store

from .data import populate
from .support import Api

LISTS = ("/api/v1/jobs", "/api/v1/recommendations", "/api/v1/notifications", "/api/v1/users")


def forged(json_text: str) -> str:
    return base64.urlsafe_b64encode(json_text.encode()).decode().rstrip("=")


FORGED = [
    "[9223372036854775808]",  # 2**63: one past BIGINT
    "[18446744073709551615]",  # 2**64 - 1, the largest orjson reads
    "[18446744073709551616]",
    "[-9223372036854775809]",
    '["1", "1", 9223372036854775808]',
    '["2026-11-30T10:00:00+00:00", "uid\\u0000", "default"]',
    '["0001-01-01T00:00:00+01:00", "uid", "default"]',  # before year 1 in UTC
    '["9999-12-31T23:59:59-01:00", "uid", "default"]',  # after year 9999 in UTC
    '["2026-11-30T10:00:00", "uid", "default"]',  # no zone
    '["NaN", "1", 1]',
    '["1", "inf", 1]',
    '["1e999", "1", 1]',
    "[1.5]",
    "[true]",
    "[null]",
    '{"id": 1}',
    '"x"',
    "[" * 2000 + "]" * 2000,
    '["' + "x" * 1500 + '"]',
]


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("cursor", [forged(text) for text in FORGED], ids=range(len(FORGED)))
async def test_a_forged_cursor_is_400(api: Api, store: Store, path: str, cursor: str) -> None:
    await populate(store)
    status, body = await api.get(path, "viewer", params={"cursor": cursor})
    assert (status, body["error"]["code"]) == (400, "invalid_cursor"), body


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "0"},
        {"limit": "501"},
        {"limit": "99999999999999999999"},
        {"limit": "-1"},
        {"since": "0000-01-01T00:00:00Z"},
        {"since": "0001-01-01T00:00:00+01:00"},
        {"until": "9999-12-31T23:59:59-01:00"},
        {"since": "2026-13-01T00:00:00Z"},
        {"namespace": "x" * 254},
        {"namespace": "a\x00b"},
        {"namespace": ""},
    ],
)
async def test_out_of_range_parameters_are_400(api: Api, query: dict[str, str]) -> None:
    status, body = await api.get("/api/v1/jobs", "viewer", params=query)
    assert (status, body["error"]["code"]) == (400, "invalid_parameter"), body


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/api/v1/usage", "/api/v1/recommendations"])
async def test_the_widest_times_are_answered(api: Api, store: Store, path: str) -> None:
    """The first and last instants datetime holds are valid filters on both databases."""
    await populate(store)
    query = {"since": "0001-01-01T00:00:00Z"}
    if path != "/api/v1/recommendations":
        query["until"] = "9999-12-31T23:59:59.999999Z"
    status, body = await api.get(path, "viewer", params=query)
    assert status == 200, body


@pytest.mark.parametrize("ident", ["0", "-1", "9223372036854775808", "1e3", "x"])
async def test_an_out_of_range_notification_id_is_400(api: Api, ident: str) -> None:
    status, body, _ = await api.call("POST", f"/api/v1/notifications/{ident}/retry")
    assert (status, body["error"]["code"]) == (400, "invalid_parameter")
