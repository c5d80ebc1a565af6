"""POST /mattermost/commands: Mattermost's `/inno` slash command, when
`channels.mattermost.command_token` is set (docs/selfservice.md).

Not a resource of the API and no bearer token: Mattermost sends the token it generated for the
command, in the form field `token` (and as `Authorization: Token …`), compared in constant time
with the configured one. A request without it, or with another, is refused (401) and nothing in it
is acted on. The form (user_id, text, command, channel_id, trigger_id, …) then goes to the service's
handler (service.mattermost_commands, passed in by the runtime: the API does not import the
service), which carries the command out in one transaction and gives the answer's Markdown.

The answer is the response itself, `{"response_type": "ephemeral", "text": …}`: a post in the
channel the command was typed in that only the person sees, within the 3 seconds Mattermost waits.
"""

from __future__ import annotations

from aiohttp import web

from inno_notify.api import keys
from inno_notify.api.auth import secret_matches
from inno_notify.api.errors import ApiError, bad_request
from inno_notify.api.params import bounded_body, provider_form
from inno_notify.api.views.respond import json

COMMANDS_PATH = "/mattermost/commands"
OPEN_PATHS = frozenset({COMMANDS_PATH})
# A slash command's form: the text (at most a post's 16383 characters) and a dozen short fields.
MAX_BODY = 64 * 1024
# The longest user id read: Mattermost's are 26 characters.
_USER_ID_MAX = 64
# Said when the server could not tell who typed the command (the service changed nothing).
UNAVAILABLE_TEXT = (
    "inno-notify could not ask the Mattermost server who you are just now, so nothing changed. "
    "Try again in a minute."
)


def add_routes(app: web.Application) -> None:
    app.router.add_post(COMMANDS_PATH, mattermost_commands)


async def mattermost_commands(request: web.Request) -> web.Response:
    hooks = request.app[keys.MATTERMOST_REQUESTS]
    raw = await bounded_body(request, MAX_BODY)
    fields = provider_form(raw) or {}
    header = request.headers.get("Authorization", "")
    given = fields.get("token") or (header[6:].strip() if header[:6].lower() == "token " else "")
    # Checked before the form is judged further: a request without the token learns nothing.
    if not secret_matches(given, hooks.token):
        raise ApiError(401, "unauthorized", "the slash command's token is missing or wrong")
    user_id = fields.get("user_id", "")
    if not user_id or len(user_id) > _USER_ID_MAX:
        raise bad_request("the form has no user_id", code="invalid_body")
    text = await hooks.handle({"user_id": user_id, "text": fields.get("text", "")})
    return json({"response_type": "ephemeral", "text": UNAVAILABLE_TEXT if text is None else text})


__all__ = ["COMMANDS_PATH", "OPEN_PATHS", "add_routes"]
