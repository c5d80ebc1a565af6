"""Ingestion throughput and latency: watch events of every kind through the sim API server into Postgres.

The mix (unless `--jobs-only`): of every ten runs, eight are batch Jobs (six events each: the Job
and its pod created, started, ended), one is a PyTorchJob of a Master and a Worker (the operator's
writes: the run, its pods, their phases, its conditions) and one an Argo Workflow of two steps,
one on a GPU (the Workflow's updates and its step pods) — every kind through the one pipeline
(service.ingest with its workflow recorder), as `serve` runs it.

Prints `name=value` lines:
- events, mix: the events of the throughput run and what they were (jobs, training runs, workflows);
- events_per_s: events through kubernetes-asyncio's HTTP watch, the batched pipeline, into Postgres,
  on one core: this process runs the watch and the pipeline, as `serve` does, and the simulated API
  server runs in a child process of its own (the real one is another machine), having built every
  object before the clock starts;
- batches: the transactions those events were written in;
- cpu_us_per_event: CPU time of this process (watch and pipeline) over the throughput run, per
  event; unlike events_per_s it hardly moves with the machine's load; sim_cpu_us_per_event: the
  API server's, in its process;
- p99_commit_ms / p50_commit_ms: event received by the service → its batch committed, at 200 events/s;
- baseline_events_per_s: the same watch of batch Jobs only into a naive consumer (parse, read,
  merge, one commit per event), run in the same process;
- speedup: events_per_s / baseline_events_per_s;
- ceiling_rows_per_s: the events of as many batch Jobs parsed beforehand into their job and pod
  records and upserted in transactions of `batch_max` rows, nothing else on the clock (no watch,
  no parsing, no reads or merging): what the database takes from this process; ceiling_rows =
  the rows written, one per event;
- ceiling_ratio: events_per_s / ceiling_rows_per_s;
- loadavg: /proc/loadavg when the run ended (the machine may be shared: read figures beside it).

`--fence` runs the pipeline's store as an elected leader's: every ingest transaction first checks
the lease (docs/ha.md); the naive baseline stays unfenced.

Usage: .venv/bin/python bench/ingest.py [--jobs 2000] [--postgres postgresql+asyncpg://postgres@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inno_notify.adapters.db.leases import UNFENCED, Fence, LeaseFence, LeaseRepository
from inno_notify.adapters.db.migrate import migrate
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.domain.kinds import OPTIONAL_KINDS
from inno_notify.domain.parsing import ParseConfig, merge_job, parse_job, parse_pod
from inno_notify.domain.routing import Directory
from inno_notify.gc_tuning import tune_for_ingest
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.workflow_tracking import WorkflowOptions, join_recorder
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS, TRAINING_CRDS, KubeStore
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from inno_notify.sim.pipelines import Change, SimArgoWorkflow, SimAttempt, SimStep, apply_change, argo_changes
from inno_notify.sim.training import pytorchjob_run, training_changes

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
# What the throughput run cost this process (the sim server, the watch and the pipeline together).
THROUGHPUT_CPU: dict[str, float] = {}
CFG = ParseConfig(cluster="bench")
EVENTS_PER_JOB = 6


def lifecycle(i: int) -> list[tuple[Any, dict[str, Any], bool]]:
    """(resource, object, is_create) for the six writes of one job's life."""
    spec = JobSpec(name=f"bench-{i:06d}", namespace=f"team-{i % 20}", owner="alice@example.com", gpus=4)
    start = T0 + timedelta(seconds=i)
    job = job_object(spec, start)
    pod = pod_object(job, f"{i:05d}", start)
    running = pod_running(pod, "node-1", start + timedelta(seconds=5), start + timedelta(seconds=9))
    end = start + timedelta(hours=1)
    return [
        (JOBS, job, True),
        (PODS, pod, True),
        (JOBS, job_started(job, start + timedelta(seconds=1)), False),
        (PODS, running, False),
        (PODS, pod_terminated(running, end, 0), False),
        (JOBS, job_succeeded(job_started(job, start), end), False),
    ]


def training_run(i: int) -> list[Change]:
    """A PyTorchJob of a Master and a Worker, 4 GPUs each, an hour long."""
    start = T0 + timedelta(seconds=i)
    run = pytorchjob_run(
        f"bench-pt-{i:06d}",
        f"team-{i % 20}",
        start=start,
        workers=1,
        seconds=3600,
        clean_pod_policy="All",
        owner="alice@example.com",
    )
    return training_changes(run)


