"""A realistic GPU workload for the demo, tests and benchmarks: who runs what, and how it really behaves.

Teams of researchers submit jobs of 1–8 GPUs (and MIG slices), a hyper-parameter sweep, and jobs that
fail (OOM, a crash, a deadline); a training pipeline runs on Argo Workflows (a CPU data step, a GPU
training step that leaves a GPU idle, a CPU publish step) and ends with its model served by KServe,
a nightly Airflow DAG run embeds a corpus on a GPU (its first try OOM-killed, the retry fine), and
someone leaves a JupyterHub server holding a GPU it never uses; on request (`training=True`), a
distributed PyTorchJob whose Workers partly idle (sim.training). Requests are drawn the way people
make them — rounded up "just in case" — and usage the way jobs behave: some GPUs never used,
memory far below the request. Each
job's behaviour is a `Behaviour` from which `sim.metrics` derives the per-GPU and per-container
traces that a DCGM exporter and cAdvisor would have shown; nothing downstream sees the behaviour
itself, only the traces (through the same interface as the Prometheus adapter).

Everything is drawn from a seeded `random.Random`, so a run is reproducible.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

# Re-exported: the generator's callers describe pods with them.
from inno_notify.sim.behaviour import GIB as GIB
from inno_notify.sim.behaviour import Behaviour as Behaviour
from inno_notify.sim.objects import JobSpec
from inno_notify.sim.pipelines import (
    Change,
    SimArgoWorkflow,
    SimAttempt,
    SimDagRun,
    SimInferenceService,
    SimStep,
    airflow_changes,
    argo_changes,
    gpu_behaviours,
    serving_changes,
)
from inno_notify.sim.training import (
    SimTrainingRun,
    plan_training,
    pod_spans,
    pytorchjob_run,
    training_behaviours,
    training_changes,
)


@dataclass(frozen=True, slots=True)
class Person:
    email: str
    name: str
    team: str


@dataclass(frozen=True, slots=True)
class TeamSpec:
    name: str
    namespace: str
    lead: str


TEAMS = (
    TeamSpec("face", "face-research", "lead.face@example.com"),
    TeamSpec("nlp", "nlp-research", "lead.nlp@example.com"),
    TeamSpec("speech", "speech-lab", "lead.speech@example.com"),
)
PEOPLE = (
    Person("alice@example.com", "Alice Kim", "face"),
    Person("bob@example.com", "Bob Novak", "face"),
    Person("chen@example.com", "Chen Wei", "nlp"),
    Person("dana@example.com", "Dana Ortiz", "nlp"),
    Person("emil@example.com", "Emil Berg", "speech"),
    Person("fatima@example.com", "Fatima Haddad", "speech"),
)
GPU_MODEL = "NVIDIA H100 80GB HBM3"
# The cluster's second GPU model (dcgm-exporter's `modelName`): a job placed on gpu-node-07 to
# gpu-node-12 runs on A100s, so the digest prices two models. Pipeline steps, training runs and
# workspaces run on H100s.
SECOND_GPU_MODEL = "NVIDIA A100-SXM4-80GB"
FIRST_SECOND_MODEL_NODE = 7


def gpu_model_of(node: str) -> str:
    """The model of a job's GPUs on `node` (gpu-node-NN): H100 on 01-06, A100 on 07-12."""
    number = node.rsplit("-", 1)[-1]
    return SECOND_GPU_MODEL if number.isdigit() and int(number) >= FIRST_SECOND_MODEL_NODE else GPU_MODEL


MIG_PROFILE = "1g.10gb"


@dataclass(frozen=True, slots=True)
class SimJob:
    spec: JobSpec
    person: Person
    submit_at: datetime
    queue_seconds: float
    run_seconds: float
    outcome: str  # succeeded | oom | error | deadline
    behaviour: Behaviour
    node: str
    mig_profile: str | None = None
    pod_uid: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def scheduled_at(self) -> datetime:
        return self.submit_at + timedelta(seconds=self.queue_seconds)

    @property
    def ends_at(self) -> datetime:
        return self.scheduled_at + timedelta(seconds=self.run_seconds)

    @property
    def exit_code(self) -> int:
        return {"succeeded": 0, "oom": 137, "error": 1, "deadline": 143}[self.outcome]

    @property
    def over_requested(self) -> bool:
        """True when the job held GPUs it never used or asked for at least twice the memory it needed."""
        idle = any(u < 5 for u in self.behaviour.gpu_util_percent)
        memory_request = _gib(self.spec.memory)
        return idle or memory_request >= 2 * self.behaviour.memory_peak_bytes / GIB + 8


