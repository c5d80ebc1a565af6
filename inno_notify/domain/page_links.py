"""Links to the job, workflow and team pages that open without a login: signed and expiring.

A message carries `{public_url}/jobs/{namespace}/{name}?uid=…&exp=…&sig=…` (or
`/workflows/{namespace}/{name}?uid=…`, `/teams/{team}?week=…`, each with `exp` and `sig`). The
signature is HMAC-SHA256 over what the page shows — the
kind of page, its identifying values and the expiry — not over the URL's spelling, so a proxy
that re-encodes the path, or serves the service under a path prefix, does not break it, and no
value can be moved from one page to another. Whoever holds the link may open that one page until
it expires; changing any value, the expiry or the signature gives a link that no longer verifies.

Every e-mail also carries `{public_url}/unsubscribe?email=…&exp=…&sig=…` (RFC 8058 one-click
unsubscribe, in its `List-Unsubscribe` header), signed over the address. It lives a year at least
(UNSUBSCRIBE_TTL_SECONDS, or the page links' own lifetime when that is longer): a mail provider's
Unsubscribe button on a months-old message must still work, and the link can do one thing only,
turn e-mail off for the address it was sent to. Unsigned it would be useless (the provider's POST
carries no token), so without a key there is none.

The personal page `{public_url}/me?email=…&exp=…&sig=…` (kind `me`, signed over the address) lives
as long as the job pages' links; every message to a person carries it. Its forms post back to the
same link with a CSRF token (`form_token`): an HMAC, with the same key, over the address and the
link's signature, so a form made for one link is good for that link only, and no other site can
make one (it cannot see the page). A page that links further (the personal page to its runs' pages)
signs those links to expire when its own link does (`PageLinks.until`), never later.

Pure: the time is passed in, the key is given (settings read it from `links.secret_file`).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote, urlencode

EXPIRY_PARAM = "exp"
SIGNATURE_PARAM = "sig"
JOB_PAGE = "job"
WORKFLOW_PAGE = "workflow"
TEAM_PAGE = "team"
UNSUBSCRIBE_PAGE = "unsubscribe"
UNSUBSCRIBE_PATH = "/unsubscribe"
UNSUBSCRIBE_TTL_SECONDS = 365 * 86400.0
ME_PAGE = "me"
ME_PATH = "/me"
FORM_TOKEN_PARAM = "csrf"


class LinkVerdict(enum.StrEnum):
    VALID = "valid"
    # No signature or no expiry: not a signed link at all (a token may still open the page).
    UNSIGNED = "unsigned"
    EXPIRED = "expired"
    # The signature does not match the values: changed, cut, or signed with another key.
    FORGED = "forged"


def signature(key: bytes, page: str, values: Sequence[str], expires: int) -> str:
    """The link's signature: base64url (no padding) of HMAC-SHA256 over the page, its values and
    the expiry, encoded as a JSON array so that no two different tuples give the same message."""
    message = json.dumps([page, *values, expires], ensure_ascii=True, separators=(",", ":")).encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verify(
    key: bytes, page: str, values: Sequence[str], expires: str | None, sig: str | None, now: datetime
) -> LinkVerdict:
    """Whether a link's `exp` and `sig` parameters open `page` for `values` at `now`."""
    if not expires or not sig:
        return LinkVerdict.UNSIGNED
    if not expires.isascii() or not expires.isdigit() or len(expires) > 12:
        return LinkVerdict.FORGED
    expected = signature(key, page, values, int(expires))
    if not hmac.compare_digest(expected.encode("ascii"), sig.encode("utf-8", "surrogateescape")):
        return LinkVerdict.FORGED
    if now.timestamp() >= int(expires):
        return LinkVerdict.EXPIRED
    return LinkVerdict.VALID


