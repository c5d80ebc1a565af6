"""The delivery log and an admin's retry of a failed send."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DeliveryStatus
from tests import stored
from tests.adapters.db.records import T0, notification

from .support import NOW, Api


async def _outbox(store: Store) -> dict[str, int]:
    """n-1 sent, n-2 failed, n-3 pending; returns their ids by dedup key."""
    await store.outbox.enqueue([notification(f"n-{i}", due=T0 + timedelta(minutes=i)) for i in (1, 2, 3)])
    claim = await store.outbox.claim(T0 + timedelta(hours=1), 10, 60)
    ids = {n.dedup_key: n.id for m in claim.messages for n in m if n.id is not None}
    await stored.mark_sent(store, claim, [(ids["n-1"], "msg-1", T0 + timedelta(hours=1))])
    await stored.mark_failed(
        store, claim, [(ids["n-2"], "403 Forbidden: bot was blocked by the user")], T0 + timedelta(hours=1)
    )
    return ids


@pytest.mark.parametrize(
    ("status", "expected"),
    [(None, ["n-3", "n-2", "n-1"]), ("sent", ["n-1"]), ("failed", ["n-2"]), ("pending", ["n-3"])],
)
async def test_log_by_status(api: Api, store: Store, status: str | None, expected: list[str]) -> None:
    ids = await _outbox(store)
    by_id = {v: k for k, v in ids.items()}
    code, body = await api.get(
        "/api/v1/notifications", "viewer", params={} if status is None else {"status": status}
    )
    assert code == 200
    assert [by_id[n["id"]] for n in body["items"]] == expected


async def test_log_entry_shape_and_pages(api: Api, store: Store) -> None:
    ids = await _outbox(store)
    status, body = await api.get("/api/v1/notifications", params={"limit": "2"})
    assert status == 200 and len(body["items"]) == 2 and body["next_cursor"]
    status, rest = await api.get(
        "/api/v1/notifications", params={"limit": "2", "cursor": body["next_cursor"]}
    )
    assert [n["id"] for n in rest["items"]] == [ids["n-1"]] and rest["next_cursor"] is None
    failed = body["items"][1]
    assert failed["status"] == "failed"
    assert failed["last_error"] == "403 Forbidden: bot was blocked by the user"
    assert (failed["channel"], failed["recipient"], failed["kind"]) == (
        "slack",
        "alice@example.com",
        "job_summary",
    )


async def test_admin_retries_a_failed_send(api: Api, store: Store) -> None:
    ids = await _outbox(store)
    status, body, _ = await api.call("POST", f"/api/v1/notifications/{ids['n-2']}/retry")
    assert status == 200
    assert (body["status"], body["attempts"], body["due_at"]) == ("pending", 0, "2026-12-01T12:00:00Z")
    stored = await store.outbox.get_notification(ids["n-2"])
    assert stored is not None and stored.status is DeliveryStatus.PENDING and stored.next_attempt_at == NOW


@pytest.mark.parametrize(
    ("which", "status", "code"),
    [("n-1", 409, "not_failed"), ("n-3", 409, "not_failed"), ("missing", 404, "notification_not_found")],
)
async def test_retry_of_what_did_not_fail(api: Api, store: Store, which: str, status: int, code: str) -> None:
    ids = await _outbox(store)
    ident = ids.get(which, 999999)
    got, body, _ = await api.call("POST", f"/api/v1/notifications/{ident}/retry")
    assert (got, body["error"]["code"]) == (status, code)


@pytest.mark.parametrize("ident", ["abc", "0", "-1", "1.5", "99999999999999999999"])
async def test_retry_with_a_bad_id_is_400(api: Api, ident: str) -> None:
    status, body, _ = await api.call("POST", f"/api/v1/notifications/{ident}/retry")
    assert (status, body["error"]["code"]) == (400, "invalid_parameter")


async def test_viewer_may_not_retry(api: Api, store: Store) -> None:
    ids = await _outbox(store)
    status, body, _ = await api.call("POST", f"/api/v1/notifications/{ids['n-2']}/retry", "viewer")
    assert (status, body["error"]["code"]) == (403, "forbidden")
    stored = await store.outbox.get_notification(ids["n-2"])
    assert stored is not None and stored.status is DeliveryStatus.FAILED


async def test_bad_status_is_400(api: Api) -> None:
    status, body = await api.get("/api/v1/notifications", params={"status": "queued"})
    assert status == 400 and "pending, sent, failed" in body["error"]["message"]
