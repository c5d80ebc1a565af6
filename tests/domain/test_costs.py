"""Prices per GPU model and a job's cost, on hand-computed figures."""

from __future__ import annotations

import pytest

from inno_notify.domain.costs import Cost, Held, Rates, cost_of

RATES = Rates(currency="EUR", gpu_hour={"*H100*": 2.5, "*A100*": 1.6, "*": 0.8})


@pytest.mark.parametrize(
    ("model", "price"),
    [
        ("NVIDIA H100 80GB HBM3", 2.5),
        ("nvidia h100 pcie", 2.5),  # case-insensitive
        ("NVIDIA A100-SXM4-80GB", 1.6),
        ("Tesla T4", 0.8),  # the catch-all, written last
        (None, 0.8),  # an unmeasured model matches only a catch-all
    ],
)
def test_the_first_matching_glob_in_the_order_written_prices_a_model(model: str | None, price: float) -> None:
    assert RATES.gpu_hour_price(model) == price


def test_without_a_catch_all_an_unlisted_model_has_no_price() -> None:
    assert Rates(currency="EUR", gpu_hour={"*H100*": 2.5}).gpu_hour_price("Tesla T4") is None
    assert Rates(currency="EUR", gpu_hour={"*H100*": 2.5}).gpu_hour_price(None) is None


FULL = Rates(currency="EUR", gpu_hour={"*H100*": 3.0}, cpu_core_hour=0.02, memory_gib_hour=0.005)


@pytest.mark.parametrize(
    ("held", "rates", "want"),
    [
        # 240 GPU-minutes of an H100 at 3.0/h = 12.0; 110 idle minutes = 5.5.
        (Held("NVIDIA H100", 240.0, 110.0), None, None),
        (
            Held("NVIDIA H100", 240.0, 110.0),
            Rates(currency="EUR", gpu_hour={"*H100*": 3.0}),
            Cost(12.0, 5.5, "EUR"),
        ),
        # + 64 core-hours × 0.02 = 1.28, + 512 GiB-hours × 0.005 = 2.56 → 15.84.
        (Held("NVIDIA H100", 240.0, 110.0, 64.0, 512.0), FULL, Cost(15.84, 5.5, "EUR")),
        # A CPU-only job: no GPU part, CPU and memory priced.
        (Held(None, 0.0, 0.0, 10.0, 100.0), FULL, Cost(0.7, 0.0, "EUR")),
        # GPUs of a model no glob matches: the amount is unknown, not 0 (nor the CPU part alone).
        (Held("Tesla T4", 60.0, 0.0, 1.0, 1.0), FULL, Cost(None, 0.0, "EUR")),
        # GPU-minutes not measured: unknown.
        (Held("NVIDIA H100", None, None, 1.0, 1.0), FULL, Cost(None, None, "EUR")),
        # CPU priced but no CPU figure: unknown.
        (Held("NVIDIA H100", 60.0, 0.0, None, 1.0), FULL, Cost(None, 0.0, "EUR")),
        # No price set at all: no cost.
        (Held("NVIDIA H100", 60.0, 0.0), Rates(), None),
        # Only a CPU price: GPUs are not priced (no part), the CPU is.
        (
            Held("NVIDIA H100", 60.0, 30.0, 10.0),
            Rates(currency="EUR", cpu_core_hour=0.1),
            Cost(1.0, None, "EUR"),
        ),
    ],
    ids=[
        "unpriced",
        "gpu",
        "gpu-cpu-memory",
        "cpu-only-job",
        "model-unpriced",
        "unmeasured",
        "cpu-unmeasured",
        "no-rates",
        "only-cpu-priced",
    ],
)
def test_cost_of_a_job(held: Held, rates: Rates | None, want: Cost | None) -> None:
    got = cost_of(held, rates or Rates())
    if want is None:
        assert got is None
        return
    assert got is not None and got.currency == want.currency
    for name in ("amount", "idle"):
        value, expected = getattr(got, name), getattr(want, name)
        assert value == (pytest.approx(expected) if expected is not None else None), name


def test_costs_add_up_and_an_unknown_part_stays_unknown() -> None:
    assert Cost(1.0, 0.5, "EUR") + Cost(2.0, 1.0, "EUR") == Cost(3.0, 1.5, "EUR")
    assert Cost(1.0, 0.5, "EUR") + Cost(None, 1.0, "EUR") == Cost(None, 1.5, "EUR")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"currency": "EUR", "gpu_hour": {"*H100*": -1.0}}, "gpu_hour.*H100*"),
        ({"currency": "EUR", "cpu_core_hour": float("nan")}, "cpu_core_hour"),
        ({"currency": "EUR", "memory_gib_hour": -0.1}, "memory_gib_hour"),
        ({"gpu_hour": {"*": 1.0}}, "currency"),
        ({"currency": " ", "gpu_hour": {"*": 1.0}}, "currency"),
    ],
)
def test_bad_rates_are_refused_naming_the_key(given: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        Rates(**given)  # type: ignore[arg-type]