def form_token(key: bytes, email: str, sig: str) -> str:
    """The CSRF token of the personal page's forms opened with the link signed `sig` for `email`:
    base64url of HMAC-SHA256 over ["me-form", email, sig] (a message no link signature is made of)."""
    message = json.dumps(["me-form", email, sig], ensure_ascii=True, separators=(",", ":")).encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def form_token_valid(key: bytes, email: str, sig: str, token: str | None) -> bool:
    """Whether `token` is the form token of that link (compared in constant time)."""
    if not token:
        return False
    expected = form_token(key, email, sig).encode("ascii")
    return hmac.compare_digest(expected, token.encode("utf-8", "surrogateescape"))


@dataclass(frozen=True, slots=True)
class PageLinks:
    """Builds the page links a message carries. Without `public_url` there are none; without a
    `key` they are plain links, which open only with a bearer token."""

    public_url: str | None
    key: bytes | None = None
    ttl_seconds: float = 30 * 86400.0

    def job(self, namespace: str, name: str, uid: str, now: datetime) -> str | None:
        """The page of one run of a job."""
        path = f"/jobs/{quote(namespace, safe='')}/{quote(name, safe='')}"
        return self._link(path, JOB_PAGE, [namespace, name, uid], {"uid": uid}, now)

    def workflow(self, namespace: str, name: str, uid: str, now: datetime) -> str | None:
        """The page of one run of a workflow (an Argo Workflow, an Airflow DAG run)."""
        path = f"/workflows/{quote(namespace, safe='')}/{quote(name, safe='')}"
        return self._link(path, WORKFLOW_PAGE, [namespace, name, uid], {"uid": uid}, now)

    def team(self, team: str, week: str, now: datetime) -> str | None:
        """A team's weekly digest page."""
        return self._link(f"/teams/{quote(team, safe='')}", TEAM_PAGE, [team, week], {"week": week}, now)

    def unsubscribe(self, email: str, now: datetime) -> str | None:
        """The one-click unsubscribe link of `email` (None without a key: see the module docstring)."""
        if not self.key:
            return None
        ttl = max(self.ttl_seconds, UNSUBSCRIBE_TTL_SECONDS)
        return self._link(UNSUBSCRIBE_PATH, UNSUBSCRIBE_PAGE, [email], {"email": email}, now, ttl)

    def me(self, email: str, now: datetime) -> str | None:
        """The personal page of `email` (None without a key: unsigned, only a token would open it,
        and a person has none)."""
        if not self.key:
            return None
        return self._link(ME_PATH, ME_PAGE, [email], {"email": email}, now)

    def until(self, expires: int | None) -> PageLinks:
        """These links made to expire at `expires` (unix seconds) whatever their lifetime: the links
        a page opened with a link that expires then may carry. None: the page was opened with a
        token; its links are plain (a token opens them)."""
        if expires is None:
            return PageLinks(self.public_url)
        return _FixedExpiry(self.public_url, self.key, self.ttl_seconds, expires)

    def expiry(self, now: datetime, ttl_seconds: float | None = None) -> int:
        """When a link made at `now` stops opening its page (unix seconds, rounded up)."""
        return math.ceil(now.timestamp() + (self.ttl_seconds if ttl_seconds is None else ttl_seconds))

    def _link(
        self,
        path: str,
        page: str,
        values: Sequence[str],
        query: dict[str, str],
        now: datetime,
        ttl_seconds: float | None = None,
    ) -> str | None:
        if not self.public_url:
            return None
        base = self.public_url.rstrip("/")
        if self.key:
            expires = self.expiry(now, ttl_seconds)
            query = {
                **query,
                EXPIRY_PARAM: str(expires),
                SIGNATURE_PARAM: signature(self.key, page, values, expires),
            }
        return f"{base}{path}?{urlencode(query, quote_via=quote)}"


@dataclass(frozen=True, slots=True)
class _FixedExpiry(PageLinks):
    """Links that all expire at one moment (PageLinks.until)."""

    expires: int = 0

    def expiry(self, now: datetime, ttl_seconds: float | None = None) -> int:
        return self.expires
