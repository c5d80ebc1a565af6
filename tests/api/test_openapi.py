"""The OpenAPI document is derived from the code, so it states what the endpoints enforce.

Every rule the document gives a parameter (length, range, pattern, enum, time format) is broken in
turn, and each breach must be a 400; every parameter the document lists is one the endpoint
accepts, and no other; the enums are the domain's own; roles come from the endpoint table. A bad
parameter is refused before the store is asked, so these requests go to an app over a store with no
tables at all: a request that reached it would be a 500.
"""

from __future__ import annotations

import enum
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from inno_notify.adapters.db import Store, create_engine
from inno_notify.adapters.db.usage_queries import GroupBy
from inno_notify.api import openapi, resources, routes
from inno_notify.api.auth import TokenTable, auth_middleware
from inno_notify.api.errors import error_middleware
from inno_notify.api.params import Nothing
from inno_notify.api.views.respond import json
from inno_notify.domain.model import (
    Channel,
    DeliveryStatus,
    JobStatus,
    MissingReason,
    NotificationKind,
    RecommendationKind,
    Severity,
    Unit,
)

from .conftest import serve_api
from .support import SETTINGS, TOKENS, Api

DOCUMENT = openapi.build()
# A value that fits each parameter's documented shape, for the parameters a breach is not about.
FITTING = {
    "namespace": "face-research",
    "name": "train-a",
    "team": "face",
    "email": "alice@example.com",
    "id": "1",
}


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    store = Store(create_engine("sqlite+aiosqlite://"))
    try:
        async with serve_api(store) as served:
            yield served
    finally:
        await store.close()


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
    ]


def breaches(schema: dict[str, Any]) -> list[str]:
    """Values that break one rule each of a parameter's documented schema."""
    if "$ref" in schema:
        schema = DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    found = []
    if "enum" in schema:
        found.append("not-one-of-them")
    if schema.get("minLength", 0) >= 1:
        found.append("")
    if "maxLength" in schema:
        found.append("a" * (schema["maxLength"] + 1))
    if "minimum" in schema:
        found.append(str(schema["minimum"] - 1))
    if "maximum" in schema:
        found.append(str(schema["maximum"] + 1))
    if schema.get("type") == "integer":
        found.append("1.5")
    if schema.get("format") == "date-time":
        found += ["2026-11-30T10:00:00", "yesterday"]
    if "pattern" in schema:
        found.append(next(v for v in ("!", "a\x00b", "2026-W99") if not re.search(schema["pattern"], v)))
    assert found, f"no rule to break in {schema}"
    return found


CASES = [
    pytest.param(
        method,
        path,
        parameter["name"],
        parameter["in"],
        value,
        id=f"{method} {path} {parameter['name']}={value[:12]!r}",
    )
    for method, path, operation in operations()
    for parameter in operation["parameters"]
    for value in breaches(parameter["schema"])
    # A path segment cannot be empty: that is another route (404), not this one's 400.
    if not (parameter["in"] == "path" and value == "")
]


@pytest.mark.parametrize(("method", "path", "name", "where", "value"), CASES)
async def test_every_documented_rule_is_enforced(
    api: Api, method: str, path: str, name: str, where: str, value: str
) -> None:
    params = {} if where == "path" else {name: value}
    url = path.format(**{**FITTING, **({name: quote(value, safe="")} if where == "path" else {})})
    status, body, _ = await api.call(method, url, params=params)
    assert status == 400, body
    assert body["error"]["code"] in {"invalid_parameter", "invalid_cursor", "invalid_email"}


@pytest.mark.parametrize(
    ("method", "path", "operation"), operations(), ids=lambda v: v if isinstance(v, str) else ""
)
async def test_the_documented_parameters_are_the_accepted_ones(
    api: Api, method: str, path: str, operation: dict[str, Any]
) -> None:
    if operation.get("security") == [] or path.endswith("openapi.json"):
        pytest.skip("reads no parameters, so it does not look at the query")
    documented = sorted(p["name"] for p in operation["parameters"] if p["in"] == "query")
    status, body, _ = await api.call(method, path.format(**FITTING), params={"surprise": "1"})
    assert status == 400
    assert body["error"]["message"].endswith(f"allowed: {', '.join(documented) or 'none'}")


@pytest.mark.parametrize(
    "kind",
    [
        JobStatus,
        MissingReason,
        RecommendationKind,
        Severity,
        Unit,
        Channel,
        NotificationKind,
        DeliveryStatus,
        GroupBy,
    ],
)
def test_enums_are_the_codes_own(kind: type[enum.Enum]) -> None:
    assert DOCUMENT["components"]["schemas"][kind.__name__]["enum"] == [m.value for m in kind]


def test_every_endpoint_is_routed_and_documented() -> None:
    app = web.Application()
    routes.add_routes(app)
    routed = sorted((r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None)
    assert routed == sorted((method, path) for method, path, _ in operations())


async def only_admins(request: web.Request, _: Nothing) -> web.Response:
    return json(resources.Health(status="ok"))


async def test_an_endpoint_may_name_its_roles() -> None:
    """What a new role needs: a row whose `roles` says who may call it (here: a read for admins only)."""
    endpoint = routes.Endpoint(
        "GET",
        "/secret",
        only_admins,
        Nothing,
        {200: routes.Reply("Yes.", resources.Health)},
        "Admins only",
        "operations",
        roles=frozenset({"admin"}),
    )
    table = (endpoint,)
    app = web.Application(
        middlewares=[
            error_middleware,
            auth_middleware(TokenTable(SETTINGS.tokens), routes.open_paths(table), routes.roles_of(table)),
        ]
    )
    routes.add_routes(app, table)
    assert openapi.build(table)["paths"]["/secret"]["get"]["description"] == "Roles: admin."
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        answers = {}
        for role, token in TOKENS.items():
            async with client.get("/secret", headers={"Authorization": f"Bearer {token}"}) as response:
                answers[role] = (response.status, await response.json())
    finally:
        await client.close()
    assert answers["admin"] == (200, {"status": "ok"})
    assert answers["viewer"] == (
        403,
        {"error": {"code": "forbidden", "message": "role viewer may not GET /secret"}},
    )
    assert answers["pipeline"] == (
        403,
        {"error": {"code": "forbidden", "message": "role pipeline may not GET /secret"}},
    )
