"""URL wiring only: which view answers which method and path."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from inno_notify.api.views import (
    digests,
    docs,
    events,
    health,
    jobs,
    notifications,
    recommendations,
    usage,
    users,
)

BASE = "/api/v1"


def setup_routes(app: web.Application) -> None:
    # HEAD is not documented, so it is not routed either (405, like any undocumented method).
    def get(path: str, handler: Handler) -> None:
        app.router.add_get(path, handler, allow_head=False)

    get("/healthz", health.healthz)
    get("/readyz", health.readyz)
    get("/metrics", health.metrics)
    get(f"{BASE}/openapi.json", docs.openapi_document)
    get(f"{BASE}/jobs", jobs.list_jobs)
    get(f"{BASE}/jobs/{{namespace}}/{{name}}", jobs.get_job)
    get(f"{BASE}/usage", usage.usage)
    get(f"{BASE}/recommendations", recommendations.list_recommendations)
    get(f"{BASE}/notifications", notifications.list_notifications)
    app.router.add_post(f"{BASE}/notifications/{{id}}/retry", notifications.retry_notification)
    get(f"{BASE}/digests/{{team}}", digests.get_digest)
    get(f"{BASE}/users", users.list_users)
    get(f"{BASE}/users/{{email}}", users.get_user)
    app.router.add_put(f"{BASE}/users/{{email}}", users.put_user)
    app.router.add_delete(f"{BASE}/users/{{email}}", users.delete_user)
    app.router.add_post(f"{BASE}/events", events.post_event)
