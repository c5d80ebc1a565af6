"""The Telegram section's self-service keys: bot username, updates mode, webhook and link secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from inno_notify.service.telegram_updates import link_key, webhook_secret
from inno_notify.settings import ConfigError, Settings, load_settings


def _load(tmp_path: Path, telegram: str, env: dict[str, str] | None = None) -> Settings:
    path = tmp_path / "config.yaml"
    path.write_text(f"channels:\n  telegram:\n{telegram}", encoding="utf-8")
    return load_settings(path, env or {})


def test_defaults_poll_and_link_nothing_until_a_bot_username_is_set() -> None:
    telegram = load_settings(None, {}).channels.telegram
    assert (telegram.bot_username, telegram.updates, telegram.link_ttl_hours) == (None, "polling", 72)


@pytest.mark.parametrize(
    ("yaml", "error"),
    [
        ("    bot_username: 'a b'\n", "not a Telegram username"),
        ("    bot_username: x\n", "not a Telegram username"),
        ("    updates: webhook\n", "needs webhook_url"),
        ("    updates: push\n", "updates"),
        ("    updates: webhook\n    webhook_url: ftp://x\n", r"not an http\(s\) URL"),
        ("    webhook_secret: 'has space'\n", "webhook_secret must be"),
        ("    link_ttl_hours: 0\n", "link_ttl_hours"),
        ("    link_secret_file: /nonexistent/inno\n", "cannot read link_secret_file"),
    ],
)
def test_bad_telegram_settings_are_one_line_errors(tmp_path: Path, yaml: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error) as caught:
        _load(tmp_path, yaml)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("webhook_secret_file", "has space", "webhook_secret must be"),
        ("link_secret_file", "", "link_secret is empty"),
    ],
)
def test_a_secret_from_a_file_is_checked_like_an_inline_one(
    tmp_path: Path, name: str, content: str, error: str
) -> None:
    """The files are read before the section's own checks run (the one `*_file` mechanism)."""
    (tmp_path / "secret").write_text(f"{content}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=error):
        _load(tmp_path, f"    {name}: {tmp_path / 'secret'}\n")


def test_secrets_come_from_files_or_from_the_bot_token(tmp_path: Path) -> None:
    (tmp_path / "webhook").write_text("hook_secret-1\n", encoding="utf-8")
    (tmp_path / "link").write_text("a long random link key\n", encoding="utf-8")
    settings = _load(
        tmp_path,
        f"    token: '1:abc'\n    bot_username: '@inno_notify_bot'\n"
        f"    webhook_secret_file: {tmp_path / 'webhook'}\n    link_secret_file: {tmp_path / 'link'}\n",
    )
    assert settings.channels.telegram.bot_username == "inno_notify_bot"
    assert webhook_secret(settings.channels.telegram) == "hook_secret-1"
    derived = _load(tmp_path, "    token: '1:abc'\n")
    other_bot = _load(tmp_path, "    token: '2:xyz'\n")
    keys = [link_key(s.channels.telegram) for s in (settings, derived, other_bot)]
    assert keys[0] != keys[1] != keys[2]
    assert webhook_secret(derived.channels.telegram) not in (None, "hook_secret-1", "1:abc")
    assert webhook_secret(derived.channels.telegram) != webhook_secret(other_bot.channels.telegram)
    assert "a long random" not in repr(settings)


def test_environment_overrides_reach_the_new_keys(tmp_path: Path) -> None:
    settings = _load(tmp_path, "    token: '1:abc'\n", {"INNO_NOTIFY_CHANNELS__TELEGRAM__UPDATES": "off"})
    assert settings.channels.telegram.updates == "off"
