"""GET /api/v1/digests/{team}: delegated to the injected digest provider, JSON or HTML."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from inno_notify.api import keys
from inno_notify.api.app import DIGEST_FRESH_SECONDS, DIGEST_MAX_KEYS, DIGEST_MAX_STALE_SECONDS

from .support import Api

CALLS: list[tuple[str, str | None]] = []


async def provider(team: str, week: str | None) -> Mapping[str, Any] | None:
    CALLS.append((team, week))
    if team != "face":
        return None
    return {"team": team, "week": week or "2026-W48", "gpu_hours": 12.5, "html": "<h1>face</h1>"}


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
        assert (status, body) == (200, {"team": "face", "week": "2026-W47", "gpu_hours": 12.5})
        assert CALLS == [("face", "2026-W47")]

    async def test_html_for_a_lead(self, api: Api) -> None:
        status, text, headers = await api.call("GET", "/api/v1/digests/face", headers={"Accept": "text/html"})
        assert (status, text) == (200, "<h1>face</h1>")
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert CALLS == [("face", None)]

    async def test_unknown_team_is_404(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/nobody")
        assert (status, body["error"]["code"]) == (404, "team_not_found")

    @pytest.mark.parametrize("week", ["2026-48", "2026-W54", "2025-W53", "W48", "2026-W00"])
    async def test_bad_week_is_400(self, api: Api, week: str) -> None:
        status, body = await api.get("/api/v1/digests/face", params={"week": week})
        assert (status, body["error"]["code"]) == (400, "invalid_parameter")
        assert CALLS == []

    async def test_week_53_where_it_exists(self, api: Api) -> None:
        status, body = await api.get("/api/v1/digests/face", params={"week": "2026-W53"})
        assert (status, body["week"]) == (200, "2026-W53")


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
