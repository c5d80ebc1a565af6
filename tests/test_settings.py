"""Settings: defaults of CONTRACT.md §2, environment overrides, secret files, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from inno_notify import config_docs
from inno_notify.commands.check import check_database
from inno_notify.settings import (
    ConfigError,
    load_settings,
    redact_secrets_of_url,
    redact_url,
    resolve_config_path,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_contract() -> None:
    s = load_settings(None, {})
    assert s.database_url == "sqlite+aiosqlite:///inno-notify.db"
    assert s.cluster == "default"
    assert s.kubernetes.namespaces == ()
    assert s.kubernetes.kueue == "auto"
    assert s.kubernetes.catch_up_seconds == 3600
    assert s.prometheus.url == "http://prometheus:9090"
    assert s.prometheus.metrics_delay_seconds == 60
    assert s.prometheus.timeout_seconds == 30
    assert s.prometheus.give_up_after_seconds == 1800
    assert s.accounting.gpu_resources == {"nvidia.com/gpu": 1.0}
    assert s.rightsizing.idle_gpu_util_percent == 5
    assert s.rightsizing.headroom == 1.2
    assert s.rightsizing.min_memory_waste_gib == 8
    assert s.rightsizing.family_min_runs == 3
    assert s.notify.group_wait_seconds == 30
    assert s.notify.give_up_after_seconds == 86400
    assert s.channels.telegram.api_url == "https://api.telegram.org"
    assert s.channels.slack.api_url == "https://slack.com/api/"
    assert s.channels.email.port == 587 and s.channels.email.starttls and not s.channels.email.tls
    assert s.directory.owner_keys == ("inno-notify/owner",)
    assert s.digest.schedule == "0 8 * * MON" and s.digest.timezone == "UTC"
    assert s.live.idle_minutes == 60 and s.live.repeat_hours == 24
    assert s.agent.interval_seconds == 15 and s.agent.listen == "0.0.0.0:9401"
    assert s.api.listen == "127.0.0.1:8080" and s.api.tokens == ()


def test_contract_example_file_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
database_url: postgresql+asyncpg://inno:pw@db/inno
cluster: gpu-prod
kubernetes: {namespaces: [face-research], kueue: true}
accounting:
  gpu_resources: {nvidia.com/gpu: 1.0, nvidia.com/mig-1g.10gb: 0.142857}
directory:
  users:
    - email: Alice@Example.com
      name: Alice
      slack_user_id: U0123
      telegram_chat_id: 123456789
      channels: [slack, email]
  teams:
    - name: face
      namespaces: [face-research]
      leads: [lead@example.com]
      digest_channels: [email]
      slack_channel: "#face-gpu"
      notify_unowned: false
api:
  tokens:
    - {name: ops, sha256: "%s", role: admin}
"""
        % ("ab" * 32),
    )
    s = load_settings(path, {})
    assert s.cluster == "gpu-prod"
    assert s.kubernetes.kueue is True
    assert s.accounting.gpu_resources["nvidia.com/mig-1g.10gb"] == pytest.approx(0.142857)
    assert s.directory.users[0].email == "alice@example.com"
    assert s.directory.users[0].channels == ("slack", "email")
    assert s.directory.teams[0].slack_channel == "#face-gpu"
    assert s.api.tokens[0].role == "admin"


def test_environment_overrides_scalars_with_yaml_typing(tmp_path: Path) -> None:
    path = write(tmp_path, "prometheus: {url: http://a:9090, timeout_seconds: 5}\n")
    s = load_settings(
        path,
        {
            "INNO_NOTIFY_PROMETHEUS__URL": "http://b:9090",
            "INNO_NOTIFY_NOTIFY__GROUP_WAIT_SECONDS": "7",
            "INNO_NOTIFY_CHANNELS__EMAIL__STARTTLS": "false",
            "INNO_NOTIFY_NOTIFY__DASHBOARD_URL": "null",
            "INNO_NOTIFY_CONFIG": "/ignored/here.yaml",
            "UNRELATED": "x",
        },
    )
    assert s.prometheus.url == "http://b:9090"
    assert s.prometheus.timeout_seconds == 5
    assert s.notify.group_wait_seconds == 7
    assert s.channels.email.starttls is False
    assert s.notify.dashboard_url is None


