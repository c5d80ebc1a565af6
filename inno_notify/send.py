"""`inno-notify send`: a pipeline's message, posted from a script to a running service.

For the last task of an Airflow DAG or the last step of an Argo workflow ("training finished, model
in prod"): it posts `POST /api/v1/events` with a `pipeline` token and says, by its exit code,
whether the service accepted it (0), refused it (1: a wrong token, nobody to send to, the service
unreachable) or was called wrongly (2). With `--key`, a task that is retried sends its message once.

Standard library only (urllib): the command runs inside pipeline images where nothing else of ours
is needed, and it makes one request. It follows no redirect: urllib would repeat the request,
bearer token included, at whatever host a `Location` names, and report that host's answer as the
service's. A 3xx is a refusal naming the new location (exit 1); fix `--api` instead.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENTS_PATH = "/api/v1/events"
TIMEOUT_SECONDS = 30.0


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Turns every redirect into the HTTPError of the 3xx itself: the token goes nowhere else."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


class UsageError(ValueError):
    """The command was called wrongly (exit 2)."""


class Refused(RuntimeError):
    """The service did not accept the message, or could not be reached (exit 1)."""


@dataclass(frozen=True, slots=True)
class Accepted:
    id: int
    key: str
    recipients: list[dict[str, str]]
    duplicate: bool


def read_token(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"cannot read --token-file {path!r}: {exc.strerror or exc}") from None
    if not token or any(c.isspace() for c in token):
        raise UsageError(f"--token-file {path!r} holds no token (one line, no spaces)")
    return token


def parse_link(value: str) -> dict[str, str]:
    """`TITLE=URL` (the title ends at the first `=`)."""
    title, sep, url = value.partition("=")
    if not sep or not title.strip() or not url.startswith(("http://", "https://")):
        raise UsageError(f"--link must be TITLE=URL with an http(s) URL, got {value!r}")
    return {"title": title.strip(), "url": url}


def events_url(api: str) -> str:
    """The events endpoint under the service's API root (`http://inno-notify:8080`, with or
    without `/api/v1`)."""
    if not api.startswith(("http://", "https://")):
        raise UsageError(f"--api must be an http(s) URL, got {api!r}")
    base = api.rstrip("/").removesuffix("/api/v1")
    return base + EVENTS_PATH


def event_body(
    *, to: str | None, team: str | None, title: str, text: str | None, links: list[str], key: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"title": title}
    if to is not None:
        body["to"] = to
    if team is not None:
        body["team"] = team
    if text:
        body["text"] = text
    if links:
        body["links"] = [parse_link(link) for link in links]
    if key is not None:
        body["key"] = key
    return body


def post_event(api: str, token: str, body: dict[str, Any], timeout: float = TIMEOUT_SECONDS) -> Accepted:
    """Posts the event; Accepted, or Refused with the service's reason."""
    request = urllib.request.Request(
        events_url(api),
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=ssl.create_default_context()), _NoRedirects()
    )
    try:
        with opener.open(request, timeout=timeout) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            location = exc.headers.get("Location") if exc.headers is not None else None
            raise Refused(
                f"{exc.code}: the service redirects to {location or 'an unnamed location'}; "
                "not followed (the token is sent only to --api): fix --api"
            ) from None
        raise Refused(f"{exc.code}: {_reason(exc)}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Refused(f"cannot reach {events_url(api)}: {reason}") from None
    return Accepted(
        id=int(answer.get("id", 0)),
        key=str(answer.get("key", "")),
        recipients=list(answer.get("recipients", [])),
        duplicate=bool(answer.get("duplicate", False)),
    )


def _reason(exc: urllib.error.HTTPError) -> str:
    try:
        error = json.loads(exc.read() or b"{}").get("error", {})
        return f"{error.get('code', 'error')}: {error.get('message', exc.reason)}"
    except (ValueError, AttributeError):
        return str(exc.reason)
