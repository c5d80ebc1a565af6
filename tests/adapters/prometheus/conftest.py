"""Fixtures that start real Prometheus servers on generated data (skipped without the binaries)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.adapters.prometheus import metricgen, scenario
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill


@dataclass
class Loaded:
    cluster: scenario.Cluster
    truth: dict[str, metricgen.PodTruth]
    server: PrometheusServer
    samples: int


def _load(
    tmp: Path, cluster: scenario.Cluster, idle_scrape: float | None
) -> tuple[dict[str, metricgen.PodTruth], int]:
    openmetrics = tmp / "data.om"
    truth, samples = metricgen.generate(
        openmetrics,
        cluster.gpus,
        [*cluster.background, *cluster.round],
        start=cluster.start,
        end=cluster.end,
        scrape=scenario.SCRAPE,
        idle_scrape=idle_scrape,
    )
    backfill(openmetrics, tmp / "tsdb")
    openmetrics.unlink()
    return truth, samples


@pytest.fixture(scope="session")
def cluster_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    """3 days of 24 GPUs (two of them MIG instances on one A100) and one round of finished pods.

    Generated, backfilled and served once per run (seconds), for every module that reads it: the
    tests only query it."""
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    tmp = tmp_path_factory.mktemp("prom-cluster")
    cluster = scenario.build()
    truth, samples = _load(tmp, cluster, idle_scrape=60)
    with PrometheusServer(tmp / "tsdb") as server:
        yield Loaded(cluster, truth, server, samples)


@pytest.fixture(scope="module")
def exported_tsdb(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[scenario.Cluster, dict[str, metricgen.PodTruth], Path]:
    """A small TSDB whose DCGM labels use the ``exported_`` spelling; tests start their own server on it."""
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    tmp = tmp_path_factory.mktemp("prom-exported")
    cluster = scenario.exported_cluster()
    truth, _ = _load(tmp, cluster, idle_scrape=None)
    return cluster, truth, tmp / "tsdb"