def test_secret_files_are_read_and_never_printed(tmp_path: Path) -> None:
    token = write(tmp_path, "xoxb-very-secret\n", "slack-token")
    password = write(tmp_path, "smtp-secret\n", "smtp-password")
    path = write(
        tmp_path,
        f"channels:\n  slack: {{token_file: {token}}}\n  email: {{host: mx, password_file: {password}}}\n"
        "  telegram: {token: '123:tg-secret'}\n"
        "database_url: postgresql+asyncpg://u:db-secret@h/db\n",
    )
    s = load_settings(path, {})
    assert s.channels.slack.token is not None
    assert s.channels.slack.token.get_secret_value() == "xoxb-very-secret"
    assert s.channels.email.password is not None
    assert s.channels.email.password.get_secret_value() == "smtp-secret"
    printed = repr(s) + str(s) + repr(s.channels) + s.database_url_redacted
    for secret in ("xoxb-very-secret", "smtp-secret", "tg-secret", "db-secret"):
        assert secret not in printed


@pytest.mark.parametrize(
    ("section", "file_key", "secret_key", "content"),
    [
        ("telegram", "token_file", "token", "123:tg-secret"),
        ("telegram", "webhook_secret_file", "webhook_secret", "hook_secret-1"),
        ("telegram", "link_secret_file", "link_secret", "a-long-link-signing-secret"),
        ("slack", "token_file", "token", "xoxb-very-secret"),
        ("slack", "app_token_file", "app_token", "xapp-1-very-secret"),
        ("slack", "signing_secret_file", "signing_secret", "8f742231b10e8888abcd99yyyzzz85a5"),
        ("email", "password_file", "password", "smtp-secret"),
        ("webhook", "secret_file", "secret", "webhook-signing-secret"),
        ("mattermost", "token_file", "token", "mm-bot-token"),
    ],
)
def test_every_secret_file_fills_its_secret(
    tmp_path: Path, section: str, file_key: str, secret_key: str, content: str
) -> None:
    secret = write(tmp_path, f"{content}\n", "secret")
    s = load_settings(write(tmp_path, f"channels: {{{section}: {{{file_key}: {secret}}}}}\n"), {})
    value = getattr(getattr(s.channels, section), secret_key)
    assert value is not None and value.get_secret_value() == content
    assert content not in repr(s)


def test_the_mattermost_command_token_file_fills_it(tmp_path: Path) -> None:
    # The command needs the server and the bot (to find who typed it), so not alone like the others.
    secret = write(tmp_path, "xr3j5x3p4pfjpfd3t5fs9ewzkr\n", "secret")
    bot = write(tmp_path, "mm-bot-token\n", "bot")
    s = load_settings(
        write(
            tmp_path,
            "channels: {mattermost: {url: 'https://mm.example.org', "
            f"token_file: {bot}, command_token_file: {secret}}}}}\n",
        ),
        {},
    )
    value = s.channels.mattermost.command_token
    assert value is not None and value.get_secret_value() == "xr3j5x3p4pfjpfd3t5fs9ewzkr"
    assert "xr3j5x3p4pfjpfd3t5fs9ewzkr" not in repr(s)


def test_every_file_key_beside_a_secret_is_marked() -> None:
    """A `*_file` key next to the secret key it fills must use the one mechanism (`Fills`); the
    link key and the database URL and password post-process their files and are tested apart."""
    from inno_notify.settings import Fills, Settings, section_keys

    def sections(model: type[BaseModel]) -> list[type[BaseModel]]:
        found = [model]
        for info in model.model_fields.values():
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
                found += sections(info.annotation)
        return found

    marked = set()
    for model in sections(Settings):
        keys = section_keys(model) or {}
        for name, info in model.model_fields.items():
            target = name.removesuffix("_file")
            if name.endswith("_file") and keys.get(target) == SecretStr | None:
                assert [m for m in info.metadata if isinstance(m, Fills)] == [Fills(target)], name
                marked.add(f"{model.__name__}.{name}")
    assert marked == {
        "TelegramSettings.token_file",
        "TelegramSettings.webhook_secret_file",
        "SlackSettings.token_file",
        "SlackSettings.app_token_file",
        "SlackSettings.signing_secret_file",
        "EmailSettings.password_file",
        "MattermostSettings.token_file",
        "MattermostSettings.command_token_file",
        "WebhookSettings.secret_file",
        "TelegramSettings.link_secret_file",
    }


