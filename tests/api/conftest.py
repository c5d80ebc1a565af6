"""Fixtures of the API tests: `api`, the real app over the `store` of tests/db_support.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from inno_notify.adapters.db import Store
from inno_notify.api import openapi
from inno_notify.api.app import create_app
from inno_notify.api.keys import DigestProvider

from .support import NOW, SETTINGS, Api, Recorder, check_conforms


@pytest.fixture
def digest_provider() -> DigestProvider | None:
    """No digest builder by default; tests of the digest route override this fixture."""
    return None


@pytest.fixture
async def api(store: Store, digest_provider: DigestProvider | None) -> AsyncIterator[Api]:
    async with serve_api(store, digest_provider) as served:
        yield served


@contextlib.asynccontextmanager
async def serve_api(
    store: Store, digest_provider: DigestProvider | None = None, **options: Any
) -> AsyncIterator[Api]:
    """The app over `store`, served; every response it gave is checked against the document after.
    `options` go to create_app as they are (the pages' provider and link key, a clock, the API
    settings as `settings`)."""
    readiness = {"watchers_synced": True, "dispatcher_alive": True}
    monotonic = [1000.0]
    options.setdefault("clock", lambda: NOW)
    app = create_app(
        store,
        options.pop("settings", SETTINGS),
        readiness=lambda: readiness,
        digest_provider=digest_provider,
        monotonic=lambda: monotonic[0],
        **options,
    )
    recorder = Recorder()
    app.middlewares.insert(0, recorder.middleware)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield Api(client, app, recorder, readiness, monotonic)
    finally:
        await client.close()
    check_conforms(openapi.build(), recorder.seen)
