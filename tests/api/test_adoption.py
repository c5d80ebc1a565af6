"""GET /api/v1/adoption: sums per team and owner on hand-computed figures, JSON and CSV, roles."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.adoption import Outcome, judge
from tests import stored
from tests.adapters.db.records import T0, job

from .support import Api

EVIL_OWNER = '=HYPERLINK("http://x")'


async def seed(store: Store) -> None:
    """alice (face): 2 followed (10 and 2 GPU-h freed), 1 ignored; bob (face): 1 partly (1 GPU-h,
    8 GiB-h); carol (speech): 1 no prior advice; one face run the day after (outside a 1-day window)."""
    rows = [
        ("a1", "alice@example.com", "face", Outcome.FOLLOWED, 10.0, 0.0, 0),
        ("a2", "alice@example.com", "face", Outcome.FOLLOWED, 2.0, 40.0, 0),
        ("a3", "alice@example.com", "face", Outcome.IGNORED, 0.0, 0.0, 0),
        ("b1", "bob@example.com", "face", Outcome.PARTLY, 1.0, 8.0, 0),
        ("c1", "carol@example.com", "speech", Outcome.NO_PRIOR_ADVICE, 0.0, 0.0, 0),
        ("late", EVIL_OWNER, "face", Outcome.OVER_CORRECTED, 0.0, 0.0, 1),
    ]
    for uid, owner, team, outcome, gpu, memory, days in rows:
        record = job(uid, owner=owner, team=team, finished_at=T0 + timedelta(days=days))
        await stored.upsert_jobs(store, [record])
        adoption = judge(record, None, [], T0)
        assert adoption is not None
        await store.adoption.record(
            replace(adoption, outcome=outcome, gpu_hours_freed=gpu, memory_gib_hours_freed=memory)
        )


def figures(
    runs: int, advised: int, f: int, p: int, i: int, o: int, gpu: float, mem: float
) -> dict[str, object]:
    return {
        "runs": runs,
        "advised": advised,
        "followed": f,
        "partly": p,
        "ignored": i,
        "over_corrected": o,
        "gpu_hours_freed": gpu,
        "memory_gib_hours_freed": mem,
    }


ALICE = figures(3, 3, 2, 0, 1, 0, 12.0, 40.0)
BOB = figures(1, 1, 0, 1, 0, 0, 1.0, 8.0)
CAROL = figures(1, 0, 0, 0, 0, 0, 0.0, 0.0)


async def test_adoption_per_team_and_owner_within_the_window(api: Api, store: Store) -> None:
    await seed(store)
    params = {"team": "face", "since": "2026-11-30T00:00:00Z", "until": "2026-12-01T00:00:00Z"}
    status, body = await api.get("/api/v1/adoption", "viewer", params=params)
    assert status == 200
    assert body["team"] == "face" and body["since"] == "2026-11-30T00:00:00Z"
    assert body["groups"] == [
        {"team": "face", "owner": "alice@example.com", **ALICE},
        {"team": "face", "owner": "bob@example.com", **BOB},
    ]
    assert body["total"] == figures(4, 4, 2, 1, 1, 0, 13.0, 48.0)

    status, everything = await api.get("/api/v1/adoption", "admin")
    assert status == 200
    assert [(g["team"], g["owner"]) for g in everything["groups"]] == [
        ("face", EVIL_OWNER),
        ("face", "alice@example.com"),
        ("face", "bob@example.com"),
        ("speech", "carol@example.com"),
    ]
    assert everything["total"]["runs"] == 6 and everything["total"]["over_corrected"] == 1


async def test_adoption_as_csv_quotes_formulas(api: Api, store: Store) -> None:
    await seed(store)
    status, rows, headers = await api.csv("/api/v1/adoption")
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    assert rows[0] == [
        "team", "owner", "runs", "advised", "followed", "partly", "ignored", "over_corrected",
        "gpu_hours_freed", "memory_gib_hours_freed",
    ]  # fmt: skip
    assert rows[1][1] == "'" + EVIL_OWNER
    assert rows[2] == ["face", "alice@example.com", "3", "3", "2", "0", "1", "0", "12.0", "40.0"]
    assert rows[4] == ["speech", "carol@example.com", "1", "0", "0", "0", "0", "0", "0.0", "0.0"]


@pytest.mark.parametrize(
    ("role", "params", "status"),
    [
        (None, {}, 401),
        ("pipeline", {}, 403),
        ("viewer", {"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}, 400),
        ("viewer", {"since": "yesterday"}, 400),
        ("viewer", {"team": "a\x00b"}, 400),
        ("viewer", {"since": "2030-01-01T00:00:00Z"}, 200),
    ],
)
async def test_adoption_refuses_what_it_should(
    api: Api, role: str | None, params: dict[str, str], status: int
) -> None:
    got, body = await api.get("/api/v1/adoption", role, params=params)
    assert got == status
    if status == 200:
        assert body["groups"] == [] and body["total"]["runs"] == 0
    else:
        assert "error" in body
