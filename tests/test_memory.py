"""inno_notify.memory: the periodic hand-back of freed memory that `serve` runs, and the full
collections of cyclic garbage before it and at the end of a term."""

from __future__ import annotations

import asyncio
import ctypes.util
import logging
import platform

import pytest

from inno_notify.memory import collect_garbage, malloc_trim, return_freed_memory


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's"
)
def test_glibc_has_malloc_trim_and_it_answers() -> None:
    trim = malloc_trim()
    assert trim is not None
    assert trim() in (True, False)


def test_no_c_library_no_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert malloc_trim() is None


async def test_trims_every_period_until_stopped() -> None:
    stop = asyncio.Event()
    calls: list[int] = []
    three = asyncio.Event()

    def trim() -> bool:
        calls.append(1)
        if len(calls) == 3:
            three.set()
        return True

    running = asyncio.create_task(return_freed_memory(stop, trim, every=0.01))
    await asyncio.wait_for(three.wait(), 10)
    stop.set()
    await asyncio.wait_for(running, 10)
    assert len(calls) >= 3


@pytest.mark.parametrize(
    ("collect_every", "trims", "expected"),
    [
        (2, 4, ["trim", "collect", "trim", "trim", "collect", "trim"]),
        (1, 2, ["collect", "trim", "collect", "trim"]),
        (0, 2, ["collect", "trim", "collect", "trim"]),  # at least every period
        (6, 3, ["trim", "trim", "trim"]),
    ],
)
async def test_collects_every_few_periods_before_it_trims(
    collect_every: int, trims: int, expected: list[str]
) -> None:
    stop = asyncio.Event()
    done: list[str] = []

    def trim() -> bool:
        done.append("trim")
        if done.count("trim") == trims:
            stop.set()
        return True

    def collect() -> int:
        done.append("collect")
        return 0

    await asyncio.wait_for(
        return_freed_memory(stop, trim, every=0.001, collect=collect, collect_every=collect_every), 10
    )
    assert done == expected


async def test_without_trim_it_still_collects() -> None:
    stop = asyncio.Event()

    def collect() -> int:
        stop.set()
        return 7

    await asyncio.wait_for(return_freed_memory(stop, None, every=0.001, collect=collect, collect_every=1), 10)
    assert stop.is_set()


def test_a_collection_is_logged_with_its_reason_and_what_it_found(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="inno_notify.memory"):
        assert collect_garbage("term ended", lambda: 42) == 42
    assert "term ended: 42 unreachable object(s) collected" in caplog.text


async def test_without_trim_it_says_so_and_ends_with_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    stop = asyncio.Event()
    with caplog.at_level(logging.DEBUG, logger="inno_notify.memory"):
        running = asyncio.create_task(return_freed_memory(stop, None, every=0.01))
        stop.set()
        await asyncio.wait_for(running, 10)
    assert "no malloc_trim in this C library" in caplog.text
