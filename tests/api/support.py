"""The API under test: the real app on a real store, served over HTTP by aiohttp's test server.

Every response a test sees is recorded by an outermost middleware and checked, after the test,
against the OpenAPI document's schema for that route, method and status, so the document and the
endpoints cannot drift apart without a test failing.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jsonschema_rs
import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient
from aiohttp.typedefs import Handler

from inno_notify.settings import ApiSettings, ApiToken

ADMIN_TOKEN = "admin-token-8c1f0e"
VIEWER_TOKEN = "viewer-token-77aa21"
PIPELINE_TOKEN = "pipeline-token-5d0c93"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


SETTINGS = ApiSettings(
    listen="127.0.0.1:0",
    tokens=(
        # teams/recipients spelled out (None: unscoped): without the pydantic plugin, mypy
        # reads the settings' `Field(None, ...)` as a field without a default.
        ApiToken(name="ops", sha256=sha256(ADMIN_TOKEN), role="admin", teams=None, recipients=None),
        ApiToken(name="dashboards", sha256=sha256(VIEWER_TOKEN), role="viewer", teams=None, recipients=None),
        ApiToken(
            name="airflow-nightly",
            sha256=sha256(PIPELINE_TOKEN),
            role="pipeline",
            teams=None,
            recipients=None,
        ),
    ),
)
TOKENS = {"admin": ADMIN_TOKEN, "viewer": VIEWER_TOKEN, "pipeline": PIPELINE_TOKEN}


@dataclass
class Seen:
    route: str | None
    method: str
    status: int
    content_type: str
    body: bytes


@dataclass
class Recorder:
    seen: list[Seen] = field(default_factory=list)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        resource = request.match_info.route.resource
        body = response.body if isinstance(response, web.Response) else b""
        self.seen.append(
            Seen(
                None if resource is None else resource.canonical,
                request.method,
                response.status,
                response.content_type,
                body if isinstance(body, bytes) else b"",
            )
        )
        return response


def schema_errors(document: Mapping[str, Any], schema: Mapping[str, Any], value: Any) -> list[str]:
    """What is wrong with `value` by `schema`, whose references point into the document's components."""
    validator = jsonschema_rs.Draft202012Validator(
        {**schema, "components": document["components"]}, validate_formats=True
    )
    return [e.message for e in validator.iter_errors(value)]


def check_conforms(document: Mapping[str, Any], seen: list[Seen]) -> None:
    error_schema = {"$ref": "#/components/schemas/Error"}
    for item in seen:
        operation = document["paths"].get(item.route or "", {}).get(item.method.lower())
        if operation is None:
            # Unrouted paths and methods: only the error format is promised.
            content: Mapping[str, Any] = {"application/json": {"schema": error_schema}}
        else:
            response = operation["responses"].get(str(item.status)) or operation["responses"]["default"]
            content = response.get("content", {})
        where = f"{item.method} {item.route} -> {item.status}"
        if not content:
            assert item.body == b"", f"{where}: body where none is documented"
            continue
        assert item.content_type in content, f"{where}: {item.content_type} not documented ({list(content)})"
        if item.content_type != "application/json":
            continue
        errors = schema_errors(document, content[item.content_type]["schema"], orjson.loads(item.body))
        assert not errors, f"{where}: {errors[:3]}"


@dataclass
class Api:
    client: TestClient[web.Request, web.Application]
    app: web.Application
    recorder: Recorder
    readiness: dict[str, bool]
    monotonic: list[float]

    def headers(self, role: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if role is not None:
            headers["Authorization"] = f"Bearer {TOKENS[role]}"
        return headers

    async def call(
        self,
        method: str,
        path: str,
        role: str | None = "admin",
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, Any, Mapping[str, str]]:
        """(status, decoded JSON or text, headers)."""
        kwargs: dict[str, Any] = {"headers": self.headers(role, headers)}
        if params is not None:
            kwargs["params"] = params
        if json is not None:
            kwargs["data"] = orjson.dumps(json)
            kwargs["headers"]["Content-Type"] = "application/json"
        if data is not None:
            kwargs["data"] = data
        async with self.client.request(method, path, **kwargs) as response:
            raw = await response.read()
            if response.content_type == "application/json":
                return response.status, orjson.loads(raw), response.headers
            return response.status, raw.decode(), response.headers

    async def get(self, path: str, role: str | None = "admin", **kwargs: Any) -> tuple[int, Any]:
        status, body, _ = await self.call("GET", path, role, **kwargs)
        return status, body

    async def csv(
        self, path: str, role: str | None = "viewer", *, params: Mapping[str, str] | None = None
    ) -> tuple[int, list[list[str]], Mapping[str, str]]:
        """(status, the CSV's rows with its header first, headers) of a GET that asks for CSV."""
        status, body, headers = await self.call(
            "GET", path, role, params=params, headers={"Accept": "text/csv"}
        )
        assert isinstance(body, str), (status, body)
        return status, list(csv.reader(io.StringIO(body))), headers
