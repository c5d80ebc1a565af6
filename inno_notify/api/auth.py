"""Bearer-token authentication and the roles, failing closed.

Tokens are configured only as SHA-256 hashes. A presented token is hashed and compared against
every configured hash with `hmac.compare_digest`, without stopping at the first match, so the time
taken does not tell which hash (or how much of one) matched. Every path needs a token except the
probes and metrics that Kubernetes and Prometheus scrape (the endpoints marked open in routes.py),
and the pages (job, workflow and team pages, an e-mail's one-click unsubscribe) when the request
carries a valid signed link (SignedPages); unknown
paths need one too, so an unauthenticated caller learns nothing about which routes exist.
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
from datetime import datetime

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from inno_notify.api.errors import HTML_ERRORS, ApiError
from inno_notify.api.negotiate import preferred
from inno_notify.domain.page_links import EXPIRY_PARAM, SIGNATURE_PARAM, LinkVerdict, verify
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
    """Who called: the token's name (its idempotency keys and rate limit are its own) and role, and
    for a pipeline token with a scope (`api.tokens[].teams` / `recipients`) where it may post."""

    name: str
    role: Role
    teams: frozenset[str] | None = None
    recipients: frozenset[str] | None = None

    @property
    def scoped(self) -> bool:
        return self.teams is not None or self.recipients is not None

    def refuses(self, to: str | None, team: str | None) -> str | None:
        """Why this principal may not post an event to `to` or `team`; None when it may."""
        if not self.scoped:
            return None
        if team is not None and team not in (self.teams or frozenset()):
            allowed = ", ".join(sorted(self.teams or ())) or "none"
            return f"token {self.name} may not post to team {team!r} (its teams: {allowed})"
        if to is not None and to.strip().lower() not in (self.recipients or frozenset()):
            allowed = ", ".join(sorted(self.recipients or ())) or "none"
            return f"token {self.name} may not post to {to.strip()!r} (its recipients: {allowed})"
        return None


PRINCIPAL = web.RequestKey("principal", Principal)


class TokenTable:
    """The configured tokens, by hash."""

    def __init__(self, tokens: Sequence[ApiToken]) -> None:
        if not tokens:
            raise ApiConfigError(
                "api.tokens is empty: the REST API refuses to start without tokens "
                '(set api.listen: "" to disable it)'
            )
        self._entries = [(bytes.fromhex(t.sha256), _principal(t)) for t in tokens]

    def authenticate(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: Principal | None = None
        for expected, principal in self._entries:
            if hmac.compare_digest(expected, digest) and found is None:
                found = principal
        return found


def _principal(token: ApiToken) -> Principal:
    teams = None if token.teams is None else frozenset(token.teams)
    recipients = None if token.recipients is None else frozenset(token.recipients)
    if token.teams is not None or token.recipients is not None:
        # One listed, the other not: nothing of the other kind (a scope names all it allows).
        teams, recipients = teams or frozenset(), recipients or frozenset()
    return Principal(token.name, token.role, teams, recipients)


def secret_matches(given: str, expected: str) -> bool:
    """Whether the secret a chat provider sent (Telegram's webhook header, Mattermost's command
    token: hostile text, any code point) is the configured one, compared in constant time."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="inno-notify"'}


@dataclass(frozen=True, slots=True)
class SignedPages:
    """The pages a signed link opens without a token (the job, workflow and team pages and the
    one-click unsubscribe, docs/pages.md).

    `subject(request)` is the kind of page and the values its links are signed over, or None for a
    request that is no such page (routes.signed_subject). `key` signs the links
    (`links.secret_file`); without it no link is valid and pages need a token."""

    key: bytes | None
    clock: Callable[[], datetime]
    subject: Callable[[web.Request], tuple[str, Sequence[str]] | None]

    def verdict(self, request: web.Request) -> LinkVerdict | None:
        """None: not a page. Else whether the request's `exp` and `sig` open it now."""
        subject = self.subject(request)
        if subject is None:
            return None
        expires, sig = request.query.get(EXPIRY_PARAM), request.query.get(SIGNATURE_PARAM)
        if self.key is None or not expires or not sig:
            return LinkVerdict.UNSIGNED
        page, values = subject
        return verify(self.key, page, values, expires, sig, self.clock())


_LINK_REFUSALS = {
    LinkVerdict.EXPIRED: (
        "link_expired",
        "this link has expired: the newest message about it has a fresh one",
    ),
    LinkVerdict.FORGED: ("invalid_link", "this link is not valid (changed, cut, or signed with another key)"),
}


def auth_middleware(
    tokens: TokenTable,
    open_paths: frozenset[str],
    roles: Callable[[web.Request], frozenset[Role]],
    only: Mapping[Role, str] | None = None,
    pages: SignedPages | None = None,
) -> Middleware:
    """Lets `open_paths` through, and a page (`pages`) whose signed link is valid; else a valid
    token whose role is in `roles(request)`. `only`: what each role outside READERS may call, named
    in its 403s (routes.only_named)."""
    only = only or {}

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        verdict = pages.verdict(request) if pages is not None else None
        if verdict is not None:
            # A person's browser gets its errors as a page; a script asking for JSON, the JSON.
            accept = request.headers.get("Accept")
            request[HTML_ERRORS] = preferred(accept, ("application/json", "text/html")) == "text/html"
            if verdict is LinkVerdict.VALID:
                return await handler(request)
        token = bearer_token(request.headers.get("Authorization"))
        if token is None and verdict in _LINK_REFUSALS:
            code, message = _LINK_REFUSALS[verdict]
            raise ApiError(401, code, message, _CHALLENGE)
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
