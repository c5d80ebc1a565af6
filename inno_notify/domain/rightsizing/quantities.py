"""Rounding and wording of the amounts a recommendation suggests.

Suggestions are rounded up to amounts people write in a manifest (whole GiB, tenths of a core),
and computed in exact fractions so that 10 GiB × 1.2 is 12 GiB and not a byte more; a float
error there would turn a clean "12Gi" into "13Gi".
"""

from __future__ import annotations

import math
from fractions import Fraction

from inno_notify.domain.model import Severity

GIB = 1024**3
MIB = 1024**2
_TEN_GIB = 10 * GIB
_LARGE = 100 * GIB
_MILLICORES_STEP = 100


def exact(value: float) -> Fraction:
    """A float as the decimal it was written as (1.2 → 6/5), not its binary approximation."""
    return Fraction(repr(float(value))) if isinstance(value, float) else Fraction(value)


def scaled(value: float, factor: float) -> Fraction:
    return exact(value) * exact(factor)


def round_memory_up(needed_bytes: Fraction | int) -> int:
    """Up to whole GiB; up to 10 GiB steps above 100 GiB (jobstats)."""
    step = _TEN_GIB if needed_bytes > _LARGE else GIB
    return max(1, math.ceil(Fraction(needed_bytes) / step)) * step


def round_cores_up(needed_cores: Fraction) -> float:
    """Up to a tenth of a core (100m), never below 100m."""
    millicores = math.ceil(needed_cores * 1000)
    steps = max(1, math.ceil(Fraction(millicores, _MILLICORES_STEP)))
    return steps * _MILLICORES_STEP / 1000


def quantity_bytes(amount: int) -> str:
    """As written in a manifest: 16Gi, 512Mi, or 15.5Gi."""
    if amount % GIB == 0:
        return f"{amount // GIB}Gi"
    if amount % MIB == 0 and amount < GIB:
        return f"{amount // MIB}Mi"
    return f"{amount / GIB:.1f}Gi"


def gib(amount: float) -> str:
    """For prose: '14.2 GiB'."""
    return f"{amount / GIB:.1f} GiB"


def cores(amount: float) -> str:
    text = f"{amount:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def count(amount: float) -> str:
    return str(int(amount)) if float(amount).is_integer() else cores(amount)


def duration(minutes: float) -> str:
    """'58 min', '2 h 5 min', '3 h'."""
    total = round(minutes)
    if total < 60:
        return f"{total} min"
    hours, rest = divmod(total, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def percent(value: float) -> str:
    return f"{value:.0f} %" if value >= 1 or value == 0 else f"{value:.1f} %"


def and_list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def severity_for(waste: float, material: float, warning: float, critical: float) -> Severity | None:
    """Severity from the amount wasted; None below materiality (nothing is reported)."""
    if waste < material or waste <= 0:
        return None
    if waste >= critical:
        return Severity.CRITICAL
    if waste >= warning:
        return Severity.WARNING
    return Severity.INFO
