"""What a request may carry, declared once per endpoint, and read from it with clear 400s.

Each endpoint declares its inputs as one frozen dataclass (next to its view): a field per path or
query parameter, and at most one `Body` field for a JSON body (or, `Body(form=True)`, an HTML
form's fields: application/x-www-form-urlencoded or multipart/form-data). A field's type says how its text is
read (`Parse` in its `Annotated` metadata, or the enum it is) and, through pydantic's `Field`, the
constraints the OpenAPI document states (lengths, patterns, ranges, the default). `Later` puts a
rule between two times on the model too. The same dataclass is what the view receives and what
openapi.py turns into the document's parameters, so the rules a fuzzer sees are the ones enforced.

Unknown query parameters are refused rather than ignored: a typo like `?teem=face` silently
returning every team's jobs is worse than an error. Times are RFC 3339 with an explicit offset; a
naive time would mean whatever the server's zone happens to be.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
import urllib.parse
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Annotated, Any, Generic, TypeVar, Union

import orjson
from aiohttp import web
from multidict import MultiMapping
from pydantic import BaseModel, Field, ValidationError

from inno_notify.api.errors import ApiError, bad_request
from inno_notify.domain.trends import MAX_TREND_WEEKS
from inno_notify.domain.weeks import WEEK_PATTERN, NoSuchWeek, NotAWeek, parse_week

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_TEXT = 253  # the longest Kubernetes name; owner e-mails fit as well
MAX_BODY = 64 * 1024

# Patterns as the OpenAPI document states them (JSON Schema's ECMA-262 and Python's `re` read these
# alike); the readers below match the same text without the anchors, with `fullmatch`.
# No NUL byte: no database stores one.
SAFE_PATTERN = r"^[^\x00]*$"
# Deliberately loose (one @, no spaces): the directory matches what owners write in annotations.
# ASCII whitespace spelled out: Python's \s also matches Unicode spaces, the schema's (ECMA) \s fewer.
EMAIL_PATTERN = r"^[^@/\x00\x09-\x0d\x20]{1,64}@[^@/\x00\x09-\x0d\x20]{1,189}$"
CURSOR_PATTERN = r"^[A-Za-z0-9_-]{1,1000}$"
_EMAIL = re.compile(EMAIL_PATTERN[1:-1])
_CURSOR = re.compile(CURSOR_PATTERN[1:-1])
_LIMIT = re.compile(r"[0-9]{1,4}")
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})",
)

E = TypeVar("E", bound=enum.Enum)
P = TypeVar("P")
M = TypeVar("M", bound=BaseModel)


# --- markers on a field's type ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parse:
    """How a parameter's text becomes its value: `read(text, name)`, raising ApiError (400)."""

    read: Callable[[str, str], Any]


@dataclass(frozen=True, slots=True)
class Later:
    """This time must be later than the parameter `than`, when both are given."""

    than: str


@dataclass(frozen=True, slots=True)
class Body:
    """The field is the request's JSON body, validated by its pydantic model (400 `invalid_body`);
    with `form`, the fields of a form body (FORM_TYPES), each name once, as the model's strings."""

    form: bool = False


# --- readers of one value (their messages are the API's error messages) -------------------------


def text(value: str, name: str) -> str:
    if not value:
        raise bad_request(f"{name} must not be empty (leave it out to not filter)")
    if len(value) > MAX_TEXT:
        raise bad_request(f"{name} is longer than {MAX_TEXT} characters")
    # No database stores a NUL character (Postgres refuses it): no record can match one.
    if "\x00" in value:
        raise bad_request(f"{name} contains a NUL character")
    return value


def choice(kind: type[E]) -> Callable[[str, str], E]:
    def read(value: str, name: str) -> E:
        try:
            return kind(value)
        except ValueError:
            allowed = ", ".join(str(m.value) for m in kind)
            raise bad_request(f"{name} must be one of {allowed}; got {value!r}") from None

    return read


def limit(value: str, name: str) -> int:
    if not _LIMIT.fullmatch(value) or not 1 <= int(value) <= MAX_LIMIT:
        raise bad_request(f"{name} must be an integer from 1 to {MAX_LIMIT}; got {value!r}")
    return int(value)


def weeks(value: str, name: str) -> int:
    if not _LIMIT.fullmatch(value) or not 1 <= int(value) <= MAX_TREND_WEEKS:
        raise bad_request(f"{name} must be an integer from 1 to {MAX_TREND_WEEKS}; got {value!r}")
    return int(value)


def cursor(value: str, name: str) -> str:
    if not _CURSOR.fullmatch(value):
        raise bad_request(f"{name} is not one this API handed out", code="invalid_cursor")
    return value


