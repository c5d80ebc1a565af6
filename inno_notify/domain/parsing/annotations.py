"""The owner's own words on a Job (CONTRACT.md §3): owner, team, notify mode, channels, group.

Keys are looked up on four layers, most specific first: the Job's annotations, the Job's labels, the
pod template's annotations, the pod template's labels. The first layer that carries a non-empty value
wins, so a template default can be overridden on the Job. For the owner, every key of
``owner_keys`` is tried on a layer before moving to the next layer: the Job is the stronger statement,
whichever key it used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..model import NotifyMode
from .config import ParseConfig

__all__ = [
    "CHANNELS_KEY",
    "FAMILY_KEY",
    "GROUP_KEY",
    "NOTIFY_KEY",
    "TEAM_KEY",
    "OwnerIntent",
    "lookup",
    "parse_channels",
    "parse_notify",
    "read_intent",
]

TEAM_KEY = "inno-notify/team"
NOTIFY_KEY = "inno-notify/notify"
CHANNELS_KEY = "inno-notify/channels"
GROUP_KEY = "inno-notify/group"
FAMILY_KEY = "inno-notify/family"

# Spellings people write for the two non-default modes; anything else (or nothing) is "always".
_NOTIFY_ALIASES = {
    "always": NotifyMode.ALWAYS,
    "failure": NotifyMode.FAILURE,
    "failures": NotifyMode.FAILURE,
    "failed": NotifyMode.FAILURE,
    "on-failure": NotifyMode.FAILURE,
    "onfailure": NotifyMode.FAILURE,
    "never": NotifyMode.NEVER,
    "none": NotifyMode.NEVER,
    "off": NotifyMode.NEVER,
    "false": NotifyMode.NEVER,
    "no": NotifyMode.NEVER,
}

Layers = Sequence[Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class OwnerIntent:
    owner: str | None
    team: str | None
    notify: NotifyMode
    channels: tuple[str, ...] | None
    group_key: str | None


def lookup(layers: Layers, keys: Sequence[str]) -> str | None:
    """The first non-blank value of any of ``keys``, layer by layer."""
    for layer in layers:
        for key in keys:
            value = layer.get(key)
            if value is not None and value.strip():
                return value.strip()
    return None


def parse_notify(value: str | None) -> NotifyMode:
    if value is None:
        return NotifyMode.ALWAYS
    return _NOTIFY_ALIASES.get(value.strip().lower(), NotifyMode.ALWAYS)


def parse_channels(value: str | None) -> tuple[str, ...] | None:
    """``"slack, email"`` → ``("slack", "email")``; blank or only commas → None (use the owner's)."""
    if value is None:
        return None
    names = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",") if part.strip()))
    return names or None


def read_intent(layers: Layers, namespace: str, cfg: ParseConfig) -> OwnerIntent:
    team = lookup(layers, (TEAM_KEY,)) or cfg.namespace_teams.get(namespace) or cfg.default_team
    return OwnerIntent(
        owner=lookup(layers, cfg.owner_keys),
        team=team,
        notify=parse_notify(lookup(layers, (NOTIFY_KEY,))),
        channels=parse_channels(lookup(layers, (CHANNELS_KEY,))),
        group_key=lookup(layers, (GROUP_KEY,)),
    )
