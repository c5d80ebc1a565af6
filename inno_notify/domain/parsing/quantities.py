"""Kubernetes ``resource.Quantity`` strings ("500m", "70Gi", "1e3") turned into plain numbers.

Every request and limit in a pod spec is a quantity string; the domain works in base units (CPU in
cores, memory in bytes, extended resources in their own units), so this is the single place that knows
the suffix grammar of k8s.io/apimachinery/pkg/api/resource. Decimal arithmetic keeps "1.1Gi" exact
until the final conversion to float.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["QuantityError", "parse_quantity"]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# The exponent form must be tried before the bare "E" (exa) suffix: "1E3" is 1000, "1E" is 10**18.
# Longer strings are no quantity a cluster writes, and must not fill the parse cache.
_MAX_TEXT = 64
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)"
)


def parse_quantity(value: object) -> float:
    """Return the quantity in base units: ``"500m"`` → 0.5, ``"1Gi"`` → 1073741824.0, ``"1e3"`` → 1000.0.

    Numbers pass through unchanged (JSON may carry ``4`` rather than ``"4"``). Raises
    :class:`QuantityError` for anything Kubernetes would reject, and for amounts too large for a
    float (the caller checks the range its use allows).
    """
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError as exc:
            raise QuantityError("not a quantity: an integer too large for a float") from exc
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"not a quantity: {value!r}")
        return value
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: a {type(value).__name__}")
    if len(value) > _MAX_TEXT:
        raise QuantityError(f"not a quantity: {len(value)} characters")
    return _parse_string(value)


@lru_cache(maxsize=4096)
def _parse_string(text: str) -> float:
    # Cached: a cluster uses a handful of distinct strings ("1", "4Gi", "500m") millions of times.
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise QuantityError(f"not a quantity: {text!r}")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"not a quantity: {text!r}") from exc
    suffix = match["suffix"]
    if suffix in _BINARY:
        result = float(number * _BINARY[suffix])
    elif suffix in _DECIMAL:
        result = float(number * _DECIMAL[suffix])
    else:
        result = float(number.scaleb(int(suffix[1:])))
    if not math.isfinite(result):
        raise QuantityError(f"not a quantity: {text!r} is too large")
    return result