def rfc3339(value: str, name: str) -> datetime:
    if not _RFC3339.fullmatch(value):
        raise bad_request(
            f"{name} must be an RFC 3339 time with an offset, like 2026-11-30T10:00:00Z; got {value!r}"
        )
    try:
        return datetime.fromisoformat(value.upper().replace(" ", "T")).astimezone(UTC)
    except (ValueError, OverflowError):
        raise bad_request(f"{name} is not a valid time: {value!r}") from None


def iso_week(value: str, name: str) -> str:
    try:
        parse_week(value)
    except NotAWeek:
        raise bad_request(f"{name} must be an ISO week like 2026-W48; got {value!r}") from None
    except NoSuchWeek:
        raise bad_request(f"{name} {value} does not exist") from None
    return value


def email(value: str, name: str) -> str:
    if not _EMAIL.fullmatch(value):
        raise bad_request(f"not an e-mail address: {value!r}", code="invalid_email")
    return value


# --- the parameter types endpoints declare ------------------------------------------------------

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT, pattern=SAFE_PATTERN), Parse(text)]
Time = Annotated[datetime, Parse(rfc3339)]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Page size."), Parse(limit)]
Cursor = Annotated[
    str, Field(pattern=CURSOR_PATTERN, description="next_cursor of the previous page."), Parse(cursor)
]
Week = Annotated[str, Field(pattern=WEEK_PATTERN), Parse(iso_week)]
Weeks = Annotated[
    int, Field(ge=1, le=MAX_TREND_WEEKS, description="How many weeks, ending with `week`."), Parse(weeks)
]
Email = Annotated[str, Field(pattern=EMAIL_PATTERN), Parse(email)]


@dataclass(frozen=True, slots=True)
class Nothing:
    """The inputs of an endpoint that reads none (probes, the document); its query is not looked at."""


# --- reading a request ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of an endpoint's inputs, in its path or its query string."""

    name: str
    in_path: bool
    read: Callable[[str, str], Any]
    later_than: str | None
    # A query parameter without a default (a path parameter always is there).
    required: bool = False


@dataclass(frozen=True, slots=True)
class BodyField:
    """The field of an endpoint's inputs that holds its body (JSON, or a form's fields)."""

    name: str
    model: type[BaseModel]
    form: bool = False

    @property
    def media(self) -> tuple[str, ...]:
        return FORM_TYPES if self.form else ("application/json",)


def _unwrap(hint: Any) -> tuple[Any, list[Any]]:
    """The type under `Annotated[...]` and `... | None` layers, and the metadata of every layer."""
    metadata: list[Any] = []
    while True:
        if typing.get_origin(hint) is Annotated:
            metadata.extend(hint.__metadata__)
            hint = hint.__origin__
        elif typing.get_origin(hint) in (Union, types.UnionType):
            others = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(others) != 1:
                raise TypeError(f"a parameter is one type or None, not {hint}")
            hint = others[0]
        else:
            return hint, metadata


def _field(name: str, hint: Any, in_path: bool, required: bool) -> Param | BodyField:
    base, metadata = _unwrap(hint)
    body = next((m for m in metadata if isinstance(m, Body)), None)
    if body is not None:
        return BodyField(name, base, body.form)
    reads = [m.read for m in metadata if isinstance(m, Parse)]
    if not reads and isinstance(base, type) and issubclass(base, enum.Enum):
        reads = [choice(base)]
    if not reads:
        raise TypeError(f"parameter {name}: its type names no Parse and is no enum")
    later = next((m.than for m in metadata if isinstance(m, Later)), None)
    return Param(name, in_path, reads[-1], later, required and not in_path)


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


class Inputs(Generic[P]):
    """The fields of one endpoint's inputs dataclass, ready to read requests to `path`: the
    parameters in their declared order, then the body (the view's 400s come in that order)."""

    def __init__(self, kind: type[P], path: str) -> None:
        self.kind = kind
        hints = typing.get_type_hints(kind, include_extras=True)
        in_path = set(re.findall(r"\{(\w+)\}", path))
        fields = [
            _field(f.name, hints[f.name], f.name in in_path, _required(f))
            for f in dataclasses.fields(kind)  # type: ignore[arg-type]
        ]
        self.params = [f for f in fields if isinstance(f, Param)]
        bodies = [f for f in fields if isinstance(f, BodyField)]
        if len(bodies) > 1:
            raise TypeError(f"{kind.__name__}: one body at most")
        self.body = bodies[0] if bodies else None
        self.query = [f.name for f in self.params if not f.in_path]
        self.strict = kind is not Nothing

    def read(self, request: web.Request) -> P:
        """The inputs of an endpoint without a body (a coroutine less on the hottest paths)."""
        return self.kind(**self._params(request))

    async def read_with_body(self, request: web.Request) -> P:
        """The parameters, then the body (so a bad parameter is refused before the body is read)."""
        values = self._params(request)
        if self.body is not None:
            read = form_body if self.body.form else json_body
            values[self.body.name] = await read(request, self.body.model)
        return self.kind(**values)

    def _params(self, request: web.Request) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if not self.strict:
            return values
        check_known(request.query, self.query)
        for param in self.params:
            raw = (request.match_info if param.in_path else request.query).get(param.name)
            if raw is None:
                if param.required:
                    raise bad_request(f"{param.name} is required")
                continue
            values[param.name] = value = param.read(raw, param.name)
            earlier = values.get(param.later_than) if param.later_than else None
            if earlier is not None and earlier >= value:
                raise bad_request(f"{param.later_than} must be earlier than {param.name}")
        return values


