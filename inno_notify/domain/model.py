"""The records every layer talks about: jobs, pods, containers, usage, recommendations, notifications.

They are plain frozen dataclasses so that the domain stays pure (stdlib only) and every other layer
(storage, API, channels) converts to and from them at its own boundary. Times are timezone-aware
UTC datetimes. Quantities use base units: CPU in cores, memory in bytes, GPUs in GPU-equivalents.
A figure that could not be measured is ``None`` and is listed in ``Usage.missing`` with a reason.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime


class JobStatus(enum.StrEnum):
    """Lifecycle state of a job record (CONTRACT.md §5)."""

    PENDING = "pending"
    SUSPENDED = "suspended"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELETED = "deleted"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.DELETED})


class WorkloadKind(enum.StrEnum):
    """What a workload record was built from (CONTRACT.md §3a): a batch/v1 Job, a bare pod tracked as
    a one-pod workload, an interactive workspace's pod (Coder, JupyterHub: matched by
    `live.workspace_selectors`), or a distributed training run (domain.kinds). The stored values of
    the first three predate the others and stay lower-case; `api_name` is the contract's spelling."""

    JOB = "job"
    POD = "pod"
    WORKSPACE = "workspace"
    PYTORCH_JOB = "PyTorchJob"
    MPI_JOB = "MPIJob"
    JOB_SET = "JobSet"
    RAY_JOB = "RayJob"
    # An Argo Workflow or an Airflow DAG run: its record lives in the workflows table (with its
    # steps, domain.workflows), its GPU steps are runs whose parent it is; the job list shows it.
    WORKFLOW = "Workflow"

    @property
    def api_name(self) -> str:
        """The kind as the API and pages name it: the Kubernetes kind (a workspace is a Pod)."""
        return _API_NAMES.get(self, self.value)


_API_NAMES = {WorkloadKind.JOB: "Job", WorkloadKind.POD: "Pod", WorkloadKind.WORKSPACE: "Pod"}


class KindName(enum.StrEnum):
    """A workload kind as the API, pages and messages name it (CONTRACT.md §3a)."""

    JOB = "Job"
    POD = "Pod"
    PYTORCH_JOB = "PyTorchJob"
    MPI_JOB = "MPIJob"
    JOB_SET = "JobSet"
    RAY_JOB = "RayJob"
    WORKFLOW = "Workflow"

    @property
    def stored(self) -> tuple[str, ...]:
        """The stored kinds it names (a Pod is a bare GPU pod or a workspace's)."""
        return tuple(kind.value for kind in WorkloadKind if kind.api_name == self.value)


class NotifyMode(enum.StrEnum):
    """The `inno-notify/notify` annotation (CONTRACT.md §3)."""

    ALWAYS = "always"
    FAILURE = "failure"
    NEVER = "never"


class MissingReason(enum.StrEnum):
    """Why a usage figure is null (CONTRACT.md §4, issue 4)."""

    NO_SAMPLES = "no_samples"
    PROMETHEUS_UNAVAILABLE = "prometheus_unavailable"
    SHORTER_THAN_SCRAPE = "shorter_than_scrape"
    MIG_NO_UTIL = "mig_no_util"
    SHARED_GPU = "shared_gpu"
    NOT_REQUESTED = "not_requested"
    NOT_COLLECTED = "not_collected"
    # Measuring the job raised (a bug, or data no rule expected): its figures are set aside.
    MEASUREMENT_ERROR = "measurement_error"


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class RecommendationKind(enum.StrEnum):
    GPU_COUNT = "gpu_count"
    IDLE_GPU = "idle_gpu"
    GPU_MEMORY = "gpu_memory"
    MEMORY = "memory"
    MEMORY_INCREASE = "memory_increase"
    CPU = "cpu"


class Unit(enum.StrEnum):
    GPUS = "gpus"
    BYTES = "bytes"
    CORES = "cores"
    MIG_PROFILE = "mig_profile"


