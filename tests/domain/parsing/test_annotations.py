"""Where the owner's words are read from (CONTRACT.md §3): Job annotations, Job labels, template
annotations, template labels, first non-blank value wins; teams fall back to the namespace mapping."""

from __future__ import annotations

import pytest

from inno_notify.domain.model import NotifyMode
from inno_notify.domain.parsing.annotations import OwnerIntent, parse_channels, parse_notify, read_intent
from inno_notify.domain.parsing.config import ParseConfig

CFG = ParseConfig(
    cluster="c1",
    owner_keys=("inno-notify/owner", "example.com/owner"),
    namespace_teams={"face-research": "face"},
    default_team="unassigned",
)
OWNER = "inno-notify/owner"
ALT_OWNER = "example.com/owner"
TEAM = "inno-notify/team"

# (job annotations, job labels, template annotations, template labels) -> expected intent
PRECEDENCE = [
    pytest.param(
        ({OWNER: "a@x.org"}, {}, {OWNER: "t@x.org"}, {}),
        OwnerIntent("a@x.org", "face", NotifyMode.ALWAYS, None, None),
        id="job annotation beats template annotation",
    ),
    pytest.param(
        ({}, {TEAM: "vision"}, {TEAM: "nlp"}, {}),
        OwnerIntent(None, "vision", NotifyMode.ALWAYS, None, None),
        id="job label beats template annotation",
    ),
    pytest.param(
        ({}, {}, {OWNER: "t@x.org"}, {TEAM: "nlp"}),
        OwnerIntent("t@x.org", "nlp", NotifyMode.ALWAYS, None, None),
        id="template annotation and label used when the job says nothing",
    ),
    pytest.param(
        ({OWNER: "   "}, {}, {OWNER: "t@x.org"}, {}),
        OwnerIntent("t@x.org", "face", NotifyMode.ALWAYS, None, None),
        id="blank value is no value",
    ),
    pytest.param(
        ({ALT_OWNER: "alt@x.org"}, {}, {OWNER: "t@x.org"}, {}),
        OwnerIntent("alt@x.org", "face", NotifyMode.ALWAYS, None, None),
        id="any owner key on the job beats the first key on the template",
    ),
    pytest.param(
        ({OWNER: " a@x.org ", ALT_OWNER: "alt@x.org"}, {}, {}, {}),
        OwnerIntent("a@x.org", "face", NotifyMode.ALWAYS, None, None),
        id="owner_keys order within one layer",
    ),
    pytest.param(
        (
            {"inno-notify/notify": "Failure", "inno-notify/channels": "Slack, email,,slack"},
            {"inno-notify/group": "sweep-7"},
            {"inno-notify/notify": "never"},
            {},
        ),
        OwnerIntent(None, "face", NotifyMode.FAILURE, ("slack", "email"), "sweep-7"),
        id="notify, channels and group",
    ),
]


@pytest.mark.parametrize(("layers", "expected"), PRECEDENCE)
def test_precedence(layers: tuple[dict[str, str], ...], expected: OwnerIntent) -> None:
    assert read_intent(layers, "face-research", CFG) == expected


TEAMS = [
    ("face-research", {TEAM: "vision"}, "vision"),
    ("face-research", {}, "face"),
    ("scratch", {}, "unassigned"),
]


@pytest.mark.parametrize(("namespace", "annotations", "team"), TEAMS)
def test_team_fallbacks(namespace: str, annotations: dict[str, str], team: str) -> None:
    assert read_intent((annotations,), namespace, CFG).team == team


def test_no_team_anywhere_is_none() -> None:
    assert read_intent(({},), "scratch", ParseConfig()).team is None


NOTIFY = [
    (None, NotifyMode.ALWAYS),
    ("always", NotifyMode.ALWAYS),
    ("failure", NotifyMode.FAILURE),
    ("on-failure", NotifyMode.FAILURE),
    ("NEVER", NotifyMode.NEVER),
    ("off", NotifyMode.NEVER),
    ("sometimes", NotifyMode.ALWAYS),
]


@pytest.mark.parametrize(("value", "mode"), NOTIFY)
def test_parse_notify(value: str | None, mode: NotifyMode) -> None:
    assert parse_notify(value) is mode


@pytest.mark.parametrize(
    ("value", "channels"),
    [
        (None, None),
        ("", None),
        (" , ", None),
        ("telegram", ("telegram",)),
        ("email, SLACK", ("email", "slack")),
    ],
)
def test_parse_channels(value: str | None, channels: tuple[str, ...] | None) -> None:
    assert parse_channels(value) == channels
