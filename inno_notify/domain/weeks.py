"""ISO weeks in a time zone: the one parser of "2026-W48" and the instants a week spans.

Every place that takes a week from outside (the API's `week` parameter, `inno-notify digest
--week`, a digest page's link) parses it here, so they accept and refuse the same text. A week
is Monday 00:00 to the next Monday 00:00 in the digest's zone, so a week with a DST change is 167
or 169 hours long. Pure: the time is passed in.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

# The OpenAPI schema's pattern (ECMA regex, anchored); `parse_week` also refuses W53 of a year
# that has only 52. ASCII digits only: Python's \d would accept other scripts' digits.
WEEK_PATTERN = r"^[0-9]{4}-W(0[1-9]|[1-4][0-9]|5[0-3])$"
_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")


class NotAWeek(ValueError):
    """The text is not shaped like an ISO week (2026-W48)."""


class NoSuchWeek(ValueError):
    """Shaped like an ISO week, but the year has no such week (W00, W53 of a 52-week year)."""


def parse_week(week: str) -> tuple[int, int]:
    """ "2026-W48" -> (2026, 48); NotAWeek or NoSuchWeek (both ValueError) for anything else."""
    match = _WEEK.fullmatch(week)
    if match is None:
        raise NotAWeek(f"not an ISO week like 2026-W48: {week!r}")
    year, number = int(match[1]), int(match[2])
    try:
        date.fromisocalendar(year, number, 1)
    except ValueError:
        raise NoSuchWeek(f"no such ISO week: {week!r}") from None
    return year, number


def format_week(year: int, number: int) -> str:
    return f"{year:04d}-W{number:02d}"


def week_monday(week: str) -> date:
    year, number = parse_week(week)
    return date.fromisocalendar(year, number, 1)


def local_midnight_utc(day: date, tz: str) -> datetime:
    """The instant a calendar day begins in `tz`, in UTC (zoneinfo resolves DST gaps forward)."""
    local = datetime.combine(day, time(0), tzinfo=ZoneInfo(tz))
    return local.astimezone(UTC)


def week_bounds(week: str, tz: str) -> tuple[datetime, datetime]:
    """[start, end) of the ISO week in zone `tz`, as UTC instants: Monday 00:00 to next Monday 00:00."""
    monday = week_monday(week)
    return local_midnight_utc(monday, tz), local_midnight_utc(monday + timedelta(days=7), tz)


def day_bounds(week: str, tz: str) -> tuple[datetime, ...]:
    """The eight UTC instants at which the week's seven local days begin and the last one ends."""
    monday = week_monday(week)
    return tuple(local_midnight_utc(monday + timedelta(days=i), tz) for i in range(8))


def week_of(moment: datetime, tz: str) -> str:
    """The ISO week that contains `moment` (aware) in zone `tz`."""
    iso = moment.astimezone(ZoneInfo(tz)).isocalendar()
    return format_week(iso.year, iso.week)


def previous_week(week: str) -> str:
    iso = (week_monday(week) - timedelta(days=7)).isocalendar()
    return format_week(iso.year, iso.week)


def last_complete_week(now: datetime, tz: str) -> str:
    """The newest week that has wholly ended at `now`: the one before the week `now` falls in."""
    return previous_week(week_of(now, tz))