@dataclass(frozen=True, slots=True)
class SimWorkspace:
    """A JupyterHub single-user server someone started and forgot: it holds its GPU, a kernel keeps
    `gpu_memory_gib` of it allocated, and it computes nothing until it is stopped."""

    person: Person
    namespace: str
    start: datetime
    stop: datetime
    node: str
    gpu_memory_gib: float = 6.0
    gpus: int = 1
    pod_uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    mig_profile: str | None = None

    @property
    def behaviour(self) -> Behaviour:
        """What the server really does: nothing on its GPUs, a kernel's memory, a little CPU."""
        return Behaviour(
            gpu_util_percent=(0.0,) * self.gpus,
            gpu_memory_gib=(self.gpu_memory_gib,) * self.gpus,
            memory_peak_bytes=3 * GIB,
            cpu_cores=0.2,
        )

    @property
    def username(self) -> str:
        """The JupyterHub user name: the local part of the person's e-mail."""
        return self.person.email.split("@")[0]

    @property
    def pod_name(self) -> str:
        return f"jupyter-{self.username}"


def _gib(quantity: str) -> float:
    return float(quantity.removesuffix("Gi"))


@dataclass(frozen=True, slots=True)
class Workload:
    start: datetime
    jobs: tuple[SimJob, ...]
    people: tuple[Person, ...] = PEOPLE
    teams: tuple[TeamSpec, ...] = TEAMS
    workflows: tuple[SimArgoWorkflow, ...] = ()
    dag_runs: tuple[SimDagRun, ...] = ()
    services: tuple[SimInferenceService, ...] = ()
    workspaces: tuple[SimWorkspace, ...] = ()
    # Distributed training runs (PyTorchJob, MPIJob, JobSet, RayJob: sim.training).
    training: tuple[SimTrainingRun, ...] = ()

    @property
    def end(self) -> datetime:
        ends = (
            [j.ends_at for j in self.jobs] + [w.end for w in self.workflows] + [r.end for r in self.dag_runs]
        )
        ends += [s.ready_at for s in self.services]
        ends += [plan_training(run).last_change for run in self.training]
        return max(ends, default=self.start)

    def pipeline_changes(self) -> list[Change]:
        """Every write of the Argo controller, the Airflow KPO pods, KServe and the training
        operators, in time order."""
        changes = [c for w in self.workflows for c in argo_changes(w)]
        changes += [c for r in self.dag_runs for c in airflow_changes(r)]
        changes += [c for s in self.services for c in serving_changes(s)]
        changes += [c for run in self.training for c in training_changes(run)]
        return sorted(changes, key=lambda c: c.at)

    def step_behaviours(self) -> dict[str, Behaviour]:
        """How each pipeline GPU step's pod really ran, by pod uid (for the simulated metrics)."""
        steps = [s for w in self.workflows for s in w.steps] + [t for r in self.dag_runs for t in r.tasks]
        return gpu_behaviours(steps)

    def pod_behaviours(self) -> dict[str, Behaviour]:
        """How every pipeline step's and training run's GPU pod really ran, by pod uid."""
        return {**self.step_behaviours(), **training_behaviours(self.training)}

    def pod_spans(self) -> dict[str, tuple[str, datetime, datetime | None]]:
        """Where and when each training run's GPU pod held its GPUs (for the live check)."""
        return pod_spans(self.training)


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def generate(
    n_jobs: int, start: datetime, seed: int = 7, span_seconds: float = 2 * 3600, *, training: bool = False
) -> Workload:
    """`n_jobs` jobs submitted over `span_seconds` from `start`: a mix of every case the service handles.
    With `training`, also Emil's distributed PyTorchJob (`demo_training_run`); the rest of the
    workload is the same with or without it."""
    rng = random.Random(seed)
    jobs: list[SimJob] = []
    kinds = _kinds(n_jobs)
    # A sweep is submitted at once by one person: its jobs end close together and group.
    sweep_owner = PEOPLE[1]
    sweep_start = start + timedelta(seconds=rng.uniform(0, span_seconds * 0.3))
    for i, kind in enumerate(kinds):
        person = sweep_owner if kind == "sweep" else PEOPLE[i % len(PEOPLE)]
        team = next(t for t in TEAMS if t.name == person.team)
        if kind == "sweep":
            submit = sweep_start + timedelta(seconds=rng.uniform(0, 30))
        else:
            submit = start + timedelta(seconds=rng.uniform(0, span_seconds * 0.6))
        jobs.append(_job(kind, i, person, team, submit, rng))
    workflow, service = _training_pipeline(start + timedelta(seconds=span_seconds * 0.15), rng)
    workload = Workload(
        start=start,
        jobs=tuple(sorted(jobs, key=lambda j: j.submit_at)),
        workflows=(workflow,),
        dag_runs=(_nightly_run(start + timedelta(seconds=span_seconds * 0.25), rng),),
        services=(service,),
    )
    # Dana starts a notebook server at the beginning and leaves it running, idle, until the
    # cluster's work is done.
    dana = PEOPLE[3]
    workspace = SimWorkspace(
        person=dana,
        namespace=next(t.namespace for t in TEAMS if t.name == dana.team),
        start=start + timedelta(seconds=30),
        stop=workload.end + timedelta(minutes=1),
        node=f"gpu-node-{rng.randint(1, 12):02d}",
        pod_uid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    )
    runs = (demo_training_run(start + timedelta(seconds=span_seconds * 0.2), seed),) if training else ()
    return replace(workload, workspaces=(workspace,), training=runs)


