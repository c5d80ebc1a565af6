"""Human spellings of the figures in a summary: durations, sizes, GPU-minutes, missing values.

Kept apart from the view model so that every message on every channel spells "3 h 12 min" and
"42.5 GiB" the same way, and so that a missing figure is always "n/a (reason)", never 0.
"""

from __future__ import annotations

import math

from inno_notify.domain.model import MissingReason

GIB = 1024**3
MIB = 1024**2

_REASON_TEXT: dict[MissingReason, str] = {
    MissingReason.NO_SAMPLES: "no samples",
    MissingReason.PROMETHEUS_UNAVAILABLE: "Prometheus unavailable",
    MissingReason.SHORTER_THAN_SCRAPE: "shorter than one scrape",
    MissingReason.MIG_NO_UTIL: "no utilization metric on MIG",
    MissingReason.SHARED_GPU: "shared GPU",
    MissingReason.NOT_REQUESTED: "not requested",
    MissingReason.NOT_COLLECTED: "not collected",
    MissingReason.MEASUREMENT_ERROR: "measurement error",
}


def not_available(reason: MissingReason | str | None) -> str:
    """The spelling of a figure we could not measure."""
    if reason is None:
        text = "not measured"
    elif isinstance(reason, MissingReason):
        text = _REASON_TEXT[reason]
    else:
        text = reason
    return f"n/a ({text})"


def number(value: float) -> str:
    """At most one decimal, none when it is a whole number: 42.5, 64, 0.3."""
    rounded = round(value, 1)
    if math.isclose(rounded, round(rounded)):
        return str(round(rounded))
    return f"{rounded:.1f}"


def duration(seconds: float) -> str:
    """ "45 s", "12 min", "3 h 12 min", "2 d 5 h": two units at most, the larger first."""
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def size(num_bytes: float) -> str:
    """GiB from 1 GiB up, MiB below: "42.5 GiB", "512 MiB"."""
    if num_bytes >= GIB:
        return f"{number(num_bytes / GIB)} GiB"
    return f"{number(num_bytes / MIB)} MiB"


def gpu_minutes(value: float) -> str:
    """Whole GPU-minutes from 10 up, one decimal below (short jobs)."""
    return str(round(value)) if value >= 10 else number(value)


def gpus(count: float) -> str:
    """ "1 GPU", "4 GPUs", "0.5 GPUs" (a fraction: MIG slices or a shared GPU, in GPU-equivalents)."""
    return f"{number(count)} GPU{'' if count == 1 else 's'}"


def used_of_held(used: float | None, held: float, missing: MissingReason | str | None = None) -> str:
    """ "110 / 240 GPU-min": the GPU-minutes used of those held, the used ones "n/a (`missing`)"
    when they were not measured."""
    used_text = gpu_minutes(used) if used is not None else not_available(missing)
    return f"{used_text} / {gpu_minutes(held)} GPU-min"
