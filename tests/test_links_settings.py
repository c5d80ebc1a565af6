"""The `links` section (CONTRACT.md §2): defaults, the signing key from its file, the older name."""

from __future__ import annotations

from pathlib import Path

import pytest

from inno_notify.settings import ConfigError, load_settings


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_contract() -> None:
    s = load_settings(None, {})
    assert s.links.public_url is None and s.links.secret_file is None and s.links.key is None
    assert s.links.ttl_days == 30 and s.links.grafana_url_template is None
    assert s.public_url is None


def test_the_key_is_read_from_its_file_and_never_printed(tmp_path: Path) -> None:
    key = write(tmp_path, "a-very-secret-link-signing-key\n", "link-key")
    s = load_settings(
        write(tmp_path, f"links: {{public_url: 'https://inno.example.org', secret_file: {key}}}\n"), {}
    )
    assert s.links.key == b"a-very-secret-link-signing-key"
    printed = repr(s) + str(s) + repr(s.links) + str(s.model_dump())
    assert "a-very-secret" not in printed


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("links: {secret_file: KEY}\n", "the key has 5 bytes, at least 16 are needed"),
        ("links: {secret_file: /no/such/file}\n", "links: cannot read secret_file"),
        ("links: {public_url: 'inno.example.org'}\n", "links.public_url: must be an http(s) URL"),
        ("links: {ttl_days: 0}\n", "links.ttl_days: Input should be greater than 0"),
        ("links: {dashboard_url: 'https://x'}\n", "links.dashboard_url: unknown key"),
    ],
)
def test_bad_links_settings_are_one_line(tmp_path: Path, yaml_text: str, expected: str) -> None:
    short = write(tmp_path, "short", "short-key")
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, yaml_text.replace("KEY", str(short))), {})
    assert "\n" not in str(info.value) and expected in str(info.value)


def test_notify_dashboard_url_is_the_older_name_of_links_public_url(tmp_path: Path) -> None:
    old = load_settings(write(tmp_path, "notify: {dashboard_url: 'https://old.example.org'}\n"), {})
    assert old.public_url == "https://old.example.org"
    both = load_settings(
        write(tmp_path, "notify: {dashboard_url: 'https://old'}\nlinks: {public_url: 'https://new'}\n"), {}
    )
    assert both.public_url == "https://new"
    from_env = load_settings(None, {"INNO_NOTIFY_LINKS__PUBLIC_URL": "https://env.example.org"})
    assert from_env.public_url == "https://env.example.org"