def demo_training_run(at: datetime, seed: int = 7) -> SimTrainingRun:
    """Emil's PyTorchJob: 1 Master + 3 Workers on 4 GPUs each, of which two Workers hold their GPUs
    idle (a data-parallel run whose sharding left them without work), succeeded after ~40 minutes.
    Drawn from its own generator, so turning it on changes nothing else in the workload."""
    rng = random.Random(f"{seed}/training")
    person = PEOPLE[4]
    team = next(t for t in TEAMS if t.name == person.team)
    run = pytorchjob_run(
        f"asr-ddp-{_suffix(rng)}",
        team.namespace,
        start=at,
        workers=3,
        gpus=4,
        idle_workers=2,
        seconds=rng.uniform(38, 42) * 60,
        owner=person.email,
        uid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    )
    return replace(run, node=f"gpu-node-{rng.randint(1, 12):02d}")


def _minutes(at: datetime, minutes: float) -> datetime:
    return at + timedelta(minutes=minutes)


def _training_pipeline(at: datetime, rng: random.Random) -> tuple[SimArgoWorkflow, SimInferenceService]:
    """Alice's Argo pipeline: data on CPU, training on 2 GPUs (one stays idle), publish; then KServe
    serves the model it trained."""
    person = PEOPLE[0]
    team = next(t for t in TEAMS if t.name == person.team)
    train = Behaviour((round(rng.uniform(65, 85), 1), 0.6), (31.0, 0.4), int(40 * GIB), 6.0)
    workflow = SimArgoWorkflow(
        name=f"train-pipeline-{_suffix(rng)}",
        namespace=team.namespace,
        created=at,
        owner=person.email,
        steps=(
            SimStep("prepare-data", (SimAttempt(_minutes(at, 0.5), 6 * 60),), cpu="8", memory="32Gi"),
            SimStep(
                "train",
                (SimAttempt(_minutes(at, 7), rng.uniform(35, 45) * 60),),
                gpus=2,
                cpu="16",
                memory="128Gi",
                behaviour=train,
            ),
        ),
    )
    last = workflow.steps[-1].attempts[-1].end
    publish = SimStep("publish-model", (SimAttempt(last + timedelta(seconds=30), 90),))
    workflow = SimArgoWorkflow(
        name=workflow.name,
        namespace=workflow.namespace,
        created=workflow.created,
        owner=workflow.owner,
        steps=(*workflow.steps, publish),
        uid=workflow.uid,
    )
    service = SimInferenceService(
        name="resnet-serve",
        namespace=team.namespace,
        created=workflow.end + timedelta(minutes=2),
        ready_after_seconds=90,
        owner=person.email,
        trained_by=f"workflow/{workflow.name}",
        gpus=1,
        storage_uri=f"s3://models/{workflow.name}/resnet.pt",
    )
    return workflow, service


def _nightly_run(at: datetime, rng: random.Random) -> SimDagRun:
    """Chen's nightly Airflow DAG run: three KubernetesPodOperator tasks, the GPU one retried."""
    person = PEOPLE[2]
    team = next(t for t in TEAMS if t.name == person.team)
    embed = Behaviour((round(rng.uniform(80, 92), 1),), (round(rng.uniform(40, 60), 1),), int(30 * GIB), 4.0)
    first_try = _minutes(at, 9)
    retry = _minutes(first_try, 13)
    return SimDagRun(
        dag_id="nightly_embeddings",
        run_id=f"scheduled__{at.strftime('%Y-%m-%dT%H:%M:%S')}+00:00",
        namespace=team.namespace,
        owner=person.email,
        tasks=(
            SimStep("extract_corpus", (SimAttempt(_minutes(at, 0.5), 8 * 60),), cpu="4", memory="16Gi"),
            SimStep(
                "embed_corpus",
                (SimAttempt(first_try, 12 * 60, 137), SimAttempt(retry, 25 * 60)),
                gpus=1,
                memory="48Gi",
                behaviour=embed,
            ),
            SimStep("load_index", (SimAttempt(_minutes(retry, 26), 4 * 60),), cpu="2", memory="8Gi"),
        ),
    )