@pytest.mark.parametrize(
    ("yaml_text", "env", "expected"),
    [
        ("prometheus: {urll: x}\n", {}, "prometheus.urll: unknown key"),
        ("nonsense: 1\n", {}, "nonsense: unknown key"),
        ("prometheus: {timeout_seconds: soon}\n", {}, "prometheus.timeout_seconds: Input should be a valid"),
        ("notify: {group_wait_seconds: -1}\n", {}, "notify.group_wait_seconds: Input should be greater"),
        ("kubernetes: {kueue: maybe}\n", {}, "kubernetes.kueue"),
        ("digest: {schedule: 'every monday'}\n", {}, "digest.schedule: not a cron expression"),
        ("digest: {timezone: Mars/Olympus}\n", {}, "digest.timezone: unknown time zone"),
        ("database_url: mysql://x\n", {}, "database_url: must start with"),
        ("api: {tokens: [{name: a, sha256: plain-token}]}\n", {}, "api.tokens.0.sha256: must be the 64 hex"),
        ("directory: {users: [{email: nobody}]}\n", {}, "directory.users.0.email: not an e-mail"),
        ("directory: {users: [{email: a@x}, {email: A@x}]}\n", {}, "duplicate directory.users email: a@x"),
        ("channels: {slack: {token_file: /no/such/file}}\n", {}, "channels.slack: cannot read token_file"),
        ("api: {listen: 'not an address'}\n", {}, "api.listen"),
        # A List-Unsubscribe URI that could end the header or split the list of URIs in it.
        (
            "channels: {email: {list_unsubscribe: 'mailto:a@x, <b@y>'}}\n",
            {},
            "channels.email.list_unsubscribe",
        ),
        ("channels: {email: {list_unsubscribe: 'javascript:x'}}\n", {}, "channels.email.list_unsubscribe"),
        (
            "channels: {webhook: {url: 'https://hook.example.org/'}}\n",
            {},
            "channels.webhook: webhook url needs a secret",
        ),
        ("channels: {webhook: {url: 'hook.example.org', secret: s}}\n", {}, "channels.webhook.url"),
        (
            "channels: {mattermost: {url: 'https://mm.example.org'}}\n",
            {},
            "channels.mattermost: mattermost url needs",
        ),
        (
            "channels: {mattermost: {command_token: t}}\n",
            {},
            "channels.mattermost: mattermost command_token needs url and token",
        ),
        (
            "channels: {mattermost: {url: 'https://mm.example.org', token: b, command_token: ''}}\n",
            {},
            "channels.mattermost: mattermost command_token is empty",
        ),
        ("directory: {users: [{email: a@x, channels: [webhook]}]}\n", {}, "directory.users.0.channels.0"),
        ("- a list\n", {}, "the top level must be a mapping"),
        ("prometheus: {url: [\n", {}, "invalid YAML at line"),
        (
            "",
            {"INNO_NOTIFY_PROMETHEUS__NOPE": "1"},
            "INNO_NOTIFY_PROMETHEUS__NOPE: unknown key 'prometheus.nope'",
        ),
        ("", {"INNO_NOTIFY_PROMETHEUS": "x"}, "'prometheus' is a section, not a scalar key"),
        ("", {"INNO_NOTIFY_CLUSTER__NAME": "x"}, "'cluster' has no sub-keys"),
        ("", {"INNO_NOTIFY_PROMETHEUS__TIMEOUT_SECONDS": "abc"}, "(with environment overrides)"),
    ],
)
def test_bad_configuration_is_one_line_naming_file_and_key(
    tmp_path: Path, yaml_text: str, env: dict[str, str], expected: str
) -> None:
    path = write(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as info:
        load_settings(path, env)
    message = str(info.value)
    assert "\n" not in message
    assert expected in message
    if not env:
        assert message.startswith(str(path))


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_settings(tmp_path / "missing.yaml", {})


def test_config_path_resolution() -> None:
    assert resolve_config_path("a.yaml", {"INNO_NOTIFY_CONFIG": "b.yaml"}) == Path("a.yaml")
    assert resolve_config_path(None, {"INNO_NOTIFY_CONFIG": "b.yaml"}) == Path("b.yaml")
    assert resolve_config_path(None, {}) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+asyncpg://u:pw@h:5432/db", "postgresql+asyncpg://u:***@h:5432/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+asyncpg://u@h:5432/db", "postgresql+asyncpg://u@h:5432/db"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("sqlite+aiosqlite:////var/lib/inno@notify/x.db", "sqlite+aiosqlite:////var/lib/inno@notify/x.db"),
        # A password may hold what ends other URL parts: SQLAlchemy takes it up to the first `@`.
        ("postgresql+asyncpg://u:pa/ss@h/db", "postgresql+asyncpg://u:***@h/db"),
        ("postgresql+asyncpg://u:p?ss@h/db?ssl=require", "postgresql+asyncpg://u:***@h/db?ssl=require"),
        ("postgresql+asyncpg://u:p#ss@h/db", "postgresql+asyncpg://u:***@h/db"),
        ("postgresql+asyncpg://u:p:ss@h/db", "postgresql+asyncpg://u:***@h/db"),
        ("postgresql+asyncpg://:pw@h/db", "postgresql+asyncpg://:***@h/db"),
        # Unencoded `@` in it: masked up to the last one, not the first.
        ("postgresql+asyncpg://u:p@ss@h:5432/db", "postgresql+asyncpg://u:***@h:5432/db"),
        # Percent-encoded: masked whole.
        ("postgresql+asyncpg://u:p%40s%2Fs@h/db", "postgresql+asyncpg://u:***@h/db"),
        # In the query, under any name that says secret, encoded or not.
        ("postgresql+asyncpg://u@h/db?password=pw&ssl=1", "postgresql+asyncpg://u@h/db?password=***&ssl=1"),
        (
            "postgresql+asyncpg://u@h/db?ssl=1&password=p%2Fw",
            "postgresql+asyncpg://u@h/db?ssl=1&password=***",
        ),
        ("postgresql+asyncpg://u@h/db?sslpassword=pw", "postgresql+asyncpg://u@h/db?sslpassword=***"),
        ("postgresql+asyncpg://u@h/db?PASSWORD=pw", "postgresql+asyncpg://u@h/db?PASSWORD=***"),
        ("postgresql+asyncpg://u@h/db?pass%77ord=pw", "postgresql+asyncpg://u@h/db?pass%77ord=***"),
        ("postgresql+asyncpg://u@h/db?x=1;password=a=b", "postgresql+asyncpg://u@h/db?x=1;password=***"),
        ("postgresql+asyncpg://u:pw@h/db?password=pw2", "postgresql+asyncpg://u:***@h/db?password=***"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize(
    ("url", "text", "expected"),
    [
        # SQLAlchemy splits "p@ss-word" at its `@`: the rest reads as the start of the host name.
        (
            "postgresql+asyncpg://u:p@ss-word@h/db",
            "cannot resolve ss-word@h",
            "cannot resolve ***@h",
        ),
        ("postgresql+asyncpg://u:s3cr%2Fet@h/db", "auth with s3cr/et failed", "auth with *** failed"),
        ("postgresql+asyncpg://u:s3cr%2Fet@h/db", "auth with s3cr%2Fet failed", "auth with *** failed"),
        ("postgresql+asyncpg://u@h/db?password=s3cret", "bad s3cret", "bad ***"),
        (
            "postgresql+asyncpg://u:s3cret@h/db",
            "at postgresql+asyncpg://v:other@h2/db",
            "at postgresql+asyncpg://v:***@h2/db",
        ),
        ("postgresql+asyncpg://u:pw@h/db", "port 5432 refused", "port 5432 refused"),
    ],
)
def test_redact_secrets_of_url(url: str, text: str, expected: str) -> None:
    assert redact_secrets_of_url(text, url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://u:s3cr/et@127.0.0.1:9/x",
        "postgresql+asyncpg://u:s3cr%2Fet@127.0.0.1:9/x",
        "postgresql+asyncpg://u@127.0.0.1:9/x?password=s3cr/et",
        "postgresql+asyncpg://u:s3cr@et@127.0.0.1:9/x",
        "postgresql+asyncpg://u:s3cr/et@127.0.0.1:port/x",
    ],
)
async def test_check_never_shows_a_database_password(url: str) -> None:
    result = await check_database(load_settings(None, {"INNO_NOTIFY_DATABASE_URL": url}))
    assert not result.ok
    for piece in ("s3cr", "et@", "%2Fet"):
        assert piece not in result.detail, result.detail


def test_configuration_reference_is_generated_from_the_models() -> None:
    assert DOCS.read_text(encoding="utf-8") == config_docs.render(), (
        "docs/configuration.md is stale: run `make docs`"
    )


def test_configuration_reference_names_every_scalar_key() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for key in ("database_url", "prometheus.url", "channels.email.password_file", "api.tokens[].sha256"):
        assert f"| `{key}` |" in text
    assert config_docs.env_name("prometheus.url") == "INNO_NOTIFY_PROMETHEUS__URL"


def test_rightsizing_section_is_the_domain_policy(tmp_path: Path) -> None:
    from inno_notify.domain.rightsizing import RightsizingPolicy

    assert load_settings(None, {}).rightsizing == RightsizingPolicy()
    path = tmp_path / "c.yaml"
    path.write_text("rightsizing: {headroom: 1.5, min_samples: 20}\n")
    policy = load_settings(path, {"INNO_NOTIFY_RIGHTSIZING__FAMILY_MIN_RUNS": "4"}).rightsizing
    assert policy == RightsizingPolicy(headroom=1.5, min_samples=20, family_min_runs=4)


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("rightsizing: {nope: 1}\n", "rightsizing.nope: unknown key"),
        ("rightsizing: {headroom: x}\n", "rightsizing.headroom: Input should be a valid number"),
        ("rightsizing: {min_samples: 1.5}\n", "rightsizing.min_samples: Input should be a valid integer"),
        ("rightsizing: {headroom: 0.5}\n", "rightsizing.headroom: must be at least 1, got 0.5"),
        ("rightsizing: {min_samples: -1}\n", "rightsizing.min_samples: must not be negative, got -1"),
        ("rightsizing: {warning_gpu_minutes: 900}\n", "warning_gpu_minutes <= critical_gpu_minutes"),
        ("rightsizing: 3\n", "rightsizing: "),
    ],
)
def test_rightsizing_section_rejects(tmp_path: Path, yaml_text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


# --- settings for containers: probes, logging, database secrets from files, environment variables ---

ROOT = Path(__file__).resolve().parents[1]


def test_container_settings_defaults() -> None:
    s = load_settings(None, {})
    assert s.probes.listen == "0.0.0.0:8081"
    assert (s.log_level, s.log_format) == ("INFO", "text")
    assert s.database_url_file is None and s.database_password_file is None


def test_database_url_from_a_file_replaces_the_inline_one(tmp_path: Path) -> None:
    url_file = write(tmp_path, "postgresql+asyncpg://inno:from-file@db:5432/inno\n", "database-url")
    s = load_settings(None, {"INNO_NOTIFY_DATABASE_URL_FILE": str(url_file)})
    assert s.database_url == "postgresql+asyncpg://inno:from-file@db:5432/inno"
    assert "from-file" not in s.database_url_redacted + repr(s)


@pytest.mark.parametrize(
    ("url", "password", "expected"),
    [
        ("postgresql+asyncpg://inno@db/inno", "pw", "postgresql+asyncpg://inno:pw@db/inno"),
        ("postgresql+asyncpg://inno:old@db:5432/inno?ssl=require", "new", "postgresql+asyncpg://inno:new@db:5432/inno?ssl=require"),
        # Characters that mean something in a URL are quoted, and the driver unquotes them.
        ("postgresql+asyncpg://inno@db/inno", "p@ss/w:rd %", "postgresql+asyncpg://inno:p%40ss%2Fw%3Ard%20%25@db/inno"),
    ],
)  # fmt: skip
def test_database_password_from_a_file_is_merged_into_the_url(
    tmp_path: Path, url: str, password: str, expected: str
) -> None:
    from sqlalchemy.engine import make_url

    pw_file = write(tmp_path, password + "\n", "database-password")
    path = write(tmp_path, f"database_url: '{url}'\ndatabase_password_file: {pw_file}\n")
    s = load_settings(path, {})
    assert s.database_url == expected
    assert make_url(s.database_url).password == password


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("database_url_file: /no/such/file\n", "cannot read database_url_file '/no/such/file'"),
        ("database_password_file: /no/such/file\n", "cannot read database_password_file '/no/such/file'"),
        ("database_password_file: {pw}\n", "database_password_file needs a user name in database_url"),
        ("database_url: 'postgresql+asyncpg://db/x'\ndatabase_password_file: {pw}\n", "needs a user name"),
        ("database_url_file: {pw}\n", "database_url_file '{pw}': must start with sqlite+aiosqlite://"),
        (
            "log_level: verbose\n",
            "log_level: Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'",
        ),
        ("log_format: yaml\n", "log_format: Input should be 'text' or 'json'"),
        ("probes: {listen: ''}\n", "probes.listen: String should match pattern"),
    ],
)
def test_bad_container_settings_are_one_line(tmp_path: Path, yaml_text: str, expected: str) -> None:
    pw = write(tmp_path, "secret-pw\n", "pw")
    path = write(tmp_path, yaml_text.replace("{pw}", str(pw)))
    with pytest.raises(ConfigError) as info:
        load_settings(path, {})
    assert expected.replace("{pw}", str(pw)) in str(info.value) and "\n" not in str(info.value)
    assert "secret-pw" not in str(info.value)


