"""The owner's own words on a Job (CONTRACT.md §3): owner, team, notify mode, channels, group.

Keys are looked up on four layers, most specific first: the Job's annotations, the Job's labels, the
pod template's annotations, the pod template's labels. The first layer that carries a non-empty value
wins, so a template default can be overridden on the Job. For the owner, every key of
``owner_keys`` is tried on a layer before moving to the next layer: the Job is the stronger statement,
whichever key it used.

Values are hostile until read: the owner must be exactly one e-mail ``addr_spec`` (RFC 5322, parsed
by the standard library's strict parser, see :mod:`..addresses`), written as such: a list such as
``attacker@evil.example,victim@corp.example`` is no owner at all, and the refusal is noted (see
:class:`.fields.SetAside`). Team, group and family end in indexed columns and are capped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..addresses import is_single_address
from ..model import NotifyMode
from .config import ParseConfig
from .fields import JsonObject, SetAside, mapping, string_map
from .storable import INDEXED_MAX_BYTES, storable

__all__ = [
    "CHANNELS_KEY",
    "FAMILY_KEY",
    "GROUP_KEY",
    "NOTIFY_KEY",
    "OWNER_NOT_ONE_ADDRESS",
    "TEAM_KEY",
    "OwnerIntent",
    "Words",
    "indexed_lookup",
    "lookup",
    "one_address",
    "parse_channels",
    "parse_notify",
    "read_intent",
    "read_words",
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

# Annotations and labels as the object holds them: values are strings by API contract, but a
# hand-written object may hold anything, so lookups read only string values.
Layers = Sequence[Mapping[str, object]]

OWNER_NOT_ONE_ADDRESS = "not_one_address"
# RFC 5321: a path is at most 256 octets with its angle brackets, a local part at most 64.
_CHANNELS_MAX = 8
_CHANNEL_NAME = re.compile(r"[a-z0-9_-]{1,32}")


@dataclass(frozen=True, slots=True)
class OwnerIntent:
    owner: str | None
    team: str | None
    notify: NotifyMode
    channels: tuple[str, ...] | None
    group_key: str | None


def lookup(layers: Layers, keys: Sequence[str]) -> str | None:
    """The first non-blank string value of any of ``keys``, layer by layer, stripped and storable
    (only the values looked up are cleaned: the rest of an object's annotations is never read)."""
    for layer in layers:
        for key in keys:
            value = layer.get(key)
            if isinstance(value, str):
                cleaned = storable(value).strip()
                if cleaned:
                    return cleaned
    return None


@lru_cache(maxsize=4096)
def one_address(value: str) -> str | None:
    """``value`` if it is exactly one plain e-mail address as written (the one rule of
    domain.addresses, which routing and the e-mail sender apply too), else None. Cached: a cluster
    has far fewer owners than jobs."""
    return value if is_single_address(value) else None


def parse_notify(value: str | None) -> NotifyMode:
    if value is None:
        return NotifyMode.ALWAYS
    return _NOTIFY_ALIASES.get(value.strip().lower(), NotifyMode.ALWAYS)


def parse_channels(value: str | None) -> tuple[str, ...] | None:
    """``"slack, email"`` → ``("slack", "email")``; blank or only commas → None (use the owner's)."""
    if value is None:
        return None
    # Channel names are short words; anything else cannot name a channel and is not kept.
    wanted = (part.strip().lower() for part in value.split(",", _CHANNELS_MAX * 4))
    names = tuple(dict.fromkeys(name for name in wanted if _CHANNEL_NAME.fullmatch(name)))[:_CHANNELS_MAX]
    return names or None


def indexed_lookup(layers: Layers, keys: Sequence[str]) -> str | None:
    """:func:`lookup` for a value that ends in an indexed column, capped to fit its index."""
    value = lookup(layers, keys)
    return None if value is None else storable(value, INDEXED_MAX_BYTES)


def namespace_owners(annotations: Mapping[str, str]) -> dict[str, str]:
    """namespace → the owner its annotation names, for the values that are one e-mail address
    (a namespace's annotation is written by whoever may edit it: hostile like any other)."""
    return {ns: owner for ns, value in annotations.items() if (owner := one_address(value)) is not None}


def read_intent(
    layers: Layers, namespace: str, cfg: ParseConfig, notes: list[SetAside] | None = None
) -> OwnerIntent:
    """The owner's words; a value we refuse (an owner that is not one address) reads as absent and,
    when ``notes`` is given, is noted there."""
    team = indexed_lookup(layers, (TEAM_KEY,)) or cfg.namespace_teams.get(namespace) or cfg.default_team
    written = lookup(layers, cfg.owner_keys)
    owner = None if written is None else one_address(written)
    if written is not None and owner is None and notes is not None:
        notes.append(SetAside("owner", OWNER_NOT_ONE_ADDRESS))
    if written is None:
        owner = cfg.namespace_owners.get(namespace)
    return OwnerIntent(
        owner=owner,
        team=team,
        notify=parse_notify(lookup(layers, (NOTIFY_KEY,))),
        channels=parse_channels(lookup(layers, (CHANNELS_KEY,))),
        group_key=indexed_lookup(layers, (GROUP_KEY,)),
    )


@dataclass(frozen=True, slots=True)
class Words:
    """What an object's metadata (and its pod templates') say, read once for every kind that is
    recorded from its own metadata: its labels (all of them storable: they are stored with a
    record), the layers owner keys are looked up on, most specific first, and the owner's words."""

    labels: dict[str, str]
    layers: tuple[Mapping[str, object], ...]
    intent: OwnerIntent

    @property
    def annotations(self) -> Mapping[str, object]:
        """The object's own annotations (the first layer)."""
        return self.layers[0]


def read_words(
    metadata: JsonObject,
    namespace: str,
    cfg: ParseConfig,
    notes: list[SetAside] | None = None,
    templates: Sequence[JsonObject] = (),
) -> Words:
    """The object's words: its annotations, its labels, then each of its pod `templates`'
    annotations and labels in order (see the module's docstring); refused values go to ``notes``."""
    labels = string_map(metadata, "labels")
    layers: list[Mapping[str, object]] = [mapping(metadata, "annotations"), labels]
    for template in templates:
        template_meta = mapping(template, "metadata")
        layers += [mapping(template_meta, "annotations"), mapping(template_meta, "labels")]
    return Words(labels, tuple(layers), read_intent(layers, namespace, cfg, notes))
