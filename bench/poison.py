"""Hostile objects in the real ingest path: do they stop anyone else's records?

The simulated API server holds 10,000 normal objects (5,000 Jobs and their 5,000 Pods, each created
and then finished) with 1,000 hostile ones mixed in at random: the defects of issue 12 (completion
index "²" or 5,000 digits, an owner or team over 2.7 KB, NUL in annotations and termination
messages, an owner of two addresses) and more (wrong types at fields, numbers past their columns,
times out of range, deep nesting, Events and Kueue Workloads with broken fields). kubernetes-asyncio
watches them over HTTP (ClusterWatcher), the Ingestor writes them to Postgres.

Prints `name=value` lines:
- objects, hostile: objects written to the API server (hostile included), and the hostile ones;
- events: watch events handed to the ingestor;
- rejected: objects and watch lines set aside (parse errors, writes the database refused, lines);
- values_dropped: values set aside from objects that were kept (an owner of two addresses, …);
- crashes: watcher restarts after an exception, ingest batches dropped, a consumer that died;
- stalled_batches: writes retried after a failure (a refused batch used to be retried forever),
  plus one if the pipeline did not drain within --timeout;
- normal_recorded, normal_expected: normal Jobs recorded as succeeded plus normal Pods stored;
- events_per_s: watch events through the whole path, first write to drained;
- hostile_workflows: Argo Workflows of issue 29 mixed in (a retry storm of 95,000 attempts, 29 MB,
  which the watch sets aside as a line over its 4 MiB limit; the same storm cut to 12,000
  attempts, under the limit; 80 attempts under 10,000-character node names), recorded by the
  one pipeline's workflow recorder as in `serve`, each updated three times;
  hostile_workflows_recorded: those stored;
  workflow_lines_set_aside: their watch lines set aside; workflow_record_bytes_max: the largest
  workflow record stored; workflow_writes_skipped: updates that changed nothing stored;
- probe_p99_ms, probe_max_ms, probes: `GET /healthz` on the probe port, from another thread every
  20 ms while the objects are written and drained (a blocked event loop shows here; the kubelet's
  liveness timeout is 3 s);
- loadavg: /proc/loadavg when the run ended.

Exits 1 unless crashes=0, stalled_batches=0, every normal object was recorded and probe_p99_ms
is at most 250.

Usage: .venv/bin/python bench/poison.py [--jobs 5000] [--hostile 1000] [--storm 95000]
    [--postgres postgresql+asyncpg://…]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import logging
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from ingest import SimProcess, fresh_database, until  # the sibling benchmark's helpers
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.db.workflow_rows import record_to_json
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.api.probes import create_probe_app, start_probes
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.routing import Directory
from inno_notify.gc_tuning import tune_for_ingest
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.workflow_tracking import WorkflowOptions, join_recorder
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import (
    ARGO_WORKFLOWS,
    CORE_EVENTS,
    JOBS,
    PODS,
    WORKLOADS_V1BETA2,
    ResourceType,
)
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from inno_notify.sim.pipelines import retry_storm_workflow
from inno_notify.telemetry import Telemetry

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
CFG = ParseConfig(cluster="poison")
INDEX = "batch.kubernetes.io/job-completion-index"
Write = tuple[ResourceType, dict[str, Any], bool]


def normal(i: int) -> list[Write]:
    """A job and its pod, created and then finished: four writes, two objects."""
    spec = JobSpec(name=f"normal-{i:05d}", namespace=f"team-{i % 20}", owner="alice@example.com", gpus=1)
    start = T0 + timedelta(seconds=i)
    job = job_object(spec, start)
    pod = pod_object(job, f"{i:05d}", start)
    running = pod_running(pod, "node-1", start + timedelta(seconds=5), start + timedelta(seconds=9))
    end = start + timedelta(hours=1)
    return [
        (JOBS, job, True),
        (PODS, pod, True),
        (PODS, pod_terminated(running, end, 0), False),
        (JOBS, job_succeeded(job_started(job, start), end), False),
    ]


def _random_text(rng: random.Random, chars: int) -> str:
    # Random CJK: Postgres compresses index entries, so repeated characters would fit; these do not.
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(chars))


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"n": [value]}
    return value


def _job(i: int, annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = JobSpec(name=f"hostile-{i:04d}", namespace="hostile", owner="mallory@example.com")
    job = job_object(spec, T0)
    job["metadata"]["annotations"].update(annotations or {})
    return job


def _pod(i: int, **index: str) -> dict[str, Any]:
    job = _job(i)
    pod = pod_object(job, "p", T0)
    pod["metadata"]["annotations"] = {INDEX: index["index"]} if "index" in index else {}
    return pod


def _terminated_pod(i: int, **state: Any) -> dict[str, Any]:
    pod = pod_running(_pod(i), "node-1", T0, T0)
    done = pod_terminated(pod, T0 + timedelta(minutes=5), 1)
    done["status"]["containerStatuses"][0]["state"]["terminated"].update(state)
    return done


def _with(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target = obj
    for step in path[:-1]:
        target = target.setdefault(step, {}) if isinstance(target, dict) else target[step]
    target[path[-1]] = value
    return obj


def _event(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"hostile-{i:04d}.1", "namespace": "hostile"},
        "reason": "Evicted",
        "involvedObject": {"kind": "Pod", "uid": f"pod-{i}", "name": "p"},
        "count": 1,
        **fields,
    }


def _workload(i: int, labels: dict[str, Any] | None = None, status: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": f"job-hostile-{i:04d}", "namespace": "hostile", "labels": labels or {}},
        "spec": {"queueName": "lq"},
    }
    if status is not None:
        obj["status"] = status
    return obj


def hostile(i: int, rng: random.Random) -> Write:
    """One hostile object, the recipes taken in turn."""
    recipes: list[Callable[[], Write]] = [
        lambda: (PODS, _pod(i, index="²"), True),
        lambda: (PODS, _pod(i, index="1" * 5000), True),
        lambda: (JOBS, _job(i, {"inno-notify/owner": _random_text(rng, 3000)}), True),
        lambda: (JOBS, _job(i, {"inno-notify/team": _random_text(rng, 3000)}), True),
        lambda: (JOBS, _job(i, {"inno-notify/group": "sweep\x00", "note": "a\x00b"}), True),
        lambda: (PODS, _terminated_pod(i, message="Traceback\x00\x00 (most recent call last)"), True),
        lambda: (JOBS, _job(i, {"inno-notify/owner": "attacker@evil.example,victim@corp.example"}), True),
        lambda: (JOBS, _with(_job(i), ("spec", "parallelism"), "²"), True),
        lambda: (JOBS, _with(_job(i), ("spec", "completions"), 2**40), True),
        lambda: (JOBS, _with(_job(i), ("metadata", "labels", "nested"), {"a": [1, 2]}), True),
        lambda: (JOBS, _with(_job(i), ("status", "conditions"), {"type": "Complete"}), True),
        lambda: (JOBS, _with(_job(i), ("status", "startTime"), "0001-01-01T00:00:00+05:00"), True),
        lambda: (JOBS, _with(_job(i), ("spec", "template", "spec", "extra"), _nest(100)), True),
        lambda: (PODS, _terminated_pod(i, exitCode=2**31), True),
        lambda: (PODS, _terminated_pod(i, reason="x" * 100_000), True),
        lambda: (
            PODS,
            _with(_pod(i), ("spec", "containers", 0, "resources", "limits", "memory"), "8Ei"),
            True,
        ),
        lambda: (
            PODS,
            _with(_pod(i), ("spec", "containers", 0, "resources", "limits", "cpu"), "1e400"),
            True,
        ),
        lambda: (CORE_EVENTS, _event(i, count="²"), True),
        lambda: (CORE_EVENTS, _event(i, involvedObject="pod/p"), True),
        lambda: (CORE_EVENTS, _event(i, reason="Evicted" + "\x00" * 10), True),
        lambda: (WORKLOADS_V1BETA2, _workload(i, {"kueue.x-k8s.io/job-uid": "j" * 300}), True),
        lambda: (
            WORKLOADS_V1BETA2,
            _workload(i, status={"schedulingStats": {"evictions": [{"reason": "Preempted", "count": -5}]}}),
            True,
        ),
    ]
    return recipes[i % len(recipes)]()


def hostile_workflows(storm: int) -> list[Write]:
    """Issue 29's Workflows, each written and then updated three times (the controller adds to a
    running Workflow): a retry storm of `storm` attempts, and the same under the watch's line limit
    (4 MiB; a larger object is set aside by the watcher before anything decodes it), and attempts
    under 10,000-character names."""
    shapes = [
        retry_storm_workflow("storm", "poison", T0, attempts=storm, owner="a@example.com"),
        retry_storm_workflow("storm-under-limit", "poison", T0, attempts=min(storm, 12_000)),
        retry_storm_workflow("long-names", "poison", T0, attempts=80, name_chars=10_000),
    ]
    writes: list[Write] = []
    for shape in shapes:
        writes.append((ARGO_WORKFLOWS, shape, True))
        for n in range(3):
            update = dict(shape, metadata={**shape["metadata"], "labels": {"update": str(n)}})
            writes.append((ARGO_WORKFLOWS, update, False))
    return writes


class Prober:
    """GET /healthz on the probe port every `interval` seconds from a thread of its own, so that a
    blocked event loop is measured, not shared."""

    def __init__(self, port: int, interval: float = 0.02) -> None:
        self.port = port
        self.interval = interval
        self.latencies_ms: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.perf_counter()
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                connection.request("GET", "/healthz")
                ok = connection.getresponse().status == 200
                connection.close()
            except OSError:
                ok = False
            self.latencies_ms.append((time.perf_counter() - started) * 1000)
            self.failures += not ok


async def _no_directory() -> Directory:
    return Directory({}, {})


def all_writes(jobs: int, hostile_count: int, storm: int) -> tuple[list[Write], int]:
    """The writes of a run, normal and hostile mixed at random (seeded: the child and the parent
    build the same), and how many of them are Workflows (the workflow recorder's)."""
    rng = random.Random(12)
    writes = [w for i in range(jobs) for w in normal(i)]
    for i in range(hostile_count):
        writes.insert(rng.randrange(len(writes) + 1), hostile(i, rng))
    workflow_writes = hostile_workflows(storm)
    # At random places, in their order: a Workflow is created before it is updated.
    places = sorted(rng.randrange(len(writes) + 1) for _ in workflow_writes)
    for offset, (place, write) in enumerate(zip(places, workflow_writes, strict=True)):
        writes.insert(place + offset, write)
    return writes, len(workflow_writes)


async def sim_child(kubeconfig: Path) -> None:
    """The simulated API server in a process of its own (the real one is another machine: its JSON
    work on 15 MB objects must not count against the service's event loop). One command a line on
    stdin: `build JOBS HOSTILE STORM OUT` builds the writes and saves what the parent checks to
    OUT (answered `built`), `go` writes them (answered `done`); an empty line stops it."""
    sim = SimKubeServer(kueue_versions=("v1beta2",), bookmark_interval=30, crds=("argo",))
    await sim.start()
    sim.kubeconfig(kubeconfig)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    writes: list[Write] = []
    while words := (await reader.readline()).decode().split():
        if words[0] == "build":
            writes, _ = all_writes(int(words[1]), int(words[2]), int(words[3]))
            _save_checked(Path(words[4]), writes)
            print("built", flush=True)
        elif words[0] == "go":
            for n, (rt, obj, create) in enumerate(writes):
                (sim.create if create else sim.update)(rt, obj)
                if n % 200 == 0:
                    await asyncio.sleep(0)  # let the server stream while it is written to
            print("done", flush=True)
    await sim.stop()


def _is_normal(write: Write) -> bool:
    return str(write[1]["metadata"]["name"]).startswith("normal-")


def _save_checked(path: Path, writes: list[Write]) -> None:
    """The uids the parent checks afterwards: every normal object's, and the normal Jobs'."""
    created = [w for w in writes if w[2] and _is_normal(w)]
    uids = {"all": [w[1]["metadata"]["uid"] for w in created]}
    uids["jobs"] = [w[1]["metadata"]["uid"] for w in created if w[0] is JOBS]
    path.write_bytes(orjson.dumps(uids))


async def run(
    url: str, jobs: int, hostile_count: int, drain_within: float, folder: Path, storm: int
) -> dict[str, Any]:
    store = Store.from_url(url)
    sim = await SimProcess.start(folder / "kubeconfig", script=__file__)
    registry = CollectorRegistry()
    telemetry = Telemetry.create(registry)
    now = lambda: T0 + timedelta(days=1)  # noqa: E731
    ingestor = Ingestor(store, CFG, IngestOptions(), now, T0, telemetry)
    announcer = ServingAnnouncer(store, _no_directory, frozenset(), T0, 3600)
    recorder = join_recorder(ingestor, WorkflowOptions(), announcer)
    consumer = asyncio.create_task(ingestor.run())
    probes = await start_probes(create_probe_app(store, lambda: {}, registry), "127.0.0.1:0")
    port = probes.addresses[0][1]
    api = await load_api_client(folder / "kubeconfig")
    watcher = ClusterWatcher(api, ingestor.on_event, ingestor.on_relist, options=WatchOptions(), argo=True)
    watch = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 30)

    await sim.tell("build", jobs, hostile_count, storm, folder / "uids.json")
    await sim.answer("built")
    checked = orjson.loads((folder / "uids.json").read_bytes())
    writes_total = 2 * 2 * jobs + hostile_count
    workflow_writes = 4 * 3
    prober = Prober(port).__enter__()
    started = time.perf_counter()
    await sim.tell("go")
    stalled_at_end = 0
    workflow_watch = watcher.watchers["Workflow"]

    def workflows_seen() -> int:
        # Every Workflow event reached the recorder, or was set aside by the watch (too large).
        return recorder.stats.events + sum(workflow_watch.stats.malformed.values())

    try:
        await asyncio.wait_for(sim.answer("done"), drain_within)
        await asyncio.wait_for(until(lambda: ingestor.stats.events >= writes_total), drain_within)
        await asyncio.wait_for(until(lambda: workflows_seen() >= workflow_writes), drain_within)
        await asyncio.wait_for(ingestor.drained(), drain_within)
    except TimeoutError:
        stalled_at_end = 1
    elapsed = time.perf_counter() - started
    prober.__exit__()
    await probes.cleanup()
    consumer_died = consumer.done() and not consumer.cancelled() and consumer.exception() is not None
    watch_died = watch.done()
    for task in (watch, consumer):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    await api.close()
    await sim.stop()

    uids, job_uids = checked["all"], checked["jobs"]
    workflow_names = sorted(w[1]["metadata"]["name"] for w in hostile_workflows(1) if w[2])
    records = [await store.workflows.find_workflow(CFG.cluster, "poison", name) for name in workflow_names]
    record_bytes = [len(orjson.dumps(record_to_json(r))) for r in records if r is not None]
    async with store.jobs.ingest_transaction() as tx:
        stored = await tx.get_jobs(CFG.cluster, job_uids)
    jobs_ok = sum(1 for job in stored.values() if job.status.value == "succeeded")
    pods = await store.jobs.pods_of_jobs(CFG.cluster, job_uids)
    pods_ok = sum(1 for group in pods.values() for pod in group if pod.finished_at is not None)
    await store.close()

    malformed = sum(sum(w.stats.malformed.values()) for w in watcher.watchers.values())
    stats = ingestor.stats
    return {
        "objects": len(uids) + hostile_count,
        "hostile": hostile_count,
        "events": stats.events,
        "rejected": stats.rejected + malformed,
        "values_dropped": stats.rejected_values,
        "crashes": sum(w.stats.crashes for w in watcher.watchers.values())
        + stats.dropped_batches
        + int(consumer_died)
        + int(watch_died),
        "stalled_batches": stats.retried_writes + stalled_at_end,
        "normal_recorded": jobs_ok + pods_ok,
        "normal_expected": len(uids),
        "events_per_s": round(stats.events / elapsed),
        "hostile_workflows": len(workflow_names),
        "hostile_workflows_recorded": len(record_bytes),
        "workflow_lines_set_aside": sum(workflow_watch.stats.malformed.values()),
        "workflow_record_bytes_max": max(record_bytes, default=0),
        "workflow_writes_skipped": recorder.stats.unchanged,
        "probes": len(prober.latencies_ms),
        "probe_failures": prober.failures,
        "probe_p99_ms": round(_p99(prober.latencies_ms), 1),
        "probe_max_ms": round(max(prober.latencies_ms, default=0.0), 1),
    }


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[98]


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    if args.sim_child:
        await sim_child(Path(args.kubeconfig))
        return {}
    url = await fresh_database(args.postgres, "inno_bench_poison")
    with tempfile.TemporaryDirectory() as tmp:
        return await run(url, args.jobs, args.hostile, args.timeout, Path(tmp), args.storm)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5000, help="normal jobs, each with one pod")
    parser.add_argument("--hostile", type=int, default=1000)
    parser.add_argument("--storm", type=int, default=95_000, help="attempts of the retry-storm Workflow")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to drain before calling it stalled"
    )
    parser.add_argument("--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sim-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # Set-aside objects are logged once each: a thousand warnings are the expected output, not news.
    logging.basicConfig(level=logging.ERROR)
    if not args.sim_child:
        tune_for_ingest()  # the service's process, as `inno-notify serve` sets it up
    figures = asyncio.run(measure(args))
    if args.sim_child:
        return 0
    figures["loadavg"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    for name, value in figures.items():
        print(f"{name}={value}")
    healthy = (
        figures["crashes"] == 0
        and figures["stalled_batches"] == 0
        and figures["normal_recorded"] == figures["normal_expected"]
        and figures["probe_p99_ms"] <= 250
        and figures["hostile_workflows_recorded"] >= 1
        and figures["probe_failures"] == 0
    )
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