def _kinds(n: int) -> list[str]:
    """The mix: every case present once n is large enough, then mostly ordinary training jobs."""
    base = ["over_gpus", "sweep", "sweep", "sweep", "oom", "mig", "good", "over_memory", "error", "deadline"]
    kinds = base[:n]
    while len(kinds) < n:
        kinds.append(["good", "over_gpus", "over_memory", "sweep"][len(kinds) % 4])
    return kinds


def _job(kind: str, i: int, person: Person, team: TeamSpec, submit: datetime, rng: random.Random) -> SimJob:
    gpus = rng.choice([1, 2, 4, 8])
    memory_gib = rng.choice([64, 128, 256])
    run = rng.uniform(20 * 60, 150 * 60)
    util = tuple(round(rng.uniform(55, 95), 1) for _ in range(gpus))
    fb = tuple(round(rng.uniform(20, 70), 1) for _ in range(gpus))
    peak = int(memory_gib * rng.uniform(0.55, 0.85) * GIB)
    annotations: dict[str, str] = {}
    name = f"train-{['resnet', 'vit', 'whisper', 'llama', 'conformer'][i % 5]}-{_suffix(rng)}"
    outcome = "succeeded"
    mig = None
    resource = "nvidia.com/gpu"
    if kind == "over_gpus":
        gpus = max(gpus, 4)
        busy = gpus // 2
        util = tuple(
            round(rng.uniform(60, 90), 1) if g < busy else round(rng.uniform(0, 1.5), 1) for g in range(gpus)
        )
        fb = tuple(round(rng.uniform(20, 60), 1) if g < busy else 0.4 for g in range(gpus))
    elif kind == "over_memory":
        memory_gib = 256
        peak = int(rng.uniform(18, 40) * GIB)
    elif kind == "sweep":
        gpus, memory_gib = 1, 64
        util, fb = (round(rng.uniform(40, 90), 1),), (round(rng.uniform(8, 30), 1),)
        peak = int(rng.uniform(20, 40) * GIB)
        run = rng.uniform(24 * 60, 26 * 60)
        name = f"sweep-lr-{_suffix(rng)}"
        annotations["inno-notify/group"] = f"sweep-{person.email.split('@')[0]}"
    elif kind == "oom":
        memory_gib, gpus = 64, 2
        util, fb = (88.0, 86.0), (61.0, 60.5)
        peak = 64 * GIB
        outcome = "oom"
        run = rng.uniform(10 * 60, 30 * 60)
    elif kind == "mig":
        gpus, memory_gib = 1, 32
        resource, mig = f"nvidia.com/mig-{MIG_PROFILE}", MIG_PROFILE
        util, fb = (round(rng.uniform(20, 60), 1),), (round(rng.uniform(3, 7), 1),)
        peak = int(rng.uniform(6, 12) * GIB)
        name = f"notebook-eval-{_suffix(rng)}"
    elif kind == "error":
        outcome = "error"
        run = rng.uniform(2 * 60, 10 * 60)
    elif kind == "deadline":
        outcome = "deadline"
        run = 2 * 3600.0
    elif kind == "good":
        peak = int(memory_gib * rng.uniform(0.7, 0.85) * GIB)
    spec = JobSpec(
        name=name,
        namespace=team.namespace,
        owner=person.email,
        gpus=gpus,
        gpu_resource=resource,
        memory=f"{memory_gib}Gi",
        cpu=str(rng.choice([8, 16, 32])),
        annotations=annotations,
        labels={"team": team.name},
    )
    behaviour = Behaviour(
        gpu_util_percent=util,
        gpu_memory_gib=fb,
        memory_peak_bytes=peak,
        cpu_cores=round(rng.uniform(2, 6), 1),
        memory_spike_seconds=20.0 if kind == "over_memory" else 0.0,
    )
    return SimJob(
        spec=spec,
        person=person,
        submit_at=submit,
        queue_seconds=rng.uniform(5, 60) if kind == "sweep" else rng.uniform(5, 600),
        run_seconds=run,
        outcome=outcome,
        behaviour=behaviour,
        node=f"gpu-node-{rng.randint(1, 12):02d}",
        mig_profile=mig,
    )