def workflow_run(i: int) -> list[Change]:
    """An Argo Workflow of two steps, the second on a GPU."""
    start = T0 + timedelta(seconds=i)
    steps = (
        SimStep("prepare", (SimAttempt(start + timedelta(seconds=5), 300),)),
        SimStep("train", (SimAttempt(start + timedelta(seconds=310), 3000),), gpus=1),
    )
    return argo_changes(
        SimArgoWorkflow(f"bench-wf-{i:06d}", f"team-{i % 20}", start, steps, "alice@example.com")
    )


def unit_changes(i: int, mix: bool) -> tuple[str, list[Change]]:
    """The writes of run `i`: of every ten in the mix, one training run and one workflow."""
    if mix and i % 10 == 3:
        return "training", training_run(i)
    if mix and i % 10 == 7:
        return "workflows", workflow_run(i)
    return "jobs", [Change(T0, rt, "create" if create else "update", obj) for rt, obj, create in lifecycle(i)]


async def no_directory() -> Directory:
    return Directory({}, {})


class TimedIngestor(Ingestor):
    """Records when each event reached the service and when its batch was committed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.received: deque[float] = deque()
        self.latencies_ms: list[float] = []

    async def on_event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        self.received.append(time.perf_counter())
        await super().on_event(kind, event_type, obj)

    async def apply(self, items: Any) -> None:
        await super().apply(items)
        done = time.perf_counter()
        for _ in range(sum(1 for kind, _, _ in items if kind != "relist")):
            if self.received:
                self.latencies_ms.append((done - self.received.popleft()) * 1000)


class NaiveConsumer:
    """The design we avoid: one read-merge-write transaction per event."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.events = 0

    async def on_event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        if kind == "Job":
            new = parse_job(obj, CFG)
            # The read and the write each in a transaction of their own, as a naive consumer has it.
            async with self.store.jobs.ingest_transaction() as tx:
                old = (await tx.get_jobs(CFG.cluster, [new.uid])).get(new.uid)
            async with self.store.jobs.ingest_transaction() as tx:
                await tx.write(CFG.cluster, [merge_job(old, new)], [], [])
        elif kind == "Pod":
            async with self.store.jobs.ingest_transaction() as tx:
                await tx.write(CFG.cluster, [], [parse_pod(obj, CFG)], [])
        self.events += 1

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None:
        return None


async def until(condition: Callable[[], bool], poll: float = 0.005) -> None:
    """Polls a counter of another component (no event to wait on)."""
    while True:
        if condition():
            return
        await asyncio.sleep(poll)


async def fresh_database(admin_url: str, name: str) -> str:
    dsn = admin_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    await migrate(url)
    return url


# --- the simulated API server, in a process of its own ---------------------------------------------


def planned_writes(first: int, runs: int, mix: bool) -> list[Change]:
    return [c for i in range(first, first + runs) for c in unit_changes(i, mix)[1]]


def mix_of(first: int, runs: int, mix: bool) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(first, first + runs):
        kind = unit_changes(i, mix)[0]
        counts[kind] = counts.get(kind, 0) + 1
    return counts


async def sim_child(kubeconfig: Path) -> None:
    """Serves the simulated API server and writes into it when told, one command a line on stdin:
    `prepare FIRST RUNS RATE MIX` builds the writes of those runs' lives (answered `prepared`), `go`
    writes them, as fast as the server takes them or RATE a second (answered `done EVENTS CPU_S`,
    CPU_S being this process's CPU time over the writes); an empty line stops it."""
    sim = SimKubeServer(bookmark_interval=30, crds=("argo", *TRAINING_CRDS))
    await sim.start()
    sim.kubeconfig(kubeconfig)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    writes: list[Change] = []
    rate = 0.0
    while words := (await reader.readline()).decode().split():
        if words[0] == "prepare":
            writes = planned_writes(int(words[1]), int(words[2]), words[4] == "mix")
            rate = float(words[3])
            print("prepared", flush=True)
        elif words[0] == "go":
            cpu_started = time.process_time()
            began = time.perf_counter()
            for n, change in enumerate(writes):
                if rate:
                    delay = began + n / rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                elif n % 200 == 0:
                    await asyncio.sleep(0)  # let the server stream while it is written to
                apply_change(sim, change)
            print(f"done {len(writes)} {time.process_time() - cpu_started:.6f}", flush=True)
    await sim.stop()


