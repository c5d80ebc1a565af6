"""Bearer-token authentication and the roles, failing closed.

Tokens are configured only as SHA-256 hashes. A presented token is hashed and compared against
every configured hash with `hmac.compare_digest`, without stopping at the first match, so the time
taken does not tell which hash (or how much of one) matched. Every path needs a token except the
probes and metrics that Kubernetes and Prometheus scrape (the endpoints marked open in routes.py);
unknown paths need one too, so an unauthenticated caller learns nothing about which routes exist.
Which roles may call an endpoint is in its row of routes.py; by default every reader (admin,
viewer) may read and only admin may write. A pipeline token (held by scripts in Airflow tasks and
Argo steps, so the most exposed of all) is no reader: it may call only the rows that name it (POST
/api/v1/events), and every other path, read or write, routed or not, is 403.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from inno_notify.api.errors import ApiError
from inno_notify.settings import ApiRole, ApiToken

Role = ApiRole
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READERS: frozenset[Role] = frozenset({"admin", "viewer"})
WRITERS: frozenset[Role] = frozenset({"admin"})


def default_roles(method: str) -> frozenset[Role]:
    """Who may call an endpoint whose row names no roles (and any path that matched none)."""
    return READERS if method in READ_METHODS else WRITERS


def refusal(role: Role, method: str, path: str, only: Mapping[Role, str]) -> str:
    """The 403's message for `role`, not allowed `method path`; `only` says what the roles outside
    READERS may do instead (routes.only_named)."""
    if role in only:
        return f"role {role} may only {only[role]}"
    if method not in READ_METHODS and role in READERS:
        return f"role {role} may only read"
    return f"role {role} may not {method} {path}"


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


def auth_middleware(
    tokens: TokenTable,
    open_paths: frozenset[str],
    roles: Callable[[web.Request], frozenset[Role]],
    only: Mapping[Role, str] | None = None,
) -> Middleware:
    """Lets `open_paths` through; else a valid token whose role is in `roles(request)`. `only`: what
    each role outside READERS may call, named in its 403s (routes.only_named)."""
    only = only or {}

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        token = bearer_token(request.headers.get("Authorization"))
        if token is None:
            raise ApiError(401, "unauthorized", "a bearer token is required", _CHALLENGE)
        principal = tokens.authenticate(token)
        if principal is None:
            raise ApiError(401, "unauthorized", "the bearer token is not valid", _CHALLENGE)
        if principal.role not in roles(request):
            raise ApiError(403, "forbidden", refusal(principal.role, request.method, request.path, only))
        request[PRINCIPAL] = principal
        return await handler(request)

    return authenticate
