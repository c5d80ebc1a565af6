"""Failures of the Prometheus adapter, classified for the one place that retries (the usage service).

``PrometheusUnavailable`` means "try again later" (server down, overloaded, timed out); the
service retries with backoff until ``prometheus.give_up_after_seconds`` and then stores the job's
usage with the figures missing for the reason ``prometheus_unavailable``. ``PrometheusQueryError``
means the request itself is wrong (bad PromQL, too many samples, wrong URL): retrying the same
request cannot help, so it is reported, not retried.
"""

from __future__ import annotations


class PrometheusError(Exception):
    """Base of every error this adapter raises; ``retryable`` tells the caller what to do."""

    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PrometheusUnavailable(PrometheusError):
    """Transient: connection refused or reset, timeout, 5xx, 429 or 408."""

    retryable = True


class PrometheusQueryError(PrometheusError):
    """Permanent for this request: 4xx other than 408/429 (bad query, limits exceeded, not found)."""

    retryable = False


_RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# Prometheus answers 422 ("execution") also when its storage closes under a running query, as in a
# restart: "open querier for block …: open index reader: block is closing". That is not the query's fault.
_STORAGE_CLOSING = ("block is closing", "open querier for block")


def classify_status(status: int, message: str) -> PrometheusError:
    """The error for a non-200 answer, following Alertmanager's rule: 5xx/429/408 retry, other 4xx don't
    (except a 422 from storage shutting down)."""
    if status in _RETRYABLE_STATUSES or status >= 500:
        return PrometheusUnavailable(message, status=status)
    if status == 422 and any(text in message for text in _STORAGE_CLOSING):
        return PrometheusUnavailable(message, status=status)
    return PrometheusQueryError(message, status=status)
