"""Loading the hand-written objects in ./objects and the real captures, plus a short UTC constructor."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OBJECTS = Path(__file__).parent / "objects"


def load(name: str) -> dict[str, Any]:
    with (OBJECTS / name).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def load_items(name: str) -> list[dict[str, Any]]:
    """The items of a ``kind: List`` file, as ``kubectl get pods -o json`` writes it."""
    items: list[dict[str, Any]] = load(name)["items"]
    return items


def load_capture(fixtures: Path, name: str) -> dict[str, Any]:
    with (fixtures / "k8s" / name).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def utc(text: str) -> datetime:
    """``"2026-11-30T10:00:00"`` → an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
