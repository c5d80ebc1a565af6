"""Prometheus: usage of finished pods from dcgm-exporter and cAdvisor series (issue 4).

``build_meter(settings.prometheus)`` gives a ``UsageMeter``; ``await meter.measure_pods(windows)``
measures a round of finished pods with a fixed number of queries per metric and raises
``PrometheusUnavailable`` (retry later) or ``PrometheusQueryError`` (don't). ``domain.accounting``
turns the result into job figures.
"""

from __future__ import annotations

from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.errors import (
    PrometheusError,
    PrometheusQueryError,
    PrometheusUnavailable,
)
from inno_notify.adapters.prometheus.measure import MeterConfig, PodMeasurement, UsageMeter
from inno_notify.adapters.prometheus.queries import LabelConfig
from inno_notify.settings import PrometheusSettings


def build_meter(settings: PrometheusSettings, *, max_workers: int = 4) -> UsageMeter:
    """A meter (and its client) configured from ``settings.prometheus``."""
    labels = LabelConfig(
        pod=tuple(settings.labels.pod),
        namespace=tuple(settings.labels.namespace),
        container=tuple(settings.labels.container),
        hostname=tuple(settings.labels.hostname),
    )
    client = PrometheusClient(
        ClientConfig(url=settings.url, timeout_seconds=settings.timeout_seconds, max_workers=max_workers)
    )
    return UsageMeter(
        client, MeterConfig(scrape_interval_seconds=settings.scrape_interval_seconds, labels=labels)
    )


__all__ = [
    "ClientConfig",
    "LabelConfig",
    "MeterConfig",
    "PodMeasurement",
    "PodWindow",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusQueryError",
    "PrometheusUnavailable",
    "UsageMeter",
    "build_meter",
]
