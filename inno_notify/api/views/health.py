"""Probes and metrics, open without a token: /healthz, /readyz, /metrics."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from inno_notify.api import keys, resources
from inno_notify.api.params import Nothing
from inno_notify.api.views.respond import json

log = logging.getLogger("inno_notify.api")
DATABASE_TIMEOUT_SECONDS = 2.0


async def healthz(request: web.Request, _: Nothing) -> web.Response:
    """Liveness: the event loop answers. Nothing else, so a database outage does not restart us."""
    return json(resources.Health(status="ok"))


async def readyz(request: web.Request, _: Nothing) -> web.Response:
    """Readiness: the database answers and every part the service reports on is ready."""
    checks: dict[str, bool] = {}
    try:
        await asyncio.wait_for(request.app[keys.STORE].ping(), DATABASE_TIMEOUT_SECONDS)
        checks["database"] = True
    except Exception as exc:  # any failure to reach the database means "not ready"
        log.warning("readiness: database unreachable: %s", exc)
        checks["database"] = False
    try:
        checks.update({str(k): bool(v) for k, v in request.app[keys.READINESS]().items()})
    except Exception as exc:  # a broken readiness source must not make the probe a 500
        log.warning("readiness: the service's readiness check failed: %s", exc)
        checks["service"] = False
    not_ready = sorted(name for name, ok in checks.items() if not ok)
    readiness = resources.Readiness(ready=not not_ready, checks=checks, not_ready=not_ready)
    return json(readiness, status=503 if not_ready else 200)


async def metrics(request: web.Request, _: Nothing) -> web.Response:
    body = generate_latest(request.app[keys.REGISTRY])
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response
