"""How the service writes its log: text for a person at a terminal, JSON lines for a log collector.

A container's log is read by machines (Loki, Elasticsearch, Cloud Logging), which want one JSON
object per line with the time, level, logger and message as fields, and the Kubernetes object a
line is about as a field of its own so that "everything about this job" is one query. A person
at a terminal wants the plain line. Both formats go through one formatter base that masks every
secret the configuration holds (tokens, passwords, the database password), wherever a library
might print it: a request URL with a bot token in its path, an exception that quotes a DSN.

Configured once per command by `configure_logging` from `log_level` and `log_format`
(CONTRACT.md §2); nothing here reads the environment or a global settings object.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO
from urllib.parse import quote

import orjson

from inno_notify.settings import Settings, secret_value, url_secrets

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
MASK = "***"
# Shorter values would mask ordinary words all over the log; no real token or password is this short.
MIN_SECRET_LENGTH = 4
# A Kubernetes object uid (RFC 4122 form), as log calls pass it among their arguments.
_UID = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
# Libraries whose INFO lines are per request (httpx logs every URL, and a Telegram URL holds the
# bot token in its path) or per migration step: below DEBUG, our own lines say what matters.
QUIET_LOGGERS = ("alembic", "httpx")


def secret_values(settings: Settings) -> list[str]:
    """Every secret the settings hold, as it could appear in a log line (raw and URL-quoted)."""
    channels = settings.channels
    found = [
        secret_value(channels.telegram.token),
        secret_value(channels.slack.token),
        secret_value(channels.email.password),
    ]
    # Every form of the database's passwords: in the user-info (even holding `/` or `@`, where
    # urllib's split misses it) and in the query (`?password=`, `sslpassword=`).
    found += url_secrets(settings.database_url)
    values = {v for v in found if v}
    values |= {quote(v, safe="") for v in values}
    # Longest first, so that a secret containing another is masked whole.
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


class _Masking:
    """Replaces each secret by `***` in a finished piece of log text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = tuple(secrets)

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


class TextFormatter(logging.Formatter):
    """The classic one-line format, with secrets masked."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__(TEXT_FORMAT)
        self._masking = _Masking(secrets)

    def format(self, record: logging.LogRecord) -> str:
        return self._masking.mask(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and when the record
    is about one object, `job_uid` (passed as `extra={"job_uid": …}` or through `job_logger`) or
    `uid` (a Kubernetes uid found among the call's arguments); `exception` holds a traceback."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._masking = _Masking(secrets)

    def format(self, record: logging.LogRecord) -> str:
        mask = self._masking.mask
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask(record.getMessage()),
        }
        job_uid = getattr(record, "job_uid", None)
        if job_uid:
            entry["job_uid"] = str(job_uid)
        else:
            uid = _uid_among(record.args)
            if uid is not None:
                entry["uid"] = uid
        if record.exc_info:
            entry["exception"] = mask(self.formatException(record.exc_info))
        elif record.exc_text:
            entry["exception"] = mask(record.exc_text)
        if record.stack_info:
            entry["stack"] = mask(self.formatStack(record.stack_info))
        return orjson.dumps(entry, default=str).decode()


def _uid_among(args: Any) -> str | None:
    values = args.values() if isinstance(args, Mapping) else args if isinstance(args, tuple) else ()
    for value in values:
        if isinstance(value, str) and _UID.match(value):
            return value
    return None


def job_logger(logger: logging.Logger, job_uid: str) -> logging.LoggerAdapter[logging.Logger]:
    """A logger whose every line carries `job_uid` (a field of its own in JSON logs)."""
    return logging.LoggerAdapter(logger, {"job_uid": job_uid})


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler configure_logging installed, so that a second call replaces only it."""


def configure_logging(
    level: str, fmt: str = "text", secrets: Iterable[str] = (), stream: TextIO | None = None
) -> None:
    """Puts one handler on the root logger, writing to `stream` (stderr) in the chosen format;
    called again (once the settings are read), it replaces the one it put there before."""
    handler = _OurHandler(stream if stream is not None else sys.stderr)
    secret_list = list(secrets)
    handler.setFormatter(JsonFormatter(secret_list) if fmt == "json" else TextFormatter(secret_list))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
