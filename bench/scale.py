"""A cluster as large as Kubernetes supports, relisted by `inno-notify serve`: time to ready, peak RSS,
and the event rate afterwards.

The simulated API server runs in a child process of its own (so that the RSS measured is the
service's alone) holding --pods pods and --jobs jobs (150,000 and 30,000 by default: 5 pods a job),
shaped like the captures in tests/fixtures/k8s (the Job `worker1`, the Pod of `e2e-cronjob-…`,
with a GPU request added) so that objects on the wire are their real size. The cluster is loaded
with `KubeStore.preload` from shared, pre-built parts, which takes seconds, not minutes. Two thirds
of the jobs finished days ago; the rest are running.

`inno-notify serve` is then started as a subprocess against it and a fresh Postgres database, and
the benchmark watches it from outside: /readyz on the probe port, the row counts in Postgres, and
/proc/<pid>/status (VmRSS sampled; VmHWM, the kernel's own peak). Once every listed object is in the
database, --churn running jobs finish at once (each: its 5 pods terminated, then the Job succeeded,
6 watch events) and the clock runs until Postgres holds every one of those states.

Prints `name=value` lines:
- pods, jobs: objects in the simulated cluster; object_bytes_pod / object_bytes_job: their JSON size;
- preload_s: building and loading the cluster in the sim process;
- readyz_s: serve started → /readyz answers 200 (every initial list handed to ingestion);
- applied_s: serve started → Postgres holds every pod and job of the lists;
- ready_s: the later of the two (all initial lists applied); ready_cpu_s: the CPU seconds serve used
  by then (user + system), the cost of the relist whatever the machine's load;
- peak_rss_mib: the service's peak resident memory (VmHWM) by then;
- events, events_per_s: the churn's watch events / (first write → last state in Postgres);
  churn_cpu_s: serve's CPU seconds over the churn;
- peak_rss_after_churn_mib: VmHWM once the churn is applied;
- restart_readyz_s, restart_ready_s, restart_cpu_s, restart_peak_rss_mib: serve stopped (SIGTERM)
  and started again over the full database: seconds to /readyz (answered by a replica that is not
  yet leading too, so it says little) and to every listed object taken (parsed or passed over as
  stored), its CPU seconds and peak RSS by then; restart_sim_cpu_s: the simulated API server's CPU
  seconds over the same window (it serves the lists on the same machine, competing for the cores);
- restart_changed: objects changed while serve was stopped (--restart-churn running jobs finish:
  their pods terminate, then the Job succeeds; 0 by default, nothing changes), restart_applied_s:
  restarted → Postgres holds those as finished; restart_parsed, restart_unchanged: the objects the
  restart parsed and those it passed over because the store holds them as they are
  (inno_notify_ingest_objects_total), restart_parsed_pct: parsed of all listed (target ≤ 1 % with
  nothing changed, issue 32);
- loadavg: /proc/loadavg when the run ended.

Exits 1 when the service does not get ready within --timeout or a figure misses its target with
--check (ready_s ≤ 60, peak_rss_mib ≤ 1024).

Usage: .venv/bin/python bench/scale.py [--pods 150000] [--jobs 30000] [--churn 2000]
       [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/postgres] [--check] [--profile FILE]
       [--profile-restart FILE] [--restart-churn 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import hashlib
import json
import os
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inno_notify.sim.kube_api import SimKubeServer  # noqa: E402
from inno_notify.sim.kube_store import JOBS, PODS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "k8s"
CLUSTER = "scale"
GPUS = "8"
READY_S_TARGET = 60.0
PEAK_RSS_MIB_TARGET = 1024.0

JsonObj = dict[str, Any]


def ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the simulated cluster (child process) -----------------------------------------------------------


class Shapes:
    """The fixtures' Job and Pod, with a GPU request, in the states the cluster needs.

    Every object built from them gets its own metadata; spec and status are shared between objects
    of one state (the sim never changes an object in place, and JSON does not care)."""

    def __init__(self, now: datetime) -> None:
        job = orjson.loads((FIXTURES / "job-succeeded.json").read_bytes())
        running_job = orjson.loads((FIXTURES / "job-running.json").read_bytes())
        pod = orjson.loads((FIXTURES / "pod-job-completed.json").read_bytes())
        for container in job["spec"]["template"]["spec"]["containers"] + pod["spec"]["containers"]:
            resources = container.setdefault("resources", {})
            resources.setdefault("requests", {})["nvidia.com/gpu"] = GPUS
            resources.setdefault("limits", {})["nvidia.com/gpu"] = GPUS
        self.job_spec = job["spec"]
        self.job_meta = job["metadata"]
        self.job_done = job["status"]  # finished in April 2026: long past any catch-up window
        self.job_running = running_job["status"]
        self.pod_meta = pod["metadata"]
        self.pod_spec = pod["spec"]
        self.pod_done = pod["status"]
        self.pod_running = running_pod_status(pod["status"], now - timedelta(hours=1))
        self.now = now

    def job(self, i: int, uid: str, done: bool) -> JsonObj:
        meta = {k: v for k, v in self.job_meta.items() if k not in ("resourceVersion", "uid", "labels")}
        name = f"train-{i:06d}"
        meta.update(
            name=name,
            namespace=f"team-{i % 50:02d}",
            uid=uid,
            labels={"app": "train", "team": f"team-{i % 50:02d}"},
            annotations={"inno-notify/owner": f"user{i % 400}@example.com"},
        )
        return {
            "metadata": meta,
            "spec": self.job_spec,
            "status": self.job_done if done else self.job_running,
        }

    def pod(self, job: JsonObj, k: int, done: bool) -> JsonObj:
        job_meta = job["metadata"]
        meta = {k: v for k, v in self.pod_meta.items() if k not in ("resourceVersion", "uid")}
        meta.update(
            name=f"{job_meta['name']}-{k}",
            generateName=f"{job_meta['name']}-",
            namespace=job_meta["namespace"],
            uid=str(uuid.UUID(int=uuid.UUID(job_meta["uid"]).int + k + 1)),
            labels={
                "batch.kubernetes.io/controller-uid": job_meta["uid"],
                "batch.kubernetes.io/job-name": job_meta["name"],
                "controller-uid": job_meta["uid"],
                "job-name": job_meta["name"],
            },
            ownerReferences=[
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": job_meta["name"],
                    "uid": job_meta["uid"],
                }
            ],
        )
        return {
            "metadata": meta,
            "spec": self.pod_spec,
            "status": self.pod_done if done else self.pod_running,
        }

    def finished_pod_status(self, at: datetime) -> JsonObj:
        status = copy.deepcopy(self.pod_running)
        status["phase"] = "Succeeded"
        for container in status["containerStatuses"]:
            started = container["state"]["running"]["startedAt"]
            container.update(
                ready=False,
                started=False,
                state={
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": ts(at),
                        "containerID": container.get("containerID"),
                    }
                },
            )
        return status

    def finished_job_status(self, at: datetime) -> JsonObj:
        status = copy.deepcopy(self.job_done)
        status["startTime"] = self.job_running.get("startTime")
        status["completionTime"] = ts(at)
        for condition in status.get("conditions", []):
            condition["lastTransitionTime"] = ts(at)
            condition["lastProbeTime"] = ts(at)
        status["succeeded"] = status.get("succeeded", 1)
        return status


def running_pod_status(done: JsonObj, started: datetime) -> JsonObj:
    status = copy.deepcopy(done)
    status["phase"] = "Running"
    for container in status.get("containerStatuses", []):
        container.update(ready=True, started=True, state={"running": {"startedAt": ts(started)}})
    for condition in status.get("conditions", []):
        if condition.get("type") in ("Ready", "ContainersReady"):
            condition.update(status="True", reason=None)
    status.pop("reason", None)
    return status


def build(shapes: Shapes, jobs: int, pods: int) -> Iterator[tuple[JsonObj, list[JsonObj], bool]]:
    """(job, its pods, running?) for the whole cluster; pods are spread evenly over the jobs."""
    per_job, extra = divmod(pods, jobs)
    for i in range(jobs):
        running = i % 3 == 0
        uid = str(uuid.UUID(int=(i + 1) << 16))
        job = shapes.job(i, uid, done=not running)
        yield job, [shapes.pod(job, k, done=not running) for k in range(per_job + (i < extra))], running


async def sim_child(args: argparse.Namespace) -> None:
    """Loads the cluster, serves it, and finishes --churn running jobs when told on stdin."""
    started = time.perf_counter()
    now = datetime.now(UTC)
    shapes = Shapes(now)
    sim = SimKubeServer(bookmark_interval=30)
    running: list[tuple[JsonObj, list[JsonObj]]] = []
    all_jobs: list[JsonObj] = []
    all_pods: list[JsonObj] = []
    for job, pods, is_running in build(shapes, args.jobs, args.pods):
        all_jobs.append(job)
        all_pods.extend(pods)
        if is_running:
            running.append((job, pods))
    sim.store.preload(JOBS, all_jobs)
    sim.store.preload(PODS, all_pods)
    sizes = {
        "object_bytes_job": len(orjson.dumps(all_jobs[0])),
        "object_bytes_pod": len(orjson.dumps(all_pods[0])),
    }
    del all_jobs, all_pods
    await sim.start()
    sim.kubeconfig(Path(args.kubeconfig))
    report = {"preload_s": time.perf_counter() - started, "running_jobs": len(running), **sizes}
    print(json.dumps(report), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().split():
        if line[0] != "churn":
            break
        count = min(int(line[1]), len(running))
        batch, running = running[:count], running[count:]
        at = datetime.now(UTC)
        pod_done, job_done = shapes.finished_pod_status(at), shapes.finished_job_status(at)
        events = 0
        for n, (job, pods) in enumerate(batch):
            for pod in pods:
                sim.update(PODS, {**pod, "status": pod_done})
                events += 1
            sim.update(JOBS, {**job, "status": job_done})
            events += 1
            if n % 50 == 0:
                await asyncio.sleep(0)  # let the watches stream while we write
        print(json.dumps({"events": events, "jobs": count, "pods": events - count}), flush=True)
    await sim.stop()


# --- the service, watched from outside -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def proc_status(pid: int, field: str) -> float:
    """A /proc/<pid>/status figure in MiB (VmRSS, VmHWM); 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used: what the relist cost, whatever the load."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def fresh_database(admin_url: str, name: str) -> str:
    dsn = admin_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def write_config(folder: Path, url: str, kubeconfig: Path, probes: int) -> Path:
    token = hashlib.sha256(b"scale-bench").hexdigest()
    config = {
        "database_url": url,
        "cluster": CLUSTER,
        "log_level": "WARNING",
        "probes": {"listen": f"127.0.0.1:{probes}"},
        "kubernetes": {"kubeconfig": str(kubeconfig), "kueue": False},
        # Nothing listens there; the jobs that end during the churn are measured an hour later.
        "prometheus": {"url": "http://127.0.0.1:9", "metrics_delay_seconds": 3600},
        "api": {
            "listen": f"127.0.0.1:{free_port()}",
            "tokens": [{"name": "bench", "sha256": token, "role": "admin"}],
        },
    }
    path = folder / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


