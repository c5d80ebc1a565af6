"""Every failure leaves the API as the contract's error JSON, produced in exactly one place.

Views and query helpers raise (ApiError, the store's RecordNotFound and InvalidCursor, a statement
cut by its time limit, the report cache's CacheBusy, aiohttp's HTTP exceptions for unknown routes
and methods); the middleware below turns each into `{"error": {"code", "message"}}` with its
status. Anything unexpected becomes a 500 whose message names no internals: the details go to the
log, never to the client.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from inno_notify.adapters.db import InvalidCursor, RecordNotFound
from inno_notify.adapters.db.engine import is_statement_timeout
from inno_notify.api.cache import CacheBusy

log = logging.getLogger("inno_notify.api")

# Headers of aiohttp's own HTTP errors that the client needs (405 lists the allowed methods).
_KEPT_HEADERS = ("Allow", "WWW-Authenticate")
# What a 503 asks the client to wait before trying again (seconds).
RETRY_AFTER_SECONDS = 5
# Set on requests for the pages that a browser asks for (auth.SignedPages): their errors are a
# short page saying the same as the JSON would, not JSON.
HTML_ERRORS = web.RequestKey("html_errors", bool)


@with_config(ConfigDict(extra="forbid", use_attribute_docstrings=True))
class ErrorDetail(TypedDict):
    code: str
    """Stable and machine-readable, e.g. `invalid_parameter`, `job_not_found`, `timeout`."""
    message: str


@with_config(ConfigDict(extra="forbid"))
class Error(TypedDict):
    """Every failure's body: 400 bad parameter, 401 no valid token, 403 role, 404 not found, …; 503
    `timeout` (the request ran past its time limit) or `busy` (too many reports computing), with
    Retry-After."""

    error: ErrorDetail


class ApiError(Exception):
    """An error the client caused (or may retry), with its status and a stable machine-readable code."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def bad_request(message: str, code: str = "invalid_parameter") -> ApiError:
    return ApiError(400, code, message)


def not_found(message: str, code: str = "not_found") -> ApiError:
    return ApiError(404, code, message)


def timed_out(what: str) -> ApiError:
    """503 `timeout`: the request (`what` ran too long) was cut by a time limit."""
    return ApiError(
        503,
        "timeout",
        f"{what} and was cancelled; try again later, or ask for less (a shorter window, a smaller page)",
        {"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    document: Error = {"error": {"code": code, "message": message}}
    body = orjson.dumps(document)
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def html_error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    """The error of a page: its message as a page (escaped), the same status and headers."""
    body = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{status} · inno-notify</title></head>"
        '<body style="font-family:sans-serif;max-width:640px;margin:24px auto;padding:0 16px">'
        f'<h1 style="font-size:1.2em">{html.escape(message)}</h1>'
        f'<p style="color:#666">{status} {html.escape(code)}</p></body></html>'
    )
    return web.Response(status=status, text=body, content_type="text/html", charset="utf-8", headers=headers)


def _respond(
    request: web.Request, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    if request.get(HTML_ERRORS):
        return html_error_response(status, code, message, headers)
    return error_response(status, code, message, headers)


def _code_of(exc: web.HTTPException) -> str:
    return exc.reason.lower().replace(" ", "_").replace("-", "_") or "error"


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return _respond(request, exc.status, exc.code, exc.message, exc.headers)
    except RecordNotFound as exc:
        return _respond(request, 404, "not_found", str(exc) or "not found")
    except InvalidCursor:
        return _respond(request, 400, "invalid_cursor", "cursor is not one this API handed out")
    except CacheBusy:
        message = "too many reports are being computed at once; try again shortly"
        return _respond(request, 503, "busy", message, {"Retry-After": str(RETRY_AFTER_SECONDS)})
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: exc.headers[k] for k in _KEPT_HEADERS if k in exc.headers}
        message = f"{request.method} {request.path}: {exc.reason}"
        return _respond(request, exc.status, _code_of(exc), message, headers)
    except Exception as exc:
        if is_statement_timeout(exc):
            log.warning("%s %s: a statement ran past its time limit", request.method, request.path)
            cut = timed_out("a database statement ran past its time limit")
            return _respond(request, cut.status, cut.code, cut.message, cut.headers)
        log.exception("unhandled error in %s %s", request.method, request.path)
        return _respond(request, 500, "internal_error", "internal error; the service log has the details")