def check_known(query: MultiMapping[str], allowed: Collection[str]) -> None:
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        raise bad_request(
            f"unknown query parameter {unknown[0]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}"
        )
    for name in set(query):
        if len(query.getall(name)) > 1:
            raise bad_request(f"query parameter {name!r} given more than once")


async def json_body(request: web.Request, model: type[M]) -> M:
    raw = await bounded_body(request)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise _invalid_body(exc) from None


def _invalid_body(exc: ValidationError) -> ApiError:
    """The 400 for a body (JSON or form) its model refused: the first error, where it is."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return bad_request(f"{where}: {first['msg']}", code="invalid_body")


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
MAX_FORM_FIELDS = 32


async def form_body(request: web.Request, model: type[M]) -> M:
    """A form's fields, validated by `model` (each field a string): urlencoded or multipart, the
    way browsers and mail providers post (RFC 8058 posts `List-Unsubscribe=One-Click` either way)."""
    if request.content_type not in FORM_TYPES:
        raise bad_request(
            f"the body must be a form ({' or '.join(FORM_TYPES)}), not {request.content_type or 'none'}",
            code="invalid_body",
        )
    raw = await bounded_body(request)
    if request.content_type == FORM_TYPES[0]:
        fields = _urlencoded_fields(raw)
    else:
        fields = _multipart_fields(request.headers.get("Content-Type", ""), raw)
    names = [name for name, _ in fields]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise bad_request(f"form field {repeated!r} given more than once", code="invalid_body")
    try:
        return model.model_validate(dict(fields))
    except ValidationError as exc:
        raise _invalid_body(exc) from None


def _urlencoded_fields(raw: bytes) -> list[tuple[str, str]]:
    try:
        return urllib.parse.parse_qsl(
            raw.decode("ascii"),
            keep_blank_values=True,
            strict_parsing=bool(raw),
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise bad_request("the body is no urlencoded form", code="invalid_body") from None


def _multipart_fields(content_type: str, raw: bytes) -> list[tuple[str, str]]:
    """The fields of a multipart/form-data body, read by the standard library's MIME parser (the
    body is bounded already); a part without a name, or a file, is no field of a form we take."""
    parsed = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace") + raw
    )
    if not parsed.is_multipart() or parsed.defects:
        raise bad_request("the body is no multipart form", code="invalid_body")
    fields: list[tuple[str, str]] = []
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if (
            not isinstance(name, str)
            or part.get_param("filename", header="content-disposition") is not None
            or not isinstance(payload, bytes)
            or len(fields) >= MAX_FORM_FIELDS
        ):
            raise bad_request("the body is no multipart form of text fields", code="invalid_body")
        fields.append((name, payload.decode("utf-8", "replace")))
    return fields


async def bounded_body(request: web.Request, limit: int = MAX_BODY) -> bytes:
    """The whole body, refused (413) past `limit` bytes: by its Content-Length before reading, and
    while reading a chunked one, which announces no length. (One `read(n)` returns what has arrived
    so far, not necessarily the whole body: hence the loop.)"""
    too_large = ApiError(413, "payload_too_large", f"body over {limit} bytes")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    parts: list[bytes] = []
    size = 0
    while chunk := await request.content.read(limit + 1 - size):
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise too_large
    return b"".join(parts)


def json_object(raw: bytes | str, what: str = "a JSON object") -> dict[str, object]:
    """`raw` read as a JSON object, for the hooks that take a provider's payload as it comes (Slack's
    events and actions, Telegram's updates): 400 `invalid_body` when it is no JSON, or JSON that is
    not an object (the message names it `what`)."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("the body is not JSON", code="invalid_body") from None
    if not isinstance(document, dict):
        raise bad_request(f"the body is not {what}", code="invalid_body")
    return document


def provider_form(raw: bytes) -> dict[str, str] | None:
    """The fields of the form a chat provider posts (Slack's and Mattermost's slash commands,
    Slack's actions): UTF-8, blank values kept, at most 100 fields; None when it is no such form."""
    try:
        return dict(urllib.parse.parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=100))
    except (UnicodeDecodeError, ValueError):
        return None