async def counts(conn: asyncpg.Connection) -> tuple[int, int, int, int]:
    """(jobs, pods, succeeded jobs, succeeded pods) of the cluster in the database."""
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM jobs WHERE cluster = $1),"
        " (SELECT count(*) FROM pods WHERE cluster = $1),"
        " (SELECT count(*) FROM jobs WHERE cluster = $1 AND status = 'succeeded'),"
        " (SELECT count(*) FROM pods WHERE cluster = $1 AND phase = 'Succeeded')",
        CLUSTER,
    )
    assert row is not None
    return row[0], row[1], row[2], row[3]


async def finished_stored(conn: asyncpg.Connection, want: tuple[int, int], deadline: float) -> bool:
    """Whether the database holds `want` (succeeded jobs, succeeded pods) by `deadline` (perf_counter)."""
    while True:
        _, _, jobs_now, pods_now = await counts(conn)
        if jobs_now >= want[0] and pods_now >= want[1]:
            return True
        if time.perf_counter() > deadline:
            return False
        await asyncio.sleep(0.05)


class RssSampler:
    """VmRSS of a process every few ms, for the record next to VmHWM."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0

    async def run(self) -> None:
        while True:
            self.peak = max(self.peak, proc_status(self.pid, "VmRSS"))
            await asyncio.sleep(0.05)


async def ingest_objects(session: aiohttp.ClientSession, port: int) -> tuple[int, int]:
    """The service's objects parsed and passed over as stored so far (inno_notify_ingest_objects_total)."""
    found = {"parsed": 0, "unchanged": 0}
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        for line in (await response.text()).splitlines():
            if line.startswith("inno_notify_ingest_objects_total{"):
                outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
                found[outcome] = int(float(line.rsplit(" ", 1)[1]))
    return found["parsed"], found["unchanged"]