class Channel(enum.StrEnum):
    TELEGRAM = "telegram"
    SLACK = "slack"
    EMAIL = "email"
    # Direct messages from a Mattermost bot (REST API v4), found by the person's e-mail.
    MATTERMOST = "mattermost"
    # The service's one webhook (`channels.webhook`): a copy of every message, as signed JSON. Not a
    # channel a person chooses: routing adds it beside each recipient's own (domain.routing).
    WEBHOOK = "webhook"


class NotificationKind(enum.StrEnum):
    JOB_SUMMARY = "job_summary"
    DIGEST = "digest"
    IDLE_NUDGE = "idle_nudge"
    # One summary per finished Argo Workflow or Airflow DAG run (domain.workflows).
    WORKFLOW_SUMMARY = "workflow_summary"
    # A KServe InferenceService that became Ready with a new revision (domain.serving).
    MODEL_SERVING = "model_serving"
    # A message a pipeline posted (POST /api/v1/events, `inno-notify send`).
    PIPELINE_EVENT = "pipeline_event"
    # The bot's answer to a command in a Telegram chat (domain.telegram_commands).
    BOT_REPLY = "bot_reply"


class DeliveryStatus(enum.StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


# Resource amounts keyed by Kubernetes resource name: "cpu" in cores, "memory" and
# "ephemeral-storage" in bytes, extended resources ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb")
# in their own units.
ResourceAmounts = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Link:
    """A link a message shows: a title and an http(s) URL (checked by domain.links)."""

    title: str
    url: str


@dataclass(frozen=True, slots=True)
class TerminatedState:
    """A container's `state.terminated` or `lastState.terminated`."""

    exit_code: int
    reason: str | None = None
    signal: int | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ContainerRecord:
    """One container of a pod, with what it asked for and how it ended."""

    name: str
    init: bool = False
    # A sidecar is an init container with restartPolicy Always: it never decides the outcome.
    sidecar: bool = False
    requests: ResourceAmounts = field(default_factory=dict)
    limits: ResourceAmounts = field(default_factory=dict)
    started_at: datetime | None = None
    terminated: TerminatedState | None = None
    last_terminated: TerminatedState | None = None
    restart_count: int = 0


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod of a job (or a bare GPU pod tracked as its own workload)."""

    cluster: str
    uid: str
    namespace: str
    name: str
    job_uid: str | None
    phase: str
    created_at: datetime | None
    node: str | None = None
    reason: str | None = None
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    deleted_at: datetime | None = None
    gpu_equivalents: float = 0.0
    containers: tuple[ContainerRecord, ...] = ()
    completion_index: int | None = None
    resource_version: str | None = None
    # The replica role the pod plays in its workload (Master, Worker, launcher, head, a JobSet's
    # replicated job…; domain.kinds.roles), None for a single-role workload.
    role: str | None = None


@dataclass(frozen=True, slots=True)
class Requested:
    """What one pod of the job asks for, and how many pods run at once.

    ``gpus`` is in GPU-equivalents (CONTRACT.md §4); ``None`` means "not set" (for example no memory
    request and no limit), which is different from 0.
    """

    gpus: float = 0.0
    cpu_cores: float | None = None
    memory_bytes: int | None = None
    cpu_limit_cores: float | None = None
    memory_limit_bytes: int | None = None
    # Per-pod amounts of every extended resource, e.g. {"nvidia.com/gpu": 4} or {"nvidia.com/mig-1g.10gb": 1}.
    extended: ResourceAmounts = field(default_factory=dict)
    parallelism: int = 1
    completions: int | None = None


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """One replica role of a multi-pod workload as it was asked for: how many pods, each asking for
    `requested` (a PyTorchJob's Master and Worker, an MPIJob's Launcher and Worker, a JobSet's
    replicated jobs, a RayJob's head and worker groups)."""

    role: str
    replicas: int
    requested: Requested = field(default_factory=Requested)


@dataclass(frozen=True, slots=True)
class KueueInfo:
    """What Kueue said about the job's admission (absent when Kueue does not manage it)."""

    local_queue: str | None = None
    cluster_queue: str | None = None
    workload_name: str | None = None
    quota_reserved_at: datetime | None = None
    admitted_at: datetime | None = None
    evictions: int = 0
    preemptions: int = 0
    last_eviction_reason: str | None = None


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One workload, keyed by (cluster, uid): a Job, or a bare GPU pod with an owner."""

    cluster: str
    uid: str
    namespace: str
    name: str
    kind: WorkloadKind = WorkloadKind.JOB
    status: JobStatus = JobStatus.PENDING
    reason: str | None = None
    owner: str | None = None
    team: str | None = None
    notify: NotifyMode = NotifyMode.ALWAYS
    channels: tuple[str, ...] | None = None
    group_key: str | None = None
    family: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    first_scheduled_at: datetime | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    requested: Requested = field(default_factory=Requested)
    kueue: KueueInfo | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # Counts of job-relevant events seen, e.g. {"FailedScheduling": 3, "Evicted": 1}.
    event_counts: Mapping[str, int] = field(default_factory=dict)
    resource_version: str | None = None
    # Links its summary shows (an MLflow run from the job's annotations, domain.links).
    links: tuple[Link, ...] = ()
    # The workload this one is a step of (None for a top-level run).
    parent_uid: str | None = None
    # Runs of the same workload: restarts (a PyTorchJob's recreated pods, a JobSet's failurePolicy
    # restarts, a RayJob's retries) are attempts, not new workloads.
    attempts: int = 1
    # The replica roles of a multi-pod workload (empty for a Job or a pod: one role).
    replicas: tuple[ReplicaSpec, ...] = ()

    @property
    def queued_until(self) -> datetime | None:
        """When the job stopped waiting: Kueue's admission where there is one, else its first pod's
        scheduling. A job preempted and admitted again carries its latest admission, later than its
        first pod's scheduling: then the earlier of the two ends the first wait."""
        admitted = self.kueue.admitted_at if self.kueue is not None else None
        if admitted is None:
            return self.first_scheduled_at
        if self.first_scheduled_at is None:
            return admitted
        return min(admitted, self.first_scheduled_at)

    @property
    def queue_seconds(self) -> float | None:
        """Creation to `queued_until`: the wait for Kueue's quota, else for the scheduler."""
        start, end = self.created_at, self.queued_until
        if end is None or start is None:
            return None
        return max(0.0, (end - start).total_seconds())

    @property
    def runtime_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.started_at).total_seconds())


