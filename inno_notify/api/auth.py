"""Bearer-token authentication and the three roles, failing closed.

Tokens are configured only as SHA-256 hashes. A presented token is hashed and compared against
every configured hash with `hmac.compare_digest`, without stopping at the first match, so the time
taken does not tell which hash (or how much of one) matched. Every path needs a token except the
probes and metrics that Kubernetes and Prometheus scrape; unknown paths need one too, so an
unauthenticated caller learns nothing about which routes exist. Viewers may only read. A pipeline
token (held by scripts in Airflow tasks and Argo steps, so the most exposed of all) may post
pipeline messages and do nothing else: every other path, read or write, routed or not, is 403.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from inno_notify.api.errors import ApiError
from inno_notify.settings import ApiToken

Role = Literal["admin", "viewer", "pipeline"]
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
EVENTS_PATH = "/api/v1/events"


def allowed(role: Role, method: str, path: str) -> str | None:
    """None when `role` may make the request, else why not."""
    if role == "admin":
        return None
    if (method, path) == ("POST", EVENTS_PATH):
        return None if role == "pipeline" else f"role {role} may not post pipeline events"
    if role == "pipeline":
        return "role pipeline may only post pipeline events (POST /api/v1/events)"
    return None if method in READ_METHODS else f"role {role} may only read"


class ApiConfigError(ValueError):
    """The API cannot start with this configuration (no tokens: it would be open or useless)."""


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    role: Role


PRINCIPAL = web.RequestKey("principal", Principal)


class TokenTable:
    """The configured tokens, by hash."""

    def __init__(self, tokens: Sequence[ApiToken]) -> None:
        if not tokens:
            raise ApiConfigError(
                "api.tokens is empty: the REST API refuses to start without tokens "
                '(set api.listen: "" to disable it)'
            )
        self._entries = [(bytes.fromhex(t.sha256), Principal(t.name, t.role)) for t in tokens]

    def authenticate(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: Principal | None = None
        for expected, principal in self._entries:
            if hmac.compare_digest(expected, digest) and found is None:
                found = principal
        return found


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="inno-notify"'}


def auth_middleware(tokens: TokenTable) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        token = bearer_token(request.headers.get("Authorization"))
        if token is None:
            raise ApiError(401, "unauthorized", "a bearer token is required", _CHALLENGE)
        principal = tokens.authenticate(token)
        if principal is None:
            raise ApiError(401, "unauthorized", "the bearer token is not valid", _CHALLENGE)
        refused = allowed(principal.role, request.method, request.path)
        if refused is not None:
            raise ApiError(403, "forbidden", refused)
        request[PRINCIPAL] = principal
        return await handler(request)

    return authenticate
