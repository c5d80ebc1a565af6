"""The settings as domain values: the directory converted once, by field name, and the parser's config."""

from __future__ import annotations

from inno_notify.domain.model import DirectoryUser, Team
from inno_notify.runtime.configuration import directory, parse_config
from inno_notify.settings import Settings

SETTINGS = Settings.model_validate(
    {
        "cluster": "gpu-prod",
        "directory": {
            "users": [
                {"email": "Alice@Example.com", "name": "Alice", "slack_user_id": "U1", "channels": ["slack"]},
                {"email": "bob@example.com", "telegram_chat_id": 42, "channels": ["telegram", "email"]},
            ],
            "teams": [
                {
                    "name": "face",
                    "namespaces": ["face-research", "face-dev"],
                    "leads": ["lead@example.com"],
                    "digest_channels": ["slack"],
                    "slack_channel": "#face-gpu",
                    "notify_unowned": True,
                },
                {"name": "speech"},
            ],
            "default_team": "speech",
        },
    }
)


def test_the_directory_becomes_domain_users_and_teams() -> None:
    users, teams = directory(SETTINGS)
    assert users == [
        DirectoryUser("alice@example.com", "Alice", "U1", None, ("slack",)),
        DirectoryUser("bob@example.com", None, None, 42, ("telegram", "email")),
    ]
    assert teams == [
        Team("face", ("face-research", "face-dev"), ("lead@example.com",), ("slack",), "#face-gpu", True),
        Team("speech"),
    ]


def test_the_parser_config_comes_from_the_same_directory() -> None:
    config = parse_config(SETTINGS)
    assert config.cluster == "gpu-prod"
    assert config.namespace_teams == {"face-research": "face", "face-dev": "face"}
    assert config.default_team == "speech"
    assert set(config.user_aliases.values()) <= {"alice@example.com", "bob@example.com"}
