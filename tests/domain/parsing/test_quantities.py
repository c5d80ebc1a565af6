"""Kubernetes quantity strings, checked against the values the API server would compute."""

from __future__ import annotations

import pytest

from inno_notify.domain.parsing.quantities import QuantityError, parse_quantity

QUANTITIES = [
    ("500m", 0.5),
    ("4", 4.0),
    ("250m", 0.25),
    ("1500m", 1.5),
    ("0.5", 0.5),
    (".5", 0.5),
    ("1.", 1.0),
    ("+2", 2.0),
    ("1Ki", 1024.0),
    ("100Ki", 102400.0),
    ("1Mi", 1048576.0),
    ("512Mi", 536870912.0),
    ("1Gi", 1073741824.0),
    ("1.5Gi", 1610612736.0),
    ("70Gi", 75161927680.0),
    ("1Ti", 1099511627776.0),
    ("1k", 1000.0),
    ("1M", 1e6),
    ("1G", 1e9),
    ("2T", 2e12),
    ("1P", 1e15),
    ("1E", 1e18),
    ("1e3", 1000.0),
    ("1E3", 1000.0),
    ("12e-3", 0.012),
    ("205785634", 205785634.0),
    ("100n", 1e-7),
    ("10u", 1e-5),
    (4, 4.0),
    (0.25, 0.25),
]


@pytest.mark.parametrize(("text", "expected"), QUANTITIES)
def test_parse_quantity(text: str | int | float, expected: float) -> None:
    assert parse_quantity(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text", ["", "Gi", "1 Gi", "1gi", "1KB", "one", "1.2.3", "--1", "1e"])
def test_parse_quantity_rejects_what_kubernetes_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_parse_quantity_rejects_booleans() -> None:
    with pytest.raises(QuantityError):
        parse_quantity(True)