async def readyz(session: aiohttp.ClientSession, port: int) -> bool:
    try:
        async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


async def run(args: argparse.Namespace) -> int:
    url = await fresh_database(args.postgres, "inno_bench_scale")
    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        kubeconfig = folder / "kubeconfig"
        sim = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--sim-child",
            "--jobs",
            str(args.jobs),
            "--pods",
            str(args.pods),
            "--kubeconfig",
            str(kubeconfig),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert sim.stdout is not None and sim.stdin is not None
        loaded = json.loads(await sim.stdout.readline())
        # Migrated before serve starts, so that its clock measures the relist, not the schema.
        migrate = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "inno_notify",
            "migrate",
            "--config",
            str(write_config(folder, url, kubeconfig, free_port())),
        )
        if await migrate.wait() != 0:
            print("migrate failed", file=sys.stderr)
            return 1
        probes = free_port()
        config = write_config(folder, url, kubeconfig, probes)
        conn = await asyncpg.connect(dsn)
        started = time.perf_counter()
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        serve = await asyncio.create_subprocess_exec(
            sys.executable, *profile, "-m", "inno_notify", "serve", "--config", str(config)
        )
        sampler = RssSampler(serve.pid)
        sampling = asyncio.create_task(sampler.run())
        figures: dict[str, Any] = {"pods": args.pods, "jobs": args.jobs, **loaded}
        try:
            async with aiohttp.ClientSession() as session:
                readyz_at = applied_at = None
                deadline = started + args.timeout
                while readyz_at is None or applied_at is None:
                    if time.perf_counter() > deadline or serve.returncode is not None:
                        print(f"not ready within {args.timeout:g} s", file=sys.stderr)
                        return 1
                    if readyz_at is None and await readyz(session, probes):
                        readyz_at = time.perf_counter()
                    if applied_at is None:
                        jobs, pods, _, _ = await counts(conn)
                        if jobs >= args.jobs and pods >= args.pods:
                            applied_at = time.perf_counter()
                    await asyncio.sleep(0.2)
                figures["readyz_s"] = readyz_at - started
                figures["applied_s"] = applied_at - started
                figures["ready_s"] = max(readyz_at, applied_at) - started
                figures["ready_cpu_s"] = cpu_seconds(serve.pid)
                figures["peak_rss_mib"] = proc_status(serve.pid, "VmHWM")
                figures["sampled_peak_rss_mib"] = sampler.peak
                _, _, jobs_done, pods_done = await counts(conn)
                churn_started = time.perf_counter()
                sim.stdin.write(f"churn {args.churn}\n".encode())
                await sim.stdin.drain()
                churned = json.loads(await sim.stdout.readline())
                want = (jobs_done + churned["jobs"], pods_done + churned["pods"])
                if not await finished_stored(conn, want, churn_started + args.timeout):
                    print("churn not applied in time", file=sys.stderr)
                    return 1
                elapsed = time.perf_counter() - churn_started
                figures["churn_cpu_s"] = cpu_seconds(serve.pid) - figures["ready_cpu_s"]
                figures["events"] = churned["events"]
                figures["events_per_s"] = churned["events"] / elapsed
                figures["peak_rss_after_churn_mib"] = proc_status(serve.pid, "VmHWM")
                # A restart: the same cluster listed again into a database that already holds it.
                serve.send_signal(signal.SIGTERM)
                await asyncio.wait_for(serve.wait(), 60)
                figures["restart_changed"] = 0
                if args.restart_churn:
                    # Jobs that finish while no service watches: what a restart must find and take.
                    sim.stdin.write(f"churn {args.restart_churn}\n".encode())
                    await sim.stdin.drain()
                    missed = json.loads(await sim.stdout.readline())
                    figures["restart_changed"] = missed["events"]
                    want = (want[0] + missed["jobs"], want[1] + missed["pods"])
                restarted = time.perf_counter()
                sim_cpu_before = cpu_seconds(sim.pid)
                profile = ["-m", "cProfile", "-o", args.profile_restart] if args.profile_restart else []
                serve = await asyncio.create_subprocess_exec(
                    sys.executable, *profile, "-m", "inno_notify", "serve", "--config", str(config)
                )
                while not await readyz(session, probes):
                    if time.perf_counter() > restarted + args.timeout or serve.returncode is not None:
                        print("not ready again after the restart", file=sys.stderr)
                        return 1
                    await asyncio.sleep(0.2)
                figures["restart_readyz_s"] = time.perf_counter() - restarted
                # Ready once every listed object was either taken (parsed) or passed over as stored.
                listed = figures["pods"] + figures["jobs"]
                while sum(taken := await ingest_objects(session, probes)) < listed:
                    if time.perf_counter() > restarted + args.timeout:
                        print(f"restart: {taken} of {listed} objects taken", file=sys.stderr)
                        return 1
                    await asyncio.sleep(0.2)
                figures["restart_ready_s"] = time.perf_counter() - restarted
                # And the jobs that finished while it was stopped stored as finished.
                if not await finished_stored(conn, want, restarted + args.timeout):
                    print("restart: the changes made while stopped were not stored", file=sys.stderr)
                    return 1
                figures["restart_applied_s"] = time.perf_counter() - restarted
                figures["restart_parsed"], figures["restart_unchanged"] = taken
                figures["restart_parsed_pct"] = 100.0 * taken[0] / listed
                figures["restart_cpu_s"] = cpu_seconds(serve.pid)
                figures["restart_sim_cpu_s"] = cpu_seconds(sim.pid) - sim_cpu_before
                figures["restart_peak_rss_mib"] = proc_status(serve.pid, "VmHWM")
        finally:
            sampling.cancel()
            await conn.close()
            with contextlib.suppress(ProcessLookupError):
                serve.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(serve.wait(), 30)
            if serve.returncode is None:
                serve.kill()
            sim.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sim.wait(), 30)
            if sim.returncode is None:
                sim.kill()
    for name in (
        "pods",
        "jobs",
        "object_bytes_pod",
        "object_bytes_job",
        "preload_s",
        "readyz_s",
        "applied_s",
        "ready_s",
        "ready_cpu_s",
        "peak_rss_mib",
        "sampled_peak_rss_mib",
        "events",
        "events_per_s",
        "churn_cpu_s",
        "peak_rss_after_churn_mib",
        "restart_readyz_s",
        "restart_ready_s",
        "restart_applied_s",
        "restart_changed",
        "restart_parsed",
        "restart_unchanged",
        "restart_parsed_pct",
        "restart_cpu_s",
        "restart_sim_cpu_s",
        "restart_peak_rss_mib",
    ):
        value = figures[name]
        print(f"{name}={value:.1f}" if isinstance(value, float) else f"{name}={value}")
    print(f"loadavg={' '.join(load_average())}")
    missed = figures["ready_s"] > READY_S_TARGET or figures["peak_rss_mib"] > PEAK_RSS_MIB_TARGET
    return 1 if args.check and missed else 0


def load_average() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--churn", type=int, default=2000, help="running jobs finished after ready")
    parser.add_argument(
        "--restart-churn", type=int, default=0, help="running jobs finished while serve is stopped"
    )
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", metavar="FILE", help="run serve under cProfile, stats to FILE")
    parser.add_argument("--profile-restart", metavar="FILE", help="run the restarted serve under cProfile")
    parser.add_argument("--sim-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sim_child:
        asyncio.run(sim_child(args))
        return 0
    # SIGTERM like Ctrl-C: the run is cancelled and its cleanup stops serve and the sim.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
