"""POST /telegram/webhook: the updates Telegram posts when `channels.telegram.updates` is webhook.

Not a resource of the API and no bearer token: Telegram proves itself with the secret it was given
at setWebhook, in the `X-Telegram-Bot-Api-Secret-Token` header, compared in constant time. A
request without it, or with another value, is refused (401) before its body is read. The body is
handed to the service's handler (service.telegram_updates, passed in by the runtime: the API does
not import the service), which handles the update in one transaction; 200 tells Telegram it is
done, an error makes Telegram send it again later, and an update handled before changes nothing.
"""

from __future__ import annotations

from aiohttp import web

from inno_notify.api import keys
from inno_notify.api.auth import secret_matches
from inno_notify.api.errors import ApiError
from inno_notify.api.params import bounded_body, json_object
from inno_notify.api.views.respond import json

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
WEBHOOK_PATH = "/telegram/webhook"
OPEN_PATHS = frozenset({WEBHOOK_PATH})
# An update is a message of at most 4096 characters and its entities: a few kilobytes.
MAX_BODY = 256 * 1024


async def telegram_webhook(request: web.Request) -> web.Response:
    hook = request.app[keys.TELEGRAM_WEBHOOK]
    given = request.headers.get(SECRET_HEADER, "")
    if not secret_matches(given, hook.secret):
        raise ApiError(401, "unauthorized", f"the {SECRET_HEADER} header is missing or wrong")
    update = json_object(await bounded_body(request, MAX_BODY), "an update object")
    await hook.handle(update)
    return json({})
