"""schemathesis fuzzes the running app from its own OpenAPI document, with every check on.

The app is served on a free loopback port over the real store (both databases, seeded with the
test population so that list endpoints return real records, with the service's digest provider)
and the schemathesis CLI runs against it as a separate process, bounded to a few examples per
operation.

`positive_data_acceptance` is left out on purpose: it expects every schema-valid request to
succeed, but some answers are 400 by design for rules JSON Schema cannot state — an opaque cursor
the API never handed out, `since` not before `until`, a body e-mail differing from the path's.
Every other check runs, including `not_a_server_error`, `response_schema_conformance` and
`ignored_auth` (an operation that answers 2xx without a token).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from aiohttp import web

from inno_notify.adapters.db import Store
from inno_notify.api.app import create_app
from inno_notify.domain.model import Team
from inno_notify.service.digest_pages import digest_provider

from .data import populate
from .support import ADMIN_TOKEN, NOW, SETTINGS

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
MAX_EXAMPLES = 8


@pytest.mark.slow
@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is not installed in this environment")
async def test_schemathesis_finds_no_failure(store: Store, tmp_path: Path) -> None:
    await populate(store)
    await store.directory.replace_teams([Team("face"), Team("speech")])
    app = create_app(
        store,
        SETTINGS,
        readiness=lambda: {"watchers_synced": True},
        clock=lambda: NOW,
        digest_provider=digest_provider(store, "UTC", lambda: NOW),
    )
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    report = tmp_path / "report.json"
    try:
        process = await asyncio.create_subprocess_exec(
            str(SCHEMATHESIS),
            "run",
            f"http://127.0.0.1:{port}/api/v1/openapi.json",
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
            "-H",
            f"Authorization: Bearer {ADMIN_TOKEN}",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            "20261201",
            "--workers",
            "1",
            "--no-shrink",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(report),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1"},
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=300)
    finally:
        await runner.cleanup()
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-6000:]
    assert "0 failures" in text or "passed" in text, text[-3000:]
    assert report.exists() and json.loads(report.read_text().splitlines()[0])
