"""Composition root: builds the adapters from the settings and runs the service's parts together.

`serve` runs every component in one TaskGroup until SIGTERM/SIGINT, then asks them to stop and
waits for them (graceful: in-flight work finishes). `check_dependencies` reaches each configured
dependency once, for `inno-notify check`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from dataclasses import dataclass

from sqlalchemy import text

from inno_notify.adapters.db.engine import create_engine
from inno_notify.adapters.db.migrate import migrate
from inno_notify.settings import Settings

log = logging.getLogger("inno_notify.runtime")

CHECK_TIMEOUT_SECONDS = 10.0

# A component runs until the stop event is set, then returns after finishing its in-flight work.
Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


def _one_line(exc: BaseException) -> str:
    text_ = " ".join(str(exc).split()) or type(exc).__name__
    return text_[:300]


async def _check_database(settings: Settings) -> CheckResult:
    engine = create_engine(settings.database_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return CheckResult("database", True, settings.database_url_redacted)
    except Exception as exc:  # any failure to reach it is the answer we report
        return CheckResult("database", False, f"{settings.database_url_redacted}: {_one_line(exc)}")
    finally:
        await engine.dispose()


CHECKS: tuple[Callable[[Settings], Awaitable[CheckResult]], ...] = (_check_database,)


async def check_dependencies(settings: Settings) -> list[CheckResult]:
    """Reaches every configured dependency once; one result per dependency."""

    async def bounded(check: Callable[[Settings], Awaitable[CheckResult]]) -> CheckResult:
        name = check.__name__.removeprefix("_check_")
        try:
            return await asyncio.wait_for(check(settings), CHECK_TIMEOUT_SECONDS)
        except TimeoutError:
            return CheckResult(name, False, f"no answer within {CHECK_TIMEOUT_SECONDS:.0f} s")

    return list(await asyncio.gather(*(bounded(check) for check in CHECKS)))


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Runs the service until `stop` is set (by SIGTERM/SIGINT when not given)."""
    if stop is None:
        stop = asyncio.Event()
        _install_signal_handlers(stop)
    applied = await migrate(settings.database_url)
    if applied:
        log.info("database migrated to %s", applied[-1])
    engine = create_engine(settings.database_url)
    components: list[tuple[str, Component]] = []
    try:
        async with asyncio.TaskGroup() as group:
            for name, component in components:
                group.create_task(component(stop), name=name)
            log.info(
                "inno-notify ready: cluster=%s database=%s components=%s",
                settings.cluster,
                settings.database_url_redacted,
                ",".join(name for name, _ in components) or "none",
            )
            await stop.wait()
            log.info("stopping: waiting for in-flight work")
    finally:
        await engine.dispose()
    log.info("stopped")