def _documented_scalar_keys() -> list[tuple[str, object]]:
    """(key, default) of every row of docs/configuration.md an environment variable can set."""
    import json
    import re

    rows = []
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        # The type column escapes its own bars: `string \| null`.
        match = re.match(r"^\| `([a-z0-9_.]+)` \| ((?:[^|\\]|\\\|)+) \| `(.+?)` \|", line)
        if match and not match[2].startswith(("list of", "map ")):
            rows.append((match[1], json.loads(match[3])))
    return rows


@pytest.mark.parametrize(("key", "default"), _documented_scalar_keys())
def test_every_documented_key_can_be_set_from_the_environment(key: str, default: object) -> None:
    import json

    name = config_docs.env_name(key)
    s = load_settings(None, {name: json.dumps(default)})  # a JSON scalar is a YAML scalar
    value: object = s
    for part in key.split("."):
        value = getattr(value, part)
    assert value == default, name


@pytest.mark.parametrize(
    ("name", "value", "key", "expected"),
    [
        ("INNO_NOTIFY_LOG_LEVEL", "debug", "log_level", "DEBUG"),
        ("INNO_NOTIFY_LOG_FORMAT", "json", "log_format", "json"),
        ("INNO_NOTIFY_PROBES__LISTEN", "127.0.0.1:9081", "probes.listen", "127.0.0.1:9081"),
        ("INNO_NOTIFY_API__LISTEN", "0.0.0.0:8080", "api.listen", "0.0.0.0:8080"),
        (
            "INNO_NOTIFY_DATABASE_URL",
            "postgresql+asyncpg://u@h/d",
            "database_url",
            "postgresql+asyncpg://u@h/d",
        ),
        ("INNO_NOTIFY_CLUSTER", "gpu-prod", "cluster", "gpu-prod"),
        ("INNO_NOTIFY_PROMETHEUS__URL", "http://thanos:10902", "prometheus.url", "http://thanos:10902"),
        ("INNO_NOTIFY_KUBERNETES__KUEUE", "false", "kubernetes.kueue", False),
    ],
)
def test_environment_variables_of_the_manifests_and_docs(
    name: str, value: str, key: str, expected: object
) -> None:
    s: object = load_settings(None, {name: value})
    for part in key.split("."):
        s = getattr(s, part)
    assert s == expected


