"""The ISO-week calendar: the one parser of "2026-W48", and weeks in a zone (DST included)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from inno_notify.domain.weeks import (
    WEEK_PATTERN,
    NoSuchWeek,
    NotAWeek,
    day_bounds,
    last_complete_week,
    parse_week,
    previous_week,
    week_bounds,
    week_of,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("week", "tz", "start", "end", "hours"),
    [
        ("2026-W48", "UTC", utc(2026, 11, 23), utc(2026, 11, 30), 168),
        # Berlin: CET (UTC+1) in November.
        ("2026-W48", "Europe/Berlin", utc(2026, 11, 22, 23), utc(2026, 11, 29, 23), 168),
        # Summer time ends Sunday 25 October 2026: the week is an hour longer.
        ("2026-W43", "Europe/Berlin", utc(2026, 10, 18, 22), utc(2026, 10, 25, 23), 169),
        # Summer time begins Sunday 29 March 2026: an hour shorter.
        ("2026-W13", "Europe/Berlin", utc(2026, 3, 22, 23), utc(2026, 3, 29, 22), 167),
        # New York leaves DST on Sunday 1 November 2026, the last day of W44.
        ("2026-W44", "America/New_York", utc(2026, 10, 26, 4), utc(2026, 11, 2, 5), 169),
        # 2026 has 53 ISO weeks; W53 runs into January 2027.
        ("2026-W53", "UTC", utc(2026, 12, 28), utc(2027, 1, 4), 168),
    ],
)
def test_week_bounds(week: str, tz: str, start: datetime, end: datetime, hours: int) -> None:
    assert week_bounds(week, tz) == (start, end)
    assert (end - start).total_seconds() == hours * 3600


def test_day_bounds_follow_the_clock_change() -> None:
    days = day_bounds("2026-W43", "Europe/Berlin")
    assert len(days) == 8
    assert days[0] == utc(2026, 10, 18, 22)
    assert days[6] == utc(2026, 10, 24, 22)  # Sunday begins in summer time ...
    assert days[7] == utc(2026, 10, 25, 23)  # ... and lasts 25 hours


@pytest.mark.parametrize(
    ("week", "previous"),
    [("2026-W48", "2026-W47"), ("2027-W01", "2026-W53"), ("2026-W01", "2025-W52"), ("2021-W01", "2020-W53")],
)
def test_previous_week(week: str, previous: str) -> None:
    assert previous_week(week) == previous


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("2026-48", NotAWeek),
        ("2026-W4", NotAWeek),
        ("week 48", NotAWeek),
        ("", NotAWeek),
        (" 2026-W48", NotAWeek),
        ("2026-W48\n", NotAWeek),
        ("٢٠٢٦-W48", NotAWeek),  # Arabic-Indic digits: \d would take them, the schema's [0-9] does not
        ("2026-W4８", NotAWeek),
        ("2026-W48\x00", NotAWeek),
        ("2025-W53", NoSuchWeek),
        ("2026-W00", NoSuchWeek),
        ("2026-W54", NoSuchWeek),
    ],
)
def test_parse_week_refuses(text: str, error: type[ValueError]) -> None:
    with pytest.raises(error):
        parse_week(text)


@pytest.mark.parametrize(
    ("text", "parsed"), [("2026-W48", (2026, 48)), ("2026-W53", (2026, 53)), ("0001-W01", (1, 1))]
)
def test_parse_week(text: str, parsed: tuple[int, int]) -> None:
    assert parse_week(text) == parsed
    assert re.fullmatch(WEEK_PATTERN[1:-1], text)


@pytest.mark.parametrize(
    ("now", "tz", "week", "last_complete"),
    [
        (utc(2026, 11, 30, 8), "UTC", "2026-W49", "2026-W48"),
        # Sunday 23:30 UTC is already Monday in Berlin: the week just ended there ...
        (utc(2026, 11, 29, 23, 30), "Europe/Berlin", "2026-W49", "2026-W48"),
        # ... but not in UTC.
        (utc(2026, 11, 29, 23, 30), "UTC", "2026-W48", "2026-W47"),
        (utc(2027, 1, 4, 9), "UTC", "2027-W01", "2026-W53"),
    ],
)
def test_week_of_and_last_complete_week(now: datetime, tz: str, week: str, last_complete: str) -> None:
    assert week_of(now, tz) == week
    assert last_complete_week(now, tz) == last_complete
