"""GET /api/v1/usage: per-group figures computed by hand from the population, JSON and CSV."""

from __future__ import annotations

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.costs import Rates
from tests import stored
from tests.adapters.db.records import job

from .conftest import serve_api
from .data import GIB, populate
from .support import Api

FACE = {
    "jobs": 3,
    "measured_jobs": 2,
    "gpu_minutes": 180.0,
    "used_gpu_minutes": 75.0,
    "idle_gpu_minutes": 75.0,
    "memory_jobs": 2,
    "memory_requested_bytes": 64 * GIB,
    "memory_peak_bytes": 24 * GIB,
}
SPEECH = {
    "jobs": 1,
    "measured_jobs": 1,
    "gpu_minutes": 240.0,
    "used_gpu_minutes": 200.0,
    "idle_gpu_minutes": 0.0,
    "memory_jobs": 1,
    "memory_requested_bytes": 32 * GIB,
    "memory_peak_bytes": 20 * GIB,
}
UNMEASURED = {
    "jobs": 1,
    "measured_jobs": 0,
    "gpu_minutes": None,
    "used_gpu_minutes": None,
    "idle_gpu_minutes": None,
    "memory_jobs": 0,
    "memory_requested_bytes": None,
    "memory_peak_bytes": None,
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, [("speech", SPEECH), ("face", FACE), (None, UNMEASURED)]),
        ({"group_by": "team"}, [("speech", SPEECH), ("face", FACE), (None, UNMEASURED)]),
        (
            {"group_by": "owner"},
            [
                ("carol@example.com", SPEECH),
                (
                    "alice@example.com",
                    {
                        **FACE,
                        "jobs": 2,
                        "measured_jobs": 1,
                        "gpu_minutes": 120.0,
                        "used_gpu_minutes": 60.0,
                        "idle_gpu_minutes": 30.0,
                    },
                ),
                (
                    "bob@example.com",
                    {
                        "jobs": 1,
                        "measured_jobs": 1,
                        "gpu_minutes": 60.0,
                        "used_gpu_minutes": 15.0,
                        "idle_gpu_minutes": 45.0,
                        "memory_jobs": 0,
                        "memory_requested_bytes": None,
                        "memory_peak_bytes": None,
                    },
                ),
                (None, UNMEASURED),
            ],
        ),
        (
            {"group_by": "namespace"},
            [
                ("speech", {**SPEECH, "jobs": 2}),
                (
                    "face-research",
                    {
                        "jobs": 2,
                        "measured_jobs": 2,
                        "gpu_minutes": 180.0,
                        "used_gpu_minutes": 75.0,
                        "idle_gpu_minutes": 75.0,
                        "memory_jobs": 1,
                        "memory_requested_bytes": 32 * GIB,
                        "memory_peak_bytes": 8 * GIB,
                    },
                ),
                (
                    "face-infer",
                    {
                        **UNMEASURED,
                        "memory_jobs": 1,
                        "memory_requested_bytes": 32 * GIB,
                        "memory_peak_bytes": 16 * GIB,
                    },
                ),
            ],
        ),
        # c, d and e finished at or after 13:00:00.123456, b and a before.
        (
            {"since": "2026-11-30T13:00:00.123456Z", "until": "2026-11-30T14:30:00Z"},
            [
                ("speech", SPEECH),
                (
                    "face",
                    {
                        **UNMEASURED,
                        "memory_jobs": 1,
                        "memory_requested_bytes": 32 * GIB,
                        "memory_peak_bytes": 16 * GIB,
                    },
                ),
            ],
        ),
        ({"since": "2030-01-01T00:00:00Z"}, []),
    ],
)
async def test_usage_per_group(
    api: Api, store: Store, query: dict[str, str], expected: list[tuple[str | None, dict[str, object]]]
) -> None:
    await populate(store)
    status, body = await api.get("/api/v1/usage", "viewer", params=query)
    assert status == 200
    # Without accounting.rates no group has a cost (null, not 0).
    assert all((g.pop("cost"), g.pop("idle_cost"), g.pop("currency")) == (None,) * 3 for g in body["groups"])
    assert [(g.pop("group"), g) for g in body["groups"]] == expected
    assert body["group_by"] == query.get("group_by", "team")
    assert body["computed_at"] == "2026-12-01T12:00:00Z"


