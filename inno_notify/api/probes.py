"""The probe server: /healthz, /readyz and /metrics on a port of their own, open to anyone.

Kubelet probes and Prometheus's scrape need no token and must work whether or not the admin API
runs (it is off without tokens, and listens on loopback by default). So the same three views the
API serves (`routes.PROBES`, one definition) are also mounted on a small app of their own,
bound to `probes.listen` for as long as `serve` runs. Nothing else is routed here: the port can be
opened to the cluster network without exposing any data.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db import Store
from inno_notify.api import keys, routes


def create_probe_app(store: Store, readiness: keys.Readiness, registry: CollectorRegistry) -> web.Application:
    """`/readyz` pings `store` and reports `readiness()`; `/metrics` serves `registry`."""
    app = web.Application()
    app[keys.STORE] = store
    app[keys.READINESS] = readiness
    app[keys.REGISTRY] = registry
    routes.add_routes(app, routes.PROBES)
    return app


async def start_probes(app: web.Application, listen: str) -> web.AppRunner:
    """Binds `host:port` now, so that a port already in use fails `serve` at once with a clear
    message; the caller cleans the returned runner up when the service stops."""
    host, _, port = listen.rpartition(":")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host.strip("[]") or None, int(port)).start()
    except OSError as exc:
        await runner.cleanup()
        reason = exc.strerror or str(exc)
        raise ProbesBindError(f"probes: cannot listen on {listen} (probes.listen): {reason}") from exc
    return runner


class ProbesBindError(OSError):
    """The probe port could not be bound (in use, or not an address of this host)."""
