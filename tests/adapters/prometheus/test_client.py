"""Failure classification of the client, over real HTTP: a local aiohttp server answering like a
sick Prometheus (or a proxy in front of it), and a real Prometheus for a bad query."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.errors import (
    PrometheusError,
    PrometheusQueryError,
    PrometheusUnavailable,
)
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, free_port

OK: dict[str, Any] = {
    "status": "success",
    "data": {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "2"]}]},
}


def _error(kind: str) -> dict[str, str]:
    return {"status": "error", "errorType": kind, "error": "something"}


# (case, status, body, expected error class or None for success)
CASES = [
    ("ok", 200, OK, None),
    ("bad_query", 400, _error("bad_data"), PrometheusQueryError),
    ("too_many_samples", 422, _error("execution"), PrometheusQueryError),
    # What Prometheus 2.42 answered when stopped under a running query (seen in test_measure).
    (
        "storage_closing",
        422,
        {
            "status": "error",
            "errorType": "execution",
            "error": "open querier for block 01M8NC3MEPAD55AAE8491Z9AYK: open index reader: block is closing",
        },
        PrometheusUnavailable,
    ),
    ("wrong_path", 404, "404 page not found", PrometheusQueryError),
    ("unauthorized", 401, "no", PrometheusQueryError),
    ("query_timeout", 503, _error("timeout"), PrometheusUnavailable),
    ("rate_limited", 429, "slow down", PrometheusUnavailable),
    ("internal", 500, _error("internal"), PrometheusUnavailable),
    ("bad_gateway", 502, "<html>bad gateway</html>", PrometheusUnavailable),
    ("html_200_from_a_proxy", 200, "<html>login</html>", PrometheusUnavailable),
]


@pytest.fixture
async def sick_prometheus() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A server whose next answer the test sets in ``state``; it records the query it was sent, and
    how: the HTTP method, the URL's query string and the form body."""
    state: dict[str, Any] = {"status": 200, "body": OK, "delay": 0.0}

    async def query(request: web.Request) -> web.StreamResponse:
        form = await request.post()
        state["method"] = request.method
        state["url_params"] = dict(request.query)
        state["query"] = form.get("query") or request.query.get("query")
        await asyncio.sleep(float(state["delay"]))
        body = state["body"]
        status = int(state["status"])
        if isinstance(body, dict):
            return web.json_response(body, status=status)
        return web.Response(text=str(body), status=status, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    yield f"http://127.0.0.1:{port}", state
    await runner.cleanup()


@pytest.mark.parametrize(("name", "status", "body", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_answers_are_classified(
    name: str,
    status: int,
    body: object,
    expected: type[PrometheusError] | None,
    sick_prometheus: tuple[str, dict[str, Any]],
) -> None:
    url, state = sick_prometheus
    state.update(status=status, body=body)
    client = PrometheusClient(ClientConfig(url=url))
    try:
        if expected is None:
            assert await client.query("up") == OK["data"]["result"]
            assert state["query"] == "up"
        else:
            with pytest.raises(expected) as info:
                await client.query("up")
            assert info.value.retryable is (expected is PrometheusUnavailable)
            if name != "html_200_from_a_proxy":
                assert info.value.status == status
    finally:
        client.close()


@pytest.mark.parametrize(
    ("form_body", "method", "in_url"),
    [
        (True, "POST", {}),  # the query is long: in the body, past any URL limit
        (False, "GET", {"query": "up", "timeout": "29s"}),  # for a proxy that refuses POST
    ],
)
async def test_where_the_query_travels(
    form_body: bool,
    method: str,
    in_url: dict[str, str],
    sick_prometheus: tuple[str, dict[str, Any]],
) -> None:
    url, state = sick_prometheus
    client = PrometheusClient(ClientConfig(url=url, form_body=form_body))
    try:
        assert await client.query("up") == OK["data"]["result"]
    finally:
        client.close()
    assert (state["method"], state["url_params"], state["query"]) == (method, in_url, "up")


async def test_connection_refused_is_retryable() -> None:
    client = PrometheusClient(ClientConfig(url=f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(PrometheusUnavailable):
        await client.query("up")
    client.close()


async def test_slow_answer_times_out_as_retryable(sick_prometheus: tuple[str, dict[str, Any]]) -> None:
    url, state = sick_prometheus
    state["delay"] = 1.0
    client = PrometheusClient(ClientConfig(url=url, timeout_seconds=0.2))
    with pytest.raises(PrometheusUnavailable):
        await client.query("up")
    client.close()


async def test_queries_run_off_the_event_loop(sick_prometheus: tuple[str, dict[str, Any]]) -> None:
    # The aiohttp server runs on this same loop: a blocking client would deadlock against it.
    url, state = sick_prometheus
    state["delay"] = 0.05
    client = PrometheusClient(ClientConfig(url=url, max_workers=2))
    results = await asyncio.gather(*(client.query("up") for _ in range(4)))
    assert len(results) == 4 and client.queries_sent == 4
    client.close()


@pytest.mark.prometheus
@pytest.mark.skipif(not HAVE_PROMETHEUS, reason="prometheus/promtool not installed")
async def test_real_prometheus_rejects_bad_promql_permanently(tmp_path: Path) -> None:
    with PrometheusServer(tmp_path / "tsdb") as server:
        client = PrometheusClient(ClientConfig(url=server.url))
        with pytest.raises(PrometheusQueryError) as info:
            await client.query("sum by (")
        assert info.value.status == 400
        assert await client.query("vector(1)") != []
        client.close()
