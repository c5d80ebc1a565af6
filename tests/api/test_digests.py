"""GET /api/v1/digests/{team}: delegated to the injected digest provider, JSON or HTML."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

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