class SimProcess:
    """A bench's `--sim-child` (this one's, or `script`'s), driven over its stdin and stdout."""

    def __init__(self, proc: asyncio.subprocess.Process, kubeconfig: Path) -> None:
        self.proc = proc
        self.kubeconfig = kubeconfig

    @classmethod
    async def start(cls, kubeconfig: Path, script: str = __file__) -> SimProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            script,
            "--sim-child",
            "--kubeconfig",
            str(kubeconfig),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            # A child's own stdout is its answers: its logs go to stderr.
        )
        made = cls(proc, kubeconfig)
        await made.answer("ready")
        return made

    async def answer(self, expected: str) -> list[str]:
        assert self.proc.stdout is not None
        words = (await self.proc.stdout.readline()).decode().split()
        if not words or words[0] != expected:
            raise RuntimeError(f"the sim child said {words!r}, not {expected!r}")
        return words[1:]

    async def tell(self, *words: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((" ".join(map(str, words)) + "\n").encode())
        await self.proc.stdin.drain()

    async def prepare(self, first: int, runs: int, rate: float = 0.0, mix: bool = True) -> None:
        await self.tell("prepare", first, runs, rate, "mix" if mix else "jobs")
        await self.answer("prepared")

    async def written(self) -> tuple[int, float]:
        """After `go`: the events written and the child's CPU seconds, once all are written."""
        events, cpu_s = await self.answer("done")
        return int(events), float(cpu_s)

    async def stop(self) -> None:
        await self.tell("")
        await asyncio.wait_for(self.proc.wait(), 30)


async def watch_into(
    consumer: Any, kubeconfig: Path, mix: bool = True
) -> tuple[ClusterWatcher, Any, asyncio.Task[None]]:
    """Watches start from the lists' version: anything written after the lists reaches them. In the
    mix, Argo and the training operators are watched and the pipeline told which kinds are (as
    `serve` does)."""
    api = await load_api_client(kubeconfig)
    watcher = ClusterWatcher(
        api,
        consumer.on_event,
        consumer.on_relist,
        kueue=False,
        argo=mix,
        options=WatchOptions(),
        workloads=[(spec, True) for spec in OPTIONAL_KINDS] if mix else (),
        on_kinds=consumer.watch_kinds if mix else lambda _: None,
    )
    task = asyncio.create_task(watcher.run())
    await watcher.wait_ready()
    return watcher, api, task


async def stop(api: Any, task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await api.close()


def pipeline(store: Store, mix: bool) -> TimedIngestor:
    """The one pipeline as `serve` composes it: in the mix, with its workflow recorder."""
    ingestor = TimedIngestor(store, CFG, IngestOptions(), lambda: T0 + timedelta(days=1), T0)
    if mix:
        announcer = ServingAnnouncer(store, no_directory, frozenset(), T0, 3600)
        join_recorder(ingestor, WorkflowOptions(), announcer)
    return ingestor


async def throughput(url: str, jobs: int, kubeconfig_dir: Path, fence: Fence, mix: bool) -> tuple[float, int]:
    store = Store.from_url(url, fence)
    await store.ping()  # a running service's pool is open
    sim = await SimProcess.start(kubeconfig_dir / "kc-throughput")
    ingestor = pipeline(store, mix)
    consumer_task = asyncio.create_task(ingestor.run())
    _, api, watch = await watch_into(ingestor, sim.kubeconfig, mix)
    await sim.prepare(0, jobs, mix=mix)
    expected = len(planned_writes(0, jobs, mix))
    started = time.perf_counter()
    cpu_started = time.process_time()
    await sim.tell("go")
    await until(lambda: ingestor.stats.events >= expected)
    await ingestor.drained()
    elapsed = time.perf_counter() - started
    THROUGHPUT_CPU["cpu_s"] = time.process_time() - cpu_started
    THROUGHPUT_CPU["batches"] = ingestor.stats.batches
    _, THROUGHPUT_CPU["sim_cpu_s"] = await sim.written()
    await stop(api, watch)
    consumer_task.cancel()
    await sim.stop()
    async with store.jobs.ingest_transaction() as tx:
        ended = await tx.open_jobs(CFG.cluster)
    assert not ended, f"{len(ended)} jobs still open after the run"
    await store.close()
    return expected / elapsed, expected


async def ceiling(url: str, jobs: int, fence: Fence) -> tuple[float, int]:
    """Rows per second of the pipeline's write alone: the records the throughput run's events parse
    to, upserted in transactions of `batch_max` rows through the same store call, with nothing
    read, parsed or merged while the clock runs. Each row is written (a batch never holds one uid
    twice: the k-th event of every job goes in together), so rows = events."""
    store = Store.from_url(url, fence)
    server = KubeStore()
    stages: list[list[tuple[str, Any]]] = [[] for _ in range(EVENTS_PER_JOB)]
    for i in range(30_000_000, 30_000_000 + jobs):
        for k, (rt, obj, create) in enumerate(lifecycle(i)):
            stored = orjson.loads(orjson.dumps((server.create if create else server.update)(rt, obj)))
            if rt is JOBS:
                stages[k].append(("job", parse_job(stored, CFG)))
            else:
                stages[k].append(("pod", parse_pod(stored, CFG)))
    batch_max = IngestOptions().batch_max
    batches = [stage[n : n + batch_max] for stage in stages for n in range(0, len(stage), batch_max)]
    await store.ping()
    started = time.perf_counter()
    for batch in batches:
        async with store.jobs.ingest_transaction() as tx:
            job_rows = [r for kind, r in batch if kind == "job"]
            pod_rows = [r for kind, r in batch if kind == "pod"]
            await tx.write(CFG.cluster, job_rows, pod_rows, [])
    elapsed = time.perf_counter() - started
    await store.close()
    rows = sum(len(b) for b in batches)
    return rows / elapsed, rows


async def latency(
    url: str, rate: float, seconds: float, kubeconfig_dir: Path, fence: Fence, mix: bool
) -> list[float]:
    store = Store.from_url(url, fence)
    sim = await SimProcess.start(kubeconfig_dir / "kc-latency")
    ingestor = pipeline(store, mix)
    consumer_task = asyncio.create_task(ingestor.run())
    _, api, watch = await watch_into(ingestor, sim.kubeconfig, mix)
    ingestor.latencies_ms.clear()
    jobs = max(1, round(rate * seconds / EVENTS_PER_JOB))
    await sim.prepare(10_000_000, jobs, rate, mix)
    await sim.tell("go")
    total, _ = await sim.written()
    await until(lambda: ingestor.stats.events >= total)
    await ingestor.drained()
    await stop(api, watch)
    consumer_task.cancel()
    await sim.stop()
    await store.close()
    return ingestor.latencies_ms


async def baseline(url: str, jobs: int, kubeconfig_dir: Path) -> float:
    store = Store.from_url(url)
    await store.ping()
    sim = await SimProcess.start(kubeconfig_dir / "kc-baseline")
    consumer = NaiveConsumer(store)
    _, api, watch = await watch_into(consumer, sim.kubeconfig, mix=False)
    await sim.prepare(20_000_000, jobs, mix=False)
    expected = jobs * EVENTS_PER_JOB
    started = time.perf_counter()
    await sim.tell("go")
    await until(lambda: consumer.events >= expected)
    elapsed = time.perf_counter() - started
    await sim.written()
    await stop(api, watch)
    await sim.stop()
    await store.close()
    return expected / elapsed


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--baseline-jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument(
        "--fence", action="store_true", help="write as an elected leader (fenced by the lease)"
    )
    parser.add_argument(
        "--jobs-only", action="store_true", help="batch Jobs only (the mix before 2026-12-03)"
    )
    parser.add_argument("--sim-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.sim_child:
        await sim_child(Path(args.kubeconfig))
        return
    tune_for_ingest()  # as `inno-notify serve` does
    url = await fresh_database(args.postgres, "inno_bench_ingest")
    leases = LeaseRepository.from_url(url)
    fence: Fence = UNFENCED
    if args.fence:
        lease = await leases.acquire(CFG.cluster, "bench", 3600)
        assert lease is not None
        fence = LeaseFence(CFG.cluster, "bench")
        fence.arm(lease.term)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        mix = not args.jobs_only
        rate, events = await throughput(url, args.jobs, folder, fence, mix)
        ceiling_rate, ceiling_rows = await ceiling(url, args.jobs, fence)
        latencies = await latency(url, args.rate, args.seconds, folder, fence, mix)
        naive = await baseline(url, args.baseline_jobs, folder)
    await leases.close()
    print(f"fenced={args.fence}")
    print(f"events={events}")
    print("mix=" + ",".join(f"{k}:{v}" for k, v in sorted(mix_of(0, args.jobs, not args.jobs_only).items())))
    print(f"events_per_s={rate:.0f}")
    print(f"batches={THROUGHPUT_CPU['batches']:.0f}")
    print(f"cpu_us_per_event={THROUGHPUT_CPU['cpu_s'] / events * 1e6:.0f}")
    print(f"sim_cpu_us_per_event={THROUGHPUT_CPU['sim_cpu_s'] / events * 1e6:.0f}")
    print(f"ceiling_rows={ceiling_rows}")
    print(f"ceiling_rows_per_s={ceiling_rate:.0f}")
    print(f"ceiling_ratio={rate / ceiling_rate:.2f}")
    print(f"latency_rate_per_s={args.rate:.0f}")
    print(f"p50_commit_ms={statistics.median(latencies):.1f}")
    print(f"p99_commit_ms={percentile(latencies, 0.99):.1f}")
    print(f"baseline_events={args.baseline_jobs * EVENTS_PER_JOB}")
    print(f"baseline_events_per_s={naive:.0f}")
    print(f"speedup={rate / naive:.1f}")
    print(f"loadavg={load_average()}")


if __name__ == "__main__":
    asyncio.run(main())
