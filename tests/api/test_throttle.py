"""api.throttle: a store's refusal is held until the instant it named, never longer, and at most
`held_limit` of them (the oldest forgotten first)."""

from __future__ import annotations

from datetime import timedelta

from inno_notify.adapters.db.pipeline_events import limited
from inno_notify.api.throttle import RecentAccepts

from .support import NOW

HOUR = timedelta(hours=1)


def test_a_refusal_is_held_until_its_instant_with_retry_after_counted_down() -> None:
    recent = RecentAccepts()
    recent.hold(limited("recipient", "alice@example.com", 10, 10, HOUR, NOW - timedelta(minutes=50), NOW))
    held = recent.held("recipient", "alice@example.com", NOW + timedelta(minutes=5))
    assert held is not None and held.retry_after == 5 * 60 and held.count == 10
    assert recent.held("token", "alice@example.com", NOW) is None  # another limit, another subject
    assert recent.held("recipient", "alice@example.com", NOW + timedelta(minutes=10)) is None


def test_at_most_held_limit_refusals_are_held() -> None:
    recent = RecentAccepts(held_limit=3)
    for i in range(4):
        recent.hold(limited("recipient", f"p{i}@example.org", 10, 10, HOUR, NOW, NOW))
    assert [recent.held("recipient", f"p{i}@example.org", NOW) is not None for i in range(4)] == [
        False,
        True,
        True,
        True,
    ]
