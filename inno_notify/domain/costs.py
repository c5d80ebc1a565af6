"""What GPU-hours cost: prices per GPU model (and per core-hour and GiB-hour), and a job's cost.

This dataclass *is* the ``accounting.rates`` section of the configuration (like
``RightsizingPolicy`` is ``rightsizing``): pydantic validates its fields and runs
``__post_init__``, which refuses a negative price or prices without a currency, naming the key.

A GPU model's price is the first ``gpu_hour`` glob, in the order written, that matches the model
as dcgm-exporter names it (``fnmatch``, case-insensitive): write the specific globs before a
catch-all ``"*"``. A job whose model was not measured matches only a catch-all. A figure with no
applicable price is ``None``, never 0: a cluster that prices only its H100s reports no cost for
its A10 jobs rather than a free one (docs/budgets.md).

Pure: the figures come in (GPU-minutes held and idle, requested cores and memory, runtime), a
``Cost`` comes out.
"""

from __future__ import annotations

import fnmatch
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Rates:
    """Prices of what jobs hold (config section ``accounting.rates``); empty: no costs anywhere."""

    currency: str | None = None
    """ISO 4217 code (e.g. EUR) the prices and every cost are in; needed once a price is set."""

    gpu_hour: Mapping[str, float] = field(default_factory=dict)
    """Price of one GPU-hour per GPU model: a glob on dcgm-exporter's `modelName` (case-insensitive,
    the first matching glob in the order written wins), e.g. {"*H100*": 2.5, "*A100*": 1.6, "*": 0.8}.
    A MIG instance or shared GPU costs its GPU-equivalents' share."""

    cpu_core_hour: float | None = None
    """Price of one requested CPU core for an hour of runtime (every pod's request × runtime)."""

    memory_gib_hour: float | None = None
    """Price of one requested GiB of memory for an hour of runtime."""

    def __post_init__(self) -> None:
        for model, price in self.gpu_hour.items():
            _check_price(f"gpu_hour.{model}", price)
        for name in ("cpu_core_hour", "memory_gib_hour"):
            _check_price(name, getattr(self, name))
        if self.priced and not (self.currency and self.currency.strip()):
            raise ValueError("currency: required once a price is set (e.g. currency: EUR)")

    @property
    def priced(self) -> bool:
        """Whether any price is set (else the service reports no cost at all)."""
        return bool(self.gpu_hour) or self.cpu_core_hour is not None or self.memory_gib_hour is not None

    def gpu_hour_price(self, model: str | None) -> float | None:
        """The price of one GPU-hour of ``model``; None where no glob matches."""
        found = _first_match(tuple(self.gpu_hour), model or "")
        return None if found is None else self.gpu_hour[found]


@functools.lru_cache(maxsize=1024)
def _first_match(globs: tuple[str, ...], model: str) -> str | None:
    """The first of ``globs`` that matches ``model``, case-insensitively. Remembered: a page of jobs
    prices the same few models over and over."""
    name = model.casefold()
    return next((glob for glob in globs if fnmatch.fnmatchcase(name, glob.casefold())), None)


def _check_price(key: str, price: float | None) -> None:
    if price is not None and not (math.isfinite(price) and price >= 0):
        raise ValueError(f"{key}: a price must be a finite number ≥ 0, not {price!r}")


@dataclass(frozen=True, slots=True)
class Held:
    """What a job (or a set of jobs of one GPU model) held: the figures a cost is made of."""

    gpu_model: str | None = None
    gpu_minutes: float | None = None
    idle_gpu_minutes: float | None = None
    cpu_core_hours: float | None = None
    memory_gib_hours: float | None = None


def job_cost(
    rates: Rates,
    *,
    gpu_model: str | None,
    gpu_minutes: float | None,
    idle_gpu_minutes: float | None,
    cpu_cores: float | None,
    memory_bytes: float | None,
    parallelism: int | None,
    runtime_seconds: float | None,
) -> Cost | None:
    """What one job cost: its GPU figures as measured, and its requests (per pod, times the pods
    that run at once) over its runtime — what it kept others from using. A request the job did not
    make holds nothing; an unknown runtime leaves the hours unknown. (The job list prices every row
    of a page: the requests' hours are worked out only where they have a price.)"""
    pods = parallelism if parallelism and parallelism > 0 else 1
    hours = None if runtime_seconds is None else runtime_seconds / 3600.0

    def reserved(per_pod: float | None, unit: float, price: float | None) -> float | None:
        if price is None or not per_pod:
            return 0.0
        return None if hours is None else per_pod / unit * pods * hours

    return _cost(
        rates,
        gpu_model,
        gpu_minutes,
        idle_gpu_minutes,
        reserved(cpu_cores, 1.0, rates.cpu_core_hour),
        reserved(memory_bytes, GIB, rates.memory_gib_hour),
    )


@dataclass(frozen=True, slots=True)
class Cost:
    """A cost in ``currency``: ``amount`` of everything held, ``idle`` of the idle GPU-hours alone
    (part of ``amount``). Either is None where a figure it needs was not measured or has no price."""

    amount: float | None
    idle: float | None
    currency: str

    def __add__(self, other: Cost) -> Cost:
        """Two costs in one currency: a part unknown in either is unknown in the sum."""
        return Cost(_sum(self.amount, other.amount), _sum(self.idle, other.idle), self.currency)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def cost_of(held: Held, rates: Rates) -> Cost | None:
    """What ``held`` cost at ``rates``; None when no price is set at all.

    A kind of resource counts once it has a price (GPUs: any ``gpu_hour`` glob; CPU and memory:
    their price): ``amount`` is the sum over the priced kinds. Within a priced kind, something held
    that was not measured, or GPUs of a model no glob matches, make ``amount`` None — a sum with a
    part missing would read as the whole. ``idle`` prices the idle GPU-minutes alone.
    """
    h = held
    return _cost(rates, h.gpu_model, h.gpu_minutes, h.idle_gpu_minutes, h.cpu_core_hours, h.memory_gib_hours)


def _cost(
    rates: Rates,
    gpu_model: str | None,
    gpu_minutes: float | None,
    idle_gpu_minutes: float | None,
    cpu_core_hours: float | None,
    memory_gib_hours: float | None,
) -> Cost | None:
    currency = rates.currency
    if currency is None or not rates.priced:
        return None
    amount: float | None = 0.0
    idle = None
    if rates.gpu_hour:
        price = rates.gpu_hour_price(gpu_model)
        amount = _part(gpu_minutes, price, per=60.0)
        idle = _part(idle_gpu_minutes, price, per=60.0)
    others = ((cpu_core_hours, rates.cpu_core_hour), (memory_gib_hours, rates.memory_gib_hour))
    for quantity, unit_price in others:
        if unit_price is not None and amount is not None:
            part = _part(quantity, unit_price)
            amount = None if part is None else amount + part
    return Cost(amount=amount, idle=idle, currency=currency)


def _part(quantity: float | None, price: float | None, per: float = 1.0) -> float | None:
    """``quantity`` / ``per`` × ``price``: 0 for nothing held; None for something held but not
    measured, or with no price."""
    if quantity is not None and quantity <= 0:
        return 0.0
    if quantity is None or price is None:
        return None
    return quantity / per * price