def test_secret_files_named_by_environment_variables(tmp_path: Path) -> None:
    files = {name: write(tmp_path, f"{name}-value\n", name) for name in ("url", "tg", "slack", "smtp")}
    s = load_settings(
        None,
        {
            "INNO_NOTIFY_DATABASE_URL_FILE": str(write(tmp_path, "postgresql+asyncpg://u:p@h/d\n", "url")),
            "INNO_NOTIFY_CHANNELS__TELEGRAM__TOKEN_FILE": str(files["tg"]),
            "INNO_NOTIFY_CHANNELS__SLACK__TOKEN_FILE": str(files["slack"]),
            "INNO_NOTIFY_CHANNELS__EMAIL__PASSWORD_FILE": str(files["smtp"]),
        },
    )
    assert s.database_url == "postgresql+asyncpg://u:p@h/d"
    assert (
        s.channels.telegram.token is not None and s.channels.telegram.token.get_secret_value() == "tg-value"
    )
    assert s.channels.slack.token is not None and s.channels.slack.token.get_secret_value() == "slack-value"
    assert (
        s.channels.email.password is not None and s.channels.email.password.get_secret_value() == "smtp-value"
    )


def test_every_environment_variable_the_docs_and_manifests_name_is_accepted() -> None:
    import re

    texts = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "deploy").rglob("*.yaml")),
    ]
    names = {
        name for path in texts for name in re.findall(r"\bINNO_NOTIFY_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())
    }
    assert "INNO_NOTIFY_LOG_LEVEL" in names and "INNO_NOTIFY_DATABASE_URL_FILE" in names
    documented = {config_docs.env_name(key) for key, _ in _documented_scalar_keys()}
    for name in sorted(names - {"INNO_NOTIFY_CONFIG"}):
        assert name in documented or name.startswith("INNO_NOTIFY_TEST_"), f"{name} is not a setting"


def test_allowed_email_domains_default_to_any_and_are_normalised(tmp_path: Path) -> None:
    assert load_settings(None, {}).notify.allowed_email_domains == ()
    path = write(tmp_path, "notify: {allowed_email_domains: [Corp.Example, '@lab.example.org.']}\n")
    assert load_settings(path, {}).notify.allowed_email_domains == ("corp.example", "lab.example.org")
    bad = write(tmp_path, "notify: {allowed_email_domains: ['corp.example, evil.example']}\n", "bad.yaml")
    with pytest.raises(ConfigError, match="allowed_email_domains"):
        load_settings(bad, {})


@pytest.mark.parametrize(
    ("live", "selectors"),
    [
        ({}, ["com.coder.workspace.id", "component=singleuser-server,hub.jupyter.org/username"]),
        ({"workspace_selectors": []}, []),
        ({"workspace_selectors": ["notebook-name"]}, ["notebook-name"]),
    ],
    ids=["default: Coder and JupyterHub", "[]: off", "one other platform"],
)
def test_workspace_selectors_default_to_coder_and_jupyterhub_and_empty_turns_them_off(
    tmp_path: Path, live: dict[str, object], selectors: list[str]
) -> None:
    """What CONTRACT and docs/nudges.md say: the default is the two selectors, [] none at all."""
    from inno_notify.runtime.configuration import parse_config

    settings = load_settings(write(tmp_path, json.dumps({"live": live})), {})  # JSON is YAML
    assert list(settings.live.workspace_selectors) == selectors
    assert len(parse_config(settings).workspace_selectors) == len(selectors)