@dataclass(frozen=True, slots=True)
class MissingFigure:
    """A usage figure that is null, and why."""

    figure: str
    reason: MissingReason
    detail: str | None = None


# Where a GpuUsage row's figures come from (its provenance): dcgm-exporter's per-GPU series, or the
# node agent's per-process series (`inno-notify agent`), which give a shared GPU's pod its own share.
GPU_SOURCE_DCGM = "dcgm"
GPU_SOURCE_AGENT = "nvml_agent"


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """Measured use of one GPU (or MIG instance) by one pod over the time the pod held it.

    ``shared``: other pods used the GPU at the same time (time-slicing); ``sharing`` says how that
    was found (``resource``: the device plugin's ``.shared`` resource name; ``overlap``: another pod
    of the same usage round on the same GPU at the same time; ``agent_processes``: the node agent
    saw another pod's processes on it while this pod held it). A shared row from dcgm-exporter holds
    the whole GPU's figures, which are not this pod's; one from the node agent (``source``) holds
    this pod's share.
    """

    pod_uid: str
    pod_name: str
    gpu: str
    uuid: str | None = None
    # Label values: one line each, capped (storable.label_name) by the adapter that read them.
    model: str | None = None
    mig_profile: str | None = None
    held_minutes: float | None = None
    util_mean_percent: float | None = None
    util_max_percent: float | None = None
    fb_used_peak_bytes: int | None = None
    fb_total_bytes: int | None = None
    shared: bool = False
    samples: int = 0
    source: str = GPU_SOURCE_DCGM
    sharing: str | None = None

    @property
    def own_share(self) -> bool:
        """Whether the figures are this pod's own: measured on a GPU it had alone, or its share of a
        shared GPU from per-process figures."""
        return not self.shared or self.source == GPU_SOURCE_AGENT


