"""The meter built from the service's settings speaks to the configured Prometheus with its labels."""

from __future__ import annotations

import pytest

from inno_notify.adapters.prometheus import build_meter
from inno_notify.adapters.prometheus.errors import PrometheusUnavailable
from inno_notify.settings import PrometheusSettings
from tests.adapters.prometheus.promserver import free_port


async def test_build_meter_uses_the_settings() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    settings = PrometheusSettings.model_validate(
        {
            "url": url,
            "timeout_seconds": 3,
            "labels": {"pod": ["exported_pod"], "namespace": ["exported_namespace"]},
        }
    )
    meter = build_meter(settings)
    assert meter.client.config.url == url
    assert meter.client.config.timeout_seconds == 3
    assert meter.config.labels.dcgm_spellings() == [("exported_pod", "exported_namespace")]
    assert meter.config.scrape_interval_seconds == settings.scrape_interval_seconds
    # Nothing listens there: the check a `check` command would run fails as retryable.
    with pytest.raises(PrometheusUnavailable):
        await meter.client.ping()
    meter.client.close()
