"""A scenario played through the whole service on the simulated cluster (the demo's `run_demo`:
watch → ingest → usage → advice → delivery), its console output kept out of the test's."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from inno_notify.demo import DemoResult, run_demo
from inno_notify.sim.workload import Workload


async def play(
    workload: Workload, out: Path, *, speed: float = 2000, timeout_seconds: float = 180, **options: Any
) -> DemoResult:
    """`workload` played at `speed` × simulated time; `options` go to run_demo as they are."""
    return await run_demo(
        speed=speed,
        out=out,
        console=Console(file=io.StringIO(), width=100),
        timeout_seconds=timeout_seconds,
        workload=workload,
        **options,
    )
