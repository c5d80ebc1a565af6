"""The short mode of bench/soak.py, on every test run: a few hundred jobs through every fault of the
schedule (watch drops, 410s, stalls, API 500s, Prometheus stopped, Slack 429/5xx, SMTP refusing,
Postgres connections killed, hostile objects), two SIGKILLs of the leading replica and SIGSTOPs of
the other while it leads, finished jobs deleted as a TTL does, with the bench's invariants (nothing
lost or recorded wrong, duplicates only within what crashes can repeat (CONTRACT.md §6: the sends in
flight at each kill or freeze; ≤ kills is the full soak's measured property, a matter of timing on
a loaded machine), nothing sent for opted-out jobs, nothing rejected, RSS growth ≤ 10 %) deciding
its exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.prometheus, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not HAVE_PROMETHEUS, reason="prometheus/promtool not installed")
def test_soak_short_mode_keeps_its_invariants() -> None:
    done = subprocess.run(
        [sys.executable, "bench/soak.py", "--short"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    figures = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    assert int(figures["kills"]) >= 2 and int(figures["lost"]) == 0, figures
    assert int(figures["faults"]) >= 9, figures  # every kind of fault fired at least once
