"""Log formats: JSON lines with the object a line is about, text lines, and secrets masked in both."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from inno_notify import logs
from inno_notify.logs import configure_logging, job_logger, secret_values
from inno_notify.settings import load_settings

JOB_UID = "0b3f2e9c-1a2b-4c3d-8e9f-0123456789ab"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    yield out
    for handler in [h for h in root.handlers if isinstance(h, logs._OurHandler)]:
        root.removeHandler(handler)
    root.setLevel(level)


def test_json_lines_carry_time_level_logger_message(stream: io.StringIO) -> None:
    configure_logging("INFO", "json", stream=stream)
    logging.getLogger("inno_notify.test").info("planned %d digest message(s) for %s", 3, "2026-W48")
    logging.getLogger("inno_notify.test").debug("below the level")
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["level"] == "INFO" and entry["logger"] == "inno_notify.test"
    assert entry["message"] == "planned 3 digest message(s) for 2026-W48"
    assert entry["time"].endswith("+00:00") and "T" in entry["time"]
    assert "job_uid" not in entry and "uid" not in entry


@pytest.mark.parametrize(
    ("call", "field", "value"),
    [
        (lambda log: job_logger(log, JOB_UID).info("summary planned"), "job_uid", JOB_UID),
        (lambda log: log.warning("sent", extra={"job_uid": JOB_UID}), "job_uid", JOB_UID),
        # How call sites pass a uid today: among the arguments (e.g. "skipping %s %s: %s").
        (lambda log: log.warning("skipping %s %s: %s", "Pod", JOB_UID, "bad"), "uid", JOB_UID),
    ],
)
def test_json_lines_name_the_object_they_are_about(
    stream: io.StringIO, call: object, field: str, value: str
) -> None:
    configure_logging("INFO", "json", stream=stream)
    call(logging.getLogger("inno_notify.test"))  # type: ignore[operator]
    assert json.loads(stream.getvalue())[field] == value


def test_an_exception_is_one_line_too(stream: io.StringIO) -> None:
    configure_logging("INFO", "json", stream=stream)
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        logging.getLogger("inno_notify.test").exception("round failed")
    (line,) = stream.getvalue().splitlines()
    assert "RuntimeError: boom\nsecond line" in json.loads(line)["exception"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_every_configured_secret_is_masked(stream: io.StringIO, tmp_path: Path, fmt: str) -> None:
    (tmp_path / "pw").write_text("p@ss/word-7\n")
    (tmp_path / "config.yaml").write_text(
        "database_url: postgresql+asyncpg://inno@db/inno\n"
        f"database_password_file: {tmp_path / 'pw'}\n"
        "channels:\n"
        "  telegram: {token: '123:tg-secret-value'}\n"
        "  slack: {token: xoxb-slack-secret}\n"
        "  email: {host: mx, password: smtp-secret-value}\n"
    )
    settings = load_settings(tmp_path / "config.yaml", {})
    configure_logging("INFO", fmt, secret_values(settings), stream=stream)
    log = logging.getLogger("inno_notify.test")
    log.info("GET https://api.telegram.org/bot123:tg-secret-value/sendMessage")
    log.info("token %s and %s", "xoxb-slack-secret", "smtp-secret-value")
    log.info("connect %s", settings.database_url)  # the password URL-quoted
    log.info("raw password p@ss/word-7")
    try:
        raise ValueError("login failed for smtp-secret-value")
    except ValueError:
        log.exception("send failed")
    out = stream.getvalue()
    for secret in (
        "tg-secret-value",
        "xoxb-slack-secret",
        "smtp-secret-value",
        "p@ss/word-7",
        "p%40ss%2Fword-7",
    ):
        assert secret not in out
    assert out.count("***") >= 6


def test_short_values_are_not_masked_everywhere() -> None:
    settings = load_settings(None, {"INNO_NOTIFY_CHANNELS__EMAIL__PASSWORD": "ab"})
    assert secret_values(settings) == []


def test_a_second_configuration_replaces_only_its_own_handler(stream: io.StringIO) -> None:
    foreign = logging.StreamHandler(io.StringIO())
    root = logging.getLogger()
    root.addHandler(foreign)
    try:
        configure_logging("INFO", "text", stream=io.StringIO())
        configure_logging("INFO", "json", stream=stream)
        ours = [h for h in root.handlers if h is not foreign and getattr(h, "stream", None) is stream]
        assert foreign in root.handlers and len(ours) == 1
    finally:
        root.removeHandler(foreign)


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("postgresql+asyncpg://inno:s3cr/et-pw@db/inno", "s3cr/et-pw"),  # urllib's split misses it
        ("postgresql+asyncpg://inno:s3cr%2Fet-pw@db/inno", "s3cr/et-pw"),
        ("postgresql+asyncpg://inno@db/inno?password=s3cret-pw", "s3cret-pw"),
        ("postgresql+asyncpg://inno@db/inno?ssl=require&sslpassword=s3cret-pw", "s3cret-pw"),
        ("postgresql+asyncpg://inno:s3cr@et-pw@db/inno", "s3cr@et-pw"),
    ],
)
def test_every_form_of_a_database_password_is_masked(stream: io.StringIO, url: str, password: str) -> None:
    settings = load_settings(None, {"INNO_NOTIFY_DATABASE_URL": url})
    configure_logging("INFO", "text", secret_values(settings), stream=stream)
    log = logging.getLogger("inno_notify.test")
    log.info("connect %s", settings.database_url)
    log.info("login with %s refused", password)
    # SQLAlchemy takes the password up to its first `@`: the rest becomes the start of the host.
    log.info("cannot resolve host %s", make_url(url).host)
    out = stream.getvalue()
    assert password not in out and "s3cr" not in out, out
