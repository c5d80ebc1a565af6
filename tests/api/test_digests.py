"""GET /api/v1/digests/{team}: delegated to the injected digest provider, JSON or HTML.

The providers here hand over real digests (domain.digest's, and the service's own provider over the
test store), so the `Digest` schema of the OpenAPI document is checked against what the service
actually serves: every response is checked by the `api` fixture, and the table below states it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from inno_notify.adapters.channels.digest_views import render_json
from inno_notify.adapters.db import Store
from inno_notify.api import keys, openapi
from inno_notify.api.app import DIGEST_FRESH_SECONDS, DIGEST_MAX_KEYS, DIGEST_MAX_STALE_SECONDS
from inno_notify.domain.digest import (
    DailyRow,
    DigestRows,
    NudgedPodRow,
    PersonRow,
    TeamTotals,
    WasteRow,
    build_digest,
    digest_to_dict,
)
from inno_notify.domain.model import Team
from inno_notify.service.digest_pages import digest_provider

from .data import populate
from .support import NOW, Api, schema_errors

CALLS: list[tuple[str, str | None]] = []
DIGEST = {"$ref": "#/components/schemas/Digest"}

FULL = DigestRows(
    totals=TeamTotals(
        jobs=4,
        jobs_unmeasured=1,
        succeeded=2,
        failed=2,
        oom=1,
        gpu_minutes=600.0,
        used_gpu_minutes=240.0,
        idle_gpu_minutes=180.0,
        memory_requested_gib_hours=64.0,
        memory_peak_gib_hours=16.0,
    ),
    people=(
        PersonRow("bob@example.com", 1, 120.0, 100.0, 0.0),
        PersonRow("alice@example.com", 2, 480.0, 140.0, 180.0),
        PersonRow(None, 1, None, None, None),
    ),
    daily=(
        DailyRow("alice@example.com", 0, 240.0, 20.0),
        DailyRow("alice@example.com", 6, 240.0, None),
        DailyRow(None, 2, 120.0, 100.0),
    ),
    top_waste=tuple(
        WasteRow("c", f"u{i}", "ns", f"job-{i}", None, float(w), "idle_gpu", "warning", f"fix {i}")
        for i, w in enumerate([30, 90, 0, 60, 10, 20, 45])
    ),
    queue_seconds_sorted=(0.0, 60.0, 120.0, 600.0),
    nudged=(
        NudgedPodRow("c", "p1", "face-research", "jupyter-alice", "workspace", "alice@example.com", 3, 5.5),
        NudgedPodRow("c", "p2", "face-research", "debug", "pod", None, 1, 0.5),
    ),
)
UNMEASURED = DigestRows(TeamTotals(jobs=2, jobs_unmeasured=2, succeeded=2), queue_seconds_sorted=())

# (week, zone, rows, previous week's totals, quota): the shapes a digest takes.
CASES = {
    "no GPU jobs": ("2026-W48", "UTC", DigestRows(TeamTotals()), None, None),
    "every figure, a previous week and a quota": (
        "2026-W48",
        "UTC",
        FULL,
        TeamTotals(jobs=3, gpu_minutes=300.0, used_gpu_minutes=150.0, idle_gpu_minutes=240.0),
        2.0,
    ),
    "nothing measured, a previous week without GPU time": (
        "2026-W48",
        "UTC",
        UNMEASURED,
        TeamTotals(jobs=1, gpu_minutes=0.0),
        4.0,
    ),
    "a 169-hour week (summer time ends)": ("2026-W43", "Europe/Berlin", FULL, None, None),
    "a 167-hour week (summer time begins)": ("2026-W13", "Europe/Berlin", UNMEASURED, None, 0.0),
}


def document(case: str, week: str | None = None) -> dict[str, Any]:
    """The digest as a client reads it: domain.digest's document, through JSON (tuples become lists)."""
    case_week, tz, rows, previous, quota = CASES[case]
    built = build_digest("face", week or case_week, tz, rows, previous, quota_gpus=quota)
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(digest_to_dict(built)))
    return decoded


async def provider(team: str, week: str | None) -> dict[str, Any] | None:
    CALLS.append((team, week))
    if team != "face":
        return None
    return {**document("every figure, a previous week and a quota", week), "html": "<h1>face</h1>"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_digest_schema_describes_every_shape_of_digest(case: str) -> None:
    assert schema_errors(openapi.build(), DIGEST, document(case)) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda d: {**d, "surprise": 1},
        lambda d: {k: v for k, v in d.items() if k != "people"},
        lambda d: {**d, "jobs": {**d["jobs"], "total": 1.5}},
        lambda d: {**d, "top_waste": [{**d["top_waste"][0], "kind": "hunch"}]},
        lambda d: {**d, "daily": {**d["daily"], "days": ["Monday"]}},
    ],
    ids=[
        "unknown field",
        "missing field",
        "count not an integer",
        "kind not a domain enum",
        "day not a date",
    ],
)
def test_the_digest_schema_is_closed_and_typed(change: Any) -> None:
    assert schema_errors(
        openapi.build(), DIGEST, change(document("every figure, a previous week and a quota"))
    )