@dataclass(frozen=True, slots=True)
class PodUsage:
    """Measured use of memory and CPU by one pod."""

    pod_uid: str
    pod_name: str
    memory_peak_bytes: int | None = None
    cpu_cores_mean: float | None = None
    cpu_cores_p95: float | None = None
    cpu_throttled_seconds: float | None = None
    samples: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaUsage:
    """One replica role of a multi-pod run, measured: its pods (every pod uid seen, restarts
    included), the GPUs they asked for together, and the role's own figures (None where not
    measured, like the run's)."""

    role: str
    pods: int
    gpus_requested: float
    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    gpus_idle: int | None = None
    idle_gpu_minutes: float | None = None
    memory_peak_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class HeldAfterEnd:
    """Pods that kept their GPUs after their run had ended (a training operator's default
    `cleanPodPolicy: None`, Ray pods until their cluster goes), counted in the run's GPU-minutes."""

    pods: int
    gpus: float
    minutes: float
    gpu_minutes: float


@dataclass(frozen=True, slots=True)
class Usage:
    """The job-level figures of CONTRACT.md §4, with per-GPU and per-pod detail behind them."""

    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    gpus_idle: int | None = None
    idle_gpu_minutes: float | None = None
    gpu_util_mean_percent: float | None = None
    gpu_memory_peak_bytes: int | None = None
    memory_peak_bytes: int | None = None
    cpu_cores_mean: float | None = None
    cpu_cores_p95: float | None = None
    gpus: tuple[GpuUsage, ...] = ()
    pods: tuple[PodUsage, ...] = ()
    missing: tuple[MissingFigure, ...] = ()
    collected_at: datetime | None = None
    # A multi-pod run's figures per replica role, and the GPUs its pods held after it ended.
    replicas: tuple[ReplicaUsage, ...] = ()
    held_after_end: HeldAfterEnd | None = None
    # The GPU model (dcgm-exporter's `modelName`; a MIG instance's is its GPU's) that held most of
    # the job's GPU-minutes; the per-GPU rows name every model where the job ran on several. After
    # the fields stored before it, so that the stored JSON only gains a key at its end.
    gpu_model: str | None = None

    def reason_for(self, figure: str) -> MissingReason | None:
        for item in self.missing:
            if item.figure == figure:
                return item.reason
        return None


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One piece of concrete advice for the next run (CONTRACT.md §5)."""

    kind: RecommendationKind
    severity: Severity
    current: float | str | None
    suggested: float | str
    unit: Unit
    message: str
    waste_gpu_minutes: float = 0.0
    waste_gib_hours: float = 0.0
    waste_core_hours: float = 0.0
    # Field to change, e.g. 'resources.limits["nvidia.com/gpu"]'.
    field_path: str | None = None
    # Evidence: sample counts, the time span, runs of the family considered, ...
    evidence: Mapping[str, float | int | str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DirectoryUser:
    email: str
    name: str | None = None
    slack_user_id: str | None = None
    telegram_chat_id: int | None = None
    channels: tuple[str, ...] = ("email",)
    # The person's own preferences (domain.preferences): FAILURE asks for failed jobs' summaries only;
    # `telegram_stopped` says they unlinked Telegram with /stop, so summaries stop offering a link.
    notify: NotifyMode = NotifyMode.ALWAYS
    telegram_stopped: bool = False
    # The person's Telegram link generation (domain.telegram_linking): a linking token minted for
    # them carries it and links only while it is still theirs.
    link_epoch: int = 0
    # False: the person turned idle-GPU nudges off (`/nudges off`, the API), on every channel.
    nudges: bool = True


@dataclass(frozen=True, slots=True)
class Team:
    name: str
    namespaces: tuple[str, ...] = ()
    leads: tuple[str, ...] = ()
    digest_channels: tuple[str, ...] = ("email",)
    slack_channel: str | None = None
    notify_unowned: bool = False


@dataclass(frozen=True, slots=True)
class RejectedObject:
    """An object a cluster user wrote that could not be read or stored, set aside with the reason.

    One per (cluster, kind, uid); ``count`` says how often it was seen refused (each change of the
    object arrives again). ``uid`` is "" for an object that has no usable uid. ``reason`` is a short
    fixed word (the metric label); ``detail`` the error, capped.
    """

    cluster: str
    kind: str
    uid: str
    reason: str
    namespace: str | None = None
    name: str | None = None
    detail: str | None = None
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    count: int = 1


@dataclass(frozen=True, slots=True)
class RecipientAddress:
    """Where an outbox row's recipient is reached, as routing found it when it planned the row.

    The dispatcher sends with it and looks nobody up, so a directory change after planning does not
    move a message already planned. Empty (every field None) for a recipient known by e-mail alone
    (the row's `recipient` is the address).
    """

    name: str | None = None
    telegram_chat_id: int | None = None
    slack_user_id: str | None = None
    # A team's Slack channel ("#face-gpu" or an id): the row is posted there, not sent as a DM.
    slack_channel: str | None = None
    # Set for a directory user without a Telegram chat who did not /stop it: their e-mail and Slack
    # summaries offer the link that connects one, minted under this link generation
    # (domain.telegram_linking). None: the row offers no link.
    telegram_link_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """An outbox row: one message to one recipient on one channel, sent at least once.

    `address` says where the recipient is reached, `payload` what the message says.
    """

    dedup_key: str
    kind: NotificationKind
    channel: Channel
    recipient: str
    due_at: datetime
    created_at: datetime
    status: DeliveryStatus = DeliveryStatus.PENDING
    cluster: str | None = None
    job_uid: str | None = None
    group_key: str | None = None
    address: RecipientAddress = field(default_factory=RecipientAddress)
    payload: Mapping[str, object] = field(default_factory=dict)
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    provider_message_id: str | None = None
    sent_at: datetime | None = None
    id: int | None = None


@dataclass(frozen=True, slots=True)
class SeriesLine:
    """One line of a job's usage over time, on its series' grid: a GPU's utilization or memory, or a
    pod's RAM. ``values[i]`` belongs to the grid point ``UsageSeries.start + i × step``; ``None`` where
    no sample fell in that step (the pod was not running, or nothing was scraped)."""

    label: str
    pod_name: str
    values: tuple[float | None, ...]
    # The GPU was time-sliced with another pod: its values are the whole GPU's, not this job's.
    shared: bool = False


@dataclass(frozen=True, slots=True)
class SeriesPod:
    """A pod of the job as its links need it: the name (logs, dashboards) and the node it ran on."""

    name: str
    node: str | None = None


@dataclass(frozen=True, slots=True)
class UsageSeries:
    """A job's usage over its runtime, downsampled when it was measured (the chart in its summary and
    on its page).

    Every line shares one grid: point ``i`` is at ``start + i × step_seconds`` and summarises the step
    that ends there, ``(t − step, t]``: the mean utilization, the peak GPU memory, the peak RAM (the
    sum over the pod's containers of each one's peak in that step). Utilization is in percent, memory
    in bytes. ``start`` is None when nothing was measured (the job's pods are still listed for links).
    """

    step_seconds: int = 0
    start: datetime | None = None
    gpu_util: tuple[SeriesLine, ...] = ()
    gpu_memory: tuple[SeriesLine, ...] = ()
    memory: tuple[SeriesLine, ...] = ()
    pods: tuple[SeriesPod, ...] = ()

    @property
    def points(self) -> int:
        """How many grid points the lines have."""
        return max((len(line.values) for line in (*self.gpu_util, *self.gpu_memory, *self.memory)), default=0)

    @property
    def measured(self) -> bool:
        return self.start is not None and self.points > 0
