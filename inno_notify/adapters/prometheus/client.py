"""An asyncio face for prometheus-api-client, which is synchronous (requests).

Queries run in a small bounded thread pool so that a slow Prometheus can neither block the event
loop nor take every thread of the process. They go out as POST form bodies (``_FormBodySession``):
a round's query is tens of kilobytes of pod regex, which a URL would limit to 8 KiB per query and
which requests and urllib3 re-scan byte by byte in a URL but not in a body. Every failure leaves
here classified (``PrometheusUnavailable`` / ``PrometheusQueryError``); the library's own urllib3
retries are switched off because the usage service is the one place that retries, with its own
backoff and give-up time.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from inno_notify.adapters.prometheus.errors import (
    PrometheusError,
    PrometheusQueryError,
    PrometheusUnavailable,
    classify_status,
)

# One result series as the HTTP API returns it: {"metric": {...}, "value": [t, "v"]} for an instant
# query, {"metric": {...}, "values": [[t, "v"], ...]} for a range query.
Sample = Mapping[str, Any]


def sample_value(sample: Sample) -> float | None:
    """An instant query's value of one series; None when it has none, or NaN or ±Inf (no measurement)."""
    try:
        value = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


_STATUS_RE = re.compile(r"HTTP Status Code (\d{3})")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to reach Prometheus. The service builds it from ``settings.prometheus``."""

    url: str = "http://prometheus:9090"
    timeout_seconds: float = 30.0
    # Concurrent queries in flight; a handful keeps Prometheus busy without overloading it.
    max_workers: int = 4
    headers: Mapping[str, str] = field(default_factory=dict)
    # False: the query travels in the URL (GET), for a proxy in front of Prometheus that refuses POST.
    form_body: bool = True


class _FormBodySession(requests.Session):
    """prometheus-api-client puts the query into the URL even with ``method="POST"``; Prometheus reads
    the same parameters from a form body. This session (the library's documented ``session`` hook)
    moves a POST's parameters into the body."""

    def request(self, method: str, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        if method.upper() == "POST" and kwargs.get("params") is not None and kwargs.get("data") is None:
            kwargs["data"] = kwargs.pop("params")
        return super().request(method, url, *args, **kwargs)


class PrometheusClient:
    """Runs PromQL queries (instant and range) off the event loop and counts them (benchmarks and
    tests read it)."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._executor = ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="promql")
        # requests.Session is not documented as thread-safe: one connection object per worker thread.
        self._local = threading.local()
        self.queries_sent = 0
        self.answers_received = 0  # bumped by the worker thread; readers only compare it

    @property
    def config(self) -> ClientConfig:
        return self._config

    def _connection(self) -> PrometheusConnect:
        conn: PrometheusConnect | None = getattr(self._local, "conn", None)
        if conn is None:
            body = self._config.form_body
            conn = PrometheusConnect(
                url=self._config.url.rstrip("/"),
                headers=dict(self._config.headers) or None,
                retry=Retry(total=0, connect=0, read=0, status=0, raise_on_status=False),
                timeout=self._config.timeout_seconds,
                session=_FormBodySession() if body else None,
                method="POST" if body else "GET",
            )
            self._local.conn = conn
        return conn

    def _query_blocking(self, promql: str) -> list[Sample]:
        return self._answer(lambda conn, params: conn.custom_query(promql, params=params))

    def _query_range_blocking(self, promql: str, start: float, end: float, step: int) -> list[Sample]:
        return self._answer(
            lambda conn, params: conn.custom_query_range(
                promql,
                datetime.fromtimestamp(start, UTC),
                datetime.fromtimestamp(end, UTC),
                f"{step}s",
                params=params,
            )
        )

    def _answer(self, ask: Callable[[PrometheusConnect, dict[str, str]], Any]) -> list[Sample]:
        # Prometheus aborts a query slightly before our socket timeout, so that a slow query comes
        # back as a classified 503 rather than a dropped connection.
        server_timeout = f"{max(1.0, self._config.timeout_seconds - 1):.0f}s"
        try:
            result = ask(self._connection(), {"timeout": server_timeout})
        except PrometheusApiClientException as exc:
            match = _STATUS_RE.search(str(exc))
            if match is None:
                raise PrometheusUnavailable(f"unreadable answer from Prometheus: {exc}") from exc
            raise classify_status(int(match.group(1)), str(exc)[:500]) from exc
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            raise PrometheusUnavailable(f"Prometheus unreachable: {type(exc).__name__}") from exc
        except ValueError as exc:  # a proxy answering 200 with HTML instead of JSON
            raise PrometheusUnavailable(f"Prometheus answered no JSON: {exc}") from exc
        except requests.RequestException as exc:
            raise PrometheusQueryError(f"request to Prometheus failed: {exc}") from exc
        if not isinstance(result, list):
            raise PrometheusUnavailable(f"unexpected result type {type(result).__name__}")
        self.answers_received += 1
        return result

    async def query(self, promql: str) -> list[Sample]:
        """Evaluate an instant query; raise a ``PrometheusError`` subclass on failure."""
        self.queries_sent += 1
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._query_blocking, promql)

    async def query_range(self, promql: str, start: float, end: float, step: int) -> list[Sample]:
        """Evaluate a range query from ``start`` to ``end`` (unix seconds, whole ones sent) every
        ``step`` seconds; each answer row has ``values``: [[t, "v"], …]. Raises like ``query``."""
        self.queries_sent += 1
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, self._query_range_blocking, promql, start, end, step
        )

    async def ping(self) -> None:
        """Raise a ``PrometheusError`` unless Prometheus evaluates a trivial query (`check`, readiness)."""
        await self.query("vector(1)")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["ClientConfig", "PrometheusClient", "PrometheusError", "Sample", "sample_value"]
