"""Values made storable at the boundary: whatever a cluster user wrote fits the column it lands in.

Postgres refuses what SQLite swallows, and one refused value used to fail a whole batch. So every
string read from a Kubernetes object passes through here before it reaches a record:

- NUL characters are removed (Postgres text and jsonb cannot hold them), and lone surrogates (which
  UTF-8 cannot encode) become ``?``;
- strings are capped in UTF-8 bytes, with :data:`TRUNCATION_MARK` at the end so a reader sees that
  something was cut. Indexed columns (owner, team, family, group key, namespace, name, exit reason…)
  get :data:`INDEXED_MAX_BYTES`, far below Postgres's btree limit of ~2.7 KB per index row even
  when several capped columns share one index (the team digest index includes owner and exit
  reason); free text (reasons, messages, label values) gets :data:`TEXT_MAX_BYTES`;
- a name read from an exporter's label (a GPU model) is one short line: :func:`label_name` turns
  control characters into spaces and caps it at :data:`NAME_MAX_BYTES`;
- keys (uids) are never cut, since a cut key could merge two objects: a uid that does not fit
  :data:`KEY_MAX_BYTES` is refused;
- numbers are range-checked against the database types they end in (:data:`INT32_MIN` …
  :data:`INT32_MAX` for exit codes, counts and indexes; :data:`QUANTITY_MAX` for resource amounts,
  which become 64-bit byte counts).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "INDEXED_MAX_BYTES",
    "INT32_MAX",
    "INT32_MIN",
    "KEY_MAX_BYTES",
    "MAP_MAX_ENTRIES",
    "MAP_TRUNCATION_KEY",
    "NAME_MAX_BYTES",
    "QUANTITY_MAX",
    "TEXT_MAX_BYTES",
    "TRUNCATION_MARK",
    "label_name",
    "storable",
    "storable_key",
    "storable_map",
]

TRUNCATION_MARK = "…[truncated]"
_MARK_BYTES = len(TRUNCATION_MARK.encode())

KEY_MAX_BYTES = 128
INDEXED_MAX_BYTES = 256
TEXT_MAX_BYTES = 4096
# Labels kept per object; Kubernetes objects carry a few dozen at most.
MAP_MAX_ENTRIES = 256
# The entry that says how many were dropped (not a valid label key, so it cannot collide with one).
MAP_TRUNCATION_KEY = TRUNCATION_MARK

# A name shown on one line of a message or a list (a GPU model: "NVIDIA A100-SXM4-80GB").
NAME_MAX_BYTES = 128
# C0 and C1 control characters, NUL and DEL included: each becomes a space.
_CONTROL_TO_SPACE = {c: " " for c in (*range(0x20), *range(0x7F, 0xA0))}

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
# Resource amounts in base units: 2**62 bytes is 4 EiB, and its ceiling still fits a BIGINT.
QUANTITY_MAX = float(2**62)


def storable(value: str, max_bytes: int = TEXT_MAX_BYTES) -> str:
    """``value`` without NUL, valid UTF-8, at most ``max_bytes`` bytes (cut ones end with the mark)."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    if value.isascii():
        if len(value) <= max_bytes:
            return value
        return value[: max_bytes - _MARK_BYTES] + TRUNCATION_MARK
    encoded = value.encode("utf-8", "replace")
    if len(encoded) <= max_bytes:
        return encoded.decode("utf-8")
    # "ignore" drops the partial character the cut may leave at the end.
    return encoded[: max_bytes - _MARK_BYTES].decode("utf-8", "ignore") + TRUNCATION_MARK


def label_name(value: str | None, max_bytes: int = NAME_MAX_BYTES) -> str | None:
    """An exporter's label value as a one-line name: control characters (NUL, newlines, escapes)
    and runs of white space become one space, the ends are trimmed, at most ``max_bytes``; None
    when nothing is left."""
    if not value:
        return None
    # split() with no argument collapses every run of white space (linear, whatever the input).
    name = " ".join(value.translate(_CONTROL_TO_SPACE).split())
    return storable(name, max_bytes) if name else None


def storable_key(value: str) -> str | None:
    """``value`` if it can serve as a key (a uid) as written, else None: keys are refused, not cut."""
    if "\x00" in value:
        return None
    if value.isascii():
        return value if len(value) <= KEY_MAX_BYTES else None
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value if len(encoded) <= KEY_MAX_BYTES else None


def storable_map(values: Mapping[str, str], max_key_bytes: int, max_value_bytes: int) -> dict[str, str]:
    """A string map with every key and value storable and at most :data:`MAP_MAX_ENTRIES` entries;
    when entries were dropped, the last one says how many."""
    out: dict[str, str] = {}
    dropped = 0
    for key, value in values.items():
        if len(out) >= MAP_MAX_ENTRIES - 1 and len(values) > MAP_MAX_ENTRIES:
            dropped += 1
            continue
        out[storable(key, max_key_bytes)] = storable(value, max_value_bytes)
    if dropped:
        out[MAP_TRUNCATION_KEY] = f"{dropped} more dropped"
    return out