class TestWithoutProvider:
    async def test_is_404_with_a_clear_error(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/face", "viewer")
        assert (status, body["error"]["code"]) == (404, "digest_unavailable")


class TestWithProvider:
    @pytest.fixture
    def digest_provider(self) -> Any:
        CALLS.clear()
        return provider

    async def test_json_without_the_html(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/face", "viewer", params={"week": "2026-W47"})
        assert (status, body) == (200, document("every figure, a previous week and a quota", "2026-W47"))
        assert CALLS == [("face", "2026-W47")]

    async def test_html_for_a_lead(self, api: Api) -> None:
        status, text, headers = await api.call("GET", "/api/v1/digests/face", headers={"Accept": "text/html"})
        assert (status, text) == (200, "<h1>face</h1>")
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert CALLS == [("face", None)]

    async def test_unknown_team_is_404(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/nobody")
        assert (status, body["error"]["code"]) == (404, "team_not_found")

    @pytest.mark.parametrize(
        "week",
        ["2026-48", "2026-W54", "2025-W53", "W48", "2026-W00", " 2026-W48", "\uff12\uff10\uff12\uff16-W48"],
    )
    async def test_bad_week_is_400(self, api: Api, week: str) -> None:
        status, body = await api.get("/api/v1/digests/face", params={"week": week})
        assert (status, body["error"]["code"]) == (400, "invalid_parameter")
        assert CALLS == []

    async def test_week_53_where_it_exists(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/face", params={"week": "2026-W53"})
        assert (status, body["week"]) == (200, "2026-W53")


class TestTheServicesDigests:
    """The provider `serve` gives the API (service.digest_pages), over the test population."""

    @pytest.fixture
    def digest_provider(self, store: Store) -> Any:
        return digest_provider(store, "Europe/Berlin", lambda: NOW)

    @pytest.mark.parametrize(
        ("team", "week"), [("face", "2026-W49"), ("speech", "2026-W49"), ("face", None), ("face", "2026-W43")]
    )
    async def test_served_as_the_schema_says(
        self, api: Api, store: Store, team: str, week: str | None
    ) -> None:
        await populate(store)
        await store.directory.replace_teams([Team("face"), Team("speech")])
        status, body = await api.get(f"/api/v1/digests/{team}", params={} if week is None else {"week": week})
        assert status == 200
        assert schema_errors(openapi.build(), DIGEST, body) == []
        status, page, _ = await api.call(
            "GET",
            f"/api/v1/digests/{team}",
            params={} if week is None else {"week": week},
            headers={"Accept": "text/html"},
        )
        assert status == 200 and f"GPU digest {team}" in page

    async def test_a_week_with_jobs_has_its_figures(self, api: Api, store: Store) -> None:
        await populate(store)
        await store.directory.replace_teams([Team("face")])
        status, body = await api.get("/api/v1/digests/face", params={"week": "2026-W49"})
        assert (status, body["no_gpu_jobs"], body["jobs"]["total"]) == (200, False, 3)
        assert {p["owner"] for p in body["people"]} == {"alice@example.com", "bob@example.com"}

    async def test_the_body_is_the_document_digest_format_json_prints(self, api: Api, store: Store) -> None:
        """The provider hands over the document unencoded and the API encodes it once: same JSON."""
        await populate(store)
        await store.directory.replace_teams([Team("face")])
        status, body = await api.get("/api/v1/digests/face", params={"week": "2026-W49"})
        digest = await store.digest.team_digest("face", "2026-W49", "Europe/Berlin")
        assert status == 200 and body == orjson.loads(render_json(digest))


class TestCaching:
    """A digest aggregates a team's fortnight and draws a chart: each (team, week) is built once
    per freshness period, whatever the format asked for, and any number of viewers."""

    @pytest.fixture
    def digest_provider(self) -> Any:
        CALLS.clear()
        return provider

    async def test_one_build_serves_both_formats_until_stale(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/face", "viewer", params={"week": "2026-W47"})
        status_html, text, _ = await api.call(
            "GET", "/api/v1/digests/face", params={"week": "2026-W47"}, headers={"Accept": "text/html"}
        )
        assert (status, status_html, text) == (200, 200, "<h1>face</h1>")
        api.monotonic[0] += DIGEST_FRESH_SECONDS - 1
        assert (await api.get("/api/v1/digests/face", params={"week": "2026-W47"})) == (status, body)
        assert CALLS == [("face", "2026-W47")]

        api.monotonic[0] += DIGEST_MAX_STALE_SECONDS + 1  # too old to serve: built again
        assert (await api.get("/api/v1/digests/face", params={"week": "2026-W47"}))[0] == 200
        assert CALLS == [("face", "2026-W47")] * 2

    async def test_each_team_and_week_is_its_own_entry(self, api: Api) -> None:
        for week in ("2026-W46", "2026-W47", "2026-W46"):
            assert (await api.get("/api/v1/digests/face", params={"week": week}))[0] == 200
        assert (await api.get("/api/v1/digests/face"))[0] == 200
        for _ in range(2):
            assert (await api.get("/api/v1/digests/nobody"))[0] == 404  # an unknown team, cached too
        assert CALLS == [("face", "2026-W46"), ("face", "2026-W47"), ("face", None), ("nobody", None)]

    async def test_the_cache_keeps_a_bounded_number_of_digests(self, api: Api) -> None:
        for index in range(DIGEST_MAX_KEYS + 10):
            assert (await api.get(f"/api/v1/digests/team-{index}"))[0] == 404
        assert len(api.app[keys.DIGEST_CACHE]) == DIGEST_MAX_KEYS
