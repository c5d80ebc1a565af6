"""Fixtures for the kube adapter: the simulated API server and a real kubernetes-asyncio client on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube import load_api_client
from inno_notify.sim.kube_api import SimKubeServer
from tests.adapters.kube.support import Consumer


@pytest.fixture
async def sim() -> AsyncIterator[SimKubeServer]:
    server = SimKubeServer(bookmark_interval=0.2)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def api(sim: SimKubeServer, tmp_path: Path) -> AsyncIterator[ApiClient]:
    client = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    yield client
    await client.close()


@pytest.fixture
def consumer() -> Consumer:
    return Consumer()
