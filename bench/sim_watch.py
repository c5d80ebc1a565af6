"""How fast the simulated API server pushes watch events: the ceiling of every sim-backed benchmark.

Jobs are created in the simulated API server while one raw watch (kubernetes-asyncio's ApiClient over
HTTP, in the same process) reads the stream line by line, as the old suite test did; the clock runs
from the first write to the last line read, so the writes are included.

Prints `name=value` lines:
- events: watch events read (each one Job created);
- seconds: first write to last line read, best of --rounds;
- events_per_s: events / seconds, best of --rounds; events_per_s_median over the rounds;
- loadavg: /proc/loadavg when the run ended.

Exits 1 if a round lost or reordered an event, or if the best rate is under --floor (the 1,000
events/s that the benchmarks over the sim assume).

Usage: .venv/bin/python bench/sim_watch.py [--events 5000] [--rounds 3] [--floor 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.kube import load_api_client
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS


def job(name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": {"template": template}}


async def one_round(count: int) -> tuple[float, bool]:
    """Seconds from the first write to the last line read, and whether every event came in order."""
    async with SimKubeServer() as sim:
        with tempfile.TemporaryDirectory() as tmp:
            api = await load_api_client(sim.kubeconfig(Path(tmp) / "kubeconfig"))
        try:
            response: aiohttp.ClientResponse = await api.call_api(
                "/apis/batch/v1/jobs",
                "GET",
                query_params=[("watch", "true"), ("resourceVersion", "0")],
                _preload_content=False,
            )
            async with asyncio.timeout(10):
                while sim.open_watches < 1:  # noqa: ASYNC110 - the server's connections announce nothing
                    await asyncio.sleep(0.01)
            started = time.perf_counter()
            for i in range(count):
                sim.create(JOBS, job(f"j{i}"))
                if i % 500 == 0:
                    await asyncio.sleep(0)  # let the stream flush while the writes go on
            names = []
            async with asyncio.timeout(300):
                while len(names) < count:
                    line = await response.content.readline()
                    if line.strip():
                        names.append(orjson.loads(line)["object"]["metadata"]["name"])
            elapsed = time.perf_counter() - started
            response.close()
        finally:
            await api.close()
    return elapsed, names == [f"j{i}" for i in range(count)]


async def measure(count: int, rounds: int) -> tuple[list[float], bool]:
    results = [await one_round(count) for _ in range(rounds)]
    return [seconds for seconds, _ in results], all(in_order for _, in_order in results)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", type=float, default=1000.0, help="events/s below which it exits 1")
    args = parser.parse_args()
    seconds, in_order = asyncio.run(measure(args.events, args.rounds))
    rates = [args.events / s for s in seconds]
    figures = {
        "events": args.events,
        "rounds": args.rounds,
        "seconds": f"{min(seconds):.3f}",
        "events_per_s": round(max(rates)),
        "events_per_s_median": round(statistics.median(rates)),
        "in_order": in_order,
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }
    for name, value in figures.items():
        print(f"{name}={value}")
    return 0 if in_order and max(rates) >= args.floor else 1


if __name__ == "__main__":
    sys.exit(main())
