"""Fixtures for the simulated API server, with kubernetes-asyncio's own client on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient

from inno_notify.sim.kube_api import SimKubeServer


@pytest.fixture
async def sim() -> AsyncIterator[SimKubeServer]:
    server = SimKubeServer(kueue_versions=("v1beta1", "v1beta2"), bookmark_interval=0.1)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def api(sim: SimKubeServer, tmp_path: Path) -> AsyncIterator[ApiClient]:
    client = await config.new_client_from_config(config_file=str(sim.kubeconfig(tmp_path / "kubeconfig")))
    yield client
    await client.close()