async def test_csv_export_with_formula_cells_defused(api: Api, store: Store) -> None:
    await populate(store)
    await stored.upsert_jobs(store, [job("x", owner='=HYPERLINK("http://evil")', team="face")])
    status, rows, headers = await api.csv("/api/v1/usage", params={"group_by": "owner"})
    assert status == 200
    assert headers["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="usage-by-owner.csv"' in headers["Content-Disposition"]
    assert rows[0] == [
        "owner",
        "jobs",
        "measured_jobs",
        "gpu_minutes",
        "used_gpu_minutes",
        "idle_gpu_minutes",
        "memory_jobs",
        "memory_requested_bytes",
        "memory_peak_bytes",
        "cost",
        "idle_cost",
        "currency",
    ]
    assert rows[1] == [
        "carol@example.com",
        "1",
        "1",
        "240.0",
        "200.0",
        "0.0",
        "1",
        str(32 * GIB),
        str(20 * GIB),
        "",
        "",
        "",
    ]
    by_owner = {r[0]: r for r in rows[1:]}
    assert by_owner['\'=HYPERLINK("http://evil")'][1] == "1"
    # Unmeasured figures are empty cells, not 0.
    assert by_owner[""][3:6] == ["", "", ""]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("text/csv", "text/csv"),
        ("application/json", "application/json"),
        ("text/csv;q=0.5, application/json", "application/json"),
        ("text/*", "text/csv"),
        ("*/*", "application/json"),
        ("application/json;q=0.1, text/csv;q=0.9", "text/csv"),
    ],
)
async def test_accept_picks_the_format(api: Api, accept: str, expected: str) -> None:
    status, _, headers = await api.call("GET", "/api/v1/usage", headers={"Accept": accept})
    assert status == 200 and headers["Content-Type"].split(";")[0] == expected


async def test_unacceptable_format_is_406(api: Api) -> None:
    status, body, _ = await api.call("GET", "/api/v1/usage", headers={"Accept": "application/xml"})
    assert (status, body["error"]["code"]) == (406, "not_acceptable")


@pytest.mark.parametrize(
    "query",
    [
        {"group_by": "user"},
        {"since": "last week"},
        {"until": "2026-11-30T10:00:00"},
        {"limit": "5"},
        {"since": "2026-12-01T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
    ],
)
async def test_bad_usage_parameters_are_400(api: Api, query: dict[str, str]) -> None:
    status, body = await api.get("/api/v1/usage", params=query)
    assert (status, body["error"]["code"]) == (400, "invalid_parameter")


async def test_results_are_cached_until_stale_then_recomputed(api: Api, store: Store) -> None:
    await populate(store)
    _, first = await api.get("/api/v1/usage")
    await stored.upsert_jobs(store, [job("late", team="speech")])
    api.monotonic[0] += 29
    _, cached = await api.get("/api/v1/usage")
    assert cached == first
    # Past max-stale, callers wait for a fresh computation.
    api.monotonic[0] += 300
    _, fresh = await api.get("/api/v1/usage")
    speech = next(g for g in fresh["groups"] if g["group"] == "speech")
    assert speech["jobs"] == 2


async def test_a_groups_cost_sums_its_jobs_at_their_models_prices(store: Store) -> None:
    """Priced at the A100 rate (the population's model) plus cores and memory over the runtime; the
    JSON and the CSV agree."""
    await populate(store)
    rates = Rates(currency="EUR", gpu_hour={"*A100*": 1.6}, cpu_core_hour=0.02, memory_gib_hour=0.005)
    async with serve_api(store, rates=rates) as api:
        status, body = await api.get("/api/v1/usage", "viewer", params={"group_by": "owner"})
        assert status == 200
        groups = {g["group"]: g for g in body["groups"]}
        # alice: job a only is measured (120 GPU-minutes, 30 idle; 2 pods × 8 cores and 16 GiB for
        # 1 h): 3.2 + 0.32 + 0.16 = 3.68, idle 0.8. bob: job b, 60 GPU-minutes, 45 idle, 1 h.
        alice, bob = groups["alice@example.com"], groups["bob@example.com"]
        assert (alice["cost"], alice["idle_cost"], alice["currency"]) == (
            pytest.approx(3.68),
            pytest.approx(0.8),
            "EUR",
        )
        assert bob["idle_cost"] == pytest.approx(45 / 60 * 1.6)
        # Nobody's measured: no cost known, null (not 0).
        assert (groups[None]["cost"], groups[None]["currency"]) == (None, "EUR")
        _, table, _ = await api.csv("/api/v1/usage", params={"group_by": "owner"})
        rows = {r[0]: r for r in table}
        assert float(rows["alice@example.com"][-3]) == pytest.approx(3.68)
        assert rows["alice@example.com"][-1] == "EUR"
