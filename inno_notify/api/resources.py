"""The API's resources, each defined once: the type the serializers return and the OpenAPI schema's source.

A response resource is a TypedDict: at run time a plain dict that orjson encodes (datetimes as
RFC 3339 in UTC with a `Z`, enums as their values), so the hottest path (a page of jobs) pays
nothing for the typing; mypy holds every serializer in serialize.py to the keys and types
declared here, and openapi.py derives the document's components from these classes with pydantic
(`TypeAdapter(...).json_schema(mode="serialization")`): the class docstring becomes the schema's
description, a field's docstring the property's. Enums are the domain's own. A request body is a
pydantic model, because it is validated (views/users.py, views/events.py).

A field added here without its serializer (or the reverse) fails mypy; a response that strays
from its class fails the API tests, which check every response they see against the document.
The error resource is errors.py's, next to the one place that builds it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, NotRequired

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12

from inno_notify.adapters.db.usage_queries import GroupBy
from inno_notify.api.params import EMAIL_PATTERN, SAFE_PATTERN
from inno_notify.domain.budgets import Period
from inno_notify.domain.chat_commands import MAX_MUTE_HOURS
from inno_notify.domain.links import LINKS_MAX, TITLE_MAX_CHARS, URL_MAX_CHARS
from inno_notify.domain.model import (
    Channel,
    DeliveryStatus,
    JobStatus,
    KindName,
    MissingReason,
    NotificationKind,
    RecommendationKind,
    Severity,
    Unit,
)
from inno_notify.domain.preferences import Via
from inno_notify.domain.trends import TrendGroup

# Every resource is closed (additionalProperties: false) and describes itself from its docstrings.
CLOSED = ConfigDict(extra="forbid", use_attribute_docstrings=True)

# Times the digest hands over already as text (its own offset spelling, kept as it is).
IsoTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
IsoDate = Annotated[str, WithJsonSchema({"type": "string", "format": "date"})]


# --- jobs -----------------------------------------------------------------------------------


@with_config(CLOSED)
class Requested(TypedDict):
    """What each pod of the job requested."""

    gpus: float
    """GPU-equivalents per pod."""
    cpu_cores: float | None
    """CPU cores requested per pod."""
    memory_bytes: int | None
    """Memory requested per pod, bytes."""


@with_config(CLOSED)
class MissingFigure(TypedDict):
    """A figure that could not be measured (it is null, never 0), and why."""

    figure: str
    reason: MissingReason


@with_config(CLOSED)
class Usage(TypedDict):
    """What the job used, as measured when it finished."""

    gpu_minutes: float | None
    used_gpu_minutes: float | None
    gpus_idle: int | None
    gpu_util_mean_percent: float | None
    gpu_memory_peak_bytes: int | None
    memory_peak_bytes: int | None
    cpu_cores_p95: float | None
    missing: list[MissingFigure]


@with_config(CLOSED)
class Recommendation(TypedDict):
    """Advice for the job's next run. On a job page these fields come straight from the store's rows
    (adapters/db/job_details.py, RECOMMENDATION_FIELDS names them)."""

    kind: RecommendationKind
    severity: Severity
    current: float | str | None
    suggested: float | str
    unit: Unit
    waste_gpu_minutes: float
    message: str
    evidence: dict[str, float | str]
    """What the advice was computed from, as the job page shows it: figures such as `samples` (per
    series), `span_minutes`, `pods`, `gpus`, `idle_gpus`, `util_mean_max_percent`,
    `memory_peak_bytes`, `gpu_memory_peak_bytes`, `cpu_cores_p95`, `oom_kills`, `runs` (of the job's
    family) and the window the figures were measured over, `window_start` and `window_end`
    (ISO 8601, UTC)."""


@with_config(CLOSED)
class JobKueue(TypedDict):
    local_queue: str | None
    cluster_queue: str | None
    """The ClusterQueue that admitted the job."""
    workload: str | None
    quota_reserved_at: datetime | None
    admitted_at: datetime | None
    """The latest admission (a job preempted and admitted again has several)."""
    evictions: int
    """How often Kueue evicted the job (preemptions included)."""
    preemptions: int
    last_eviction_reason: str | None
    """Preempted, PodsReadyTimeout, Deactivated, …"""


@with_config(CLOSED)
class ReplicaFigures(TypedDict):
    gpu_minutes: float | None
    used_gpu_minutes: float | None
    gpus_idle: int | None
    idle_gpu_minutes: float | None
    memory_peak_bytes: int | None


@with_config(CLOSED)
class JobReplica(TypedDict):
    role: str
    """Master, Worker, Launcher, a JobSet's replicated job, a Ray head or worker group…"""
    pods: int
    """Pods of the role: as asked for, or every pod seen once measured (restarts included)."""
    gpus_requested: float
    """GPU-equivalents each pod of the role asks for."""
    usage: ReplicaFigures | None
    """The role's own figures; null until the run is measured."""


@with_config(CLOSED)
class Cost(TypedDict):
    amount: float | None
    """What the run held, at `accounting.rates`: its GPU-hours at its GPU model's price, plus its
    core and memory requests over its runtime where those are priced. Null where something it held
    was not measured or has no price (never 0 for that)."""
    idle: float | None
    """The part of `amount` its idle GPU-minutes cost."""
    currency: str


@with_config(CLOSED)
class Job(TypedDict):
    uid: str
    cluster: str
    namespace: str
    name: str
    kind: KindName
    """What the run is (CONTRACT §3a)."""
    parent: str | None
    """The uid of the workload this one is a step of; null for a run of its own."""
    attempts: int
    """Runs of the same workload: a restart is an attempt, not a new workload."""
    owner: str | None
    team: str | None
    gpu_model: str | None
    """The model of the GPUs that held most of the job's GPU-minutes, as dcgm-exporter names it
    ("NVIDIA A100-SXM4-80GB"; a MIG instance's is its GPU's). Null until measured, for a workflow, and
    where it could not be measured: `usage.missing` then says why (figure `gpu_model`)."""
    status: JobStatus
    reason: str | None
    exit_code: int | None
    exit_reason: str | None
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    queue_seconds: float | None
    runtime_seconds: float | None
    requested: Requested
    usage: Usage | None
    """null until the job's usage has been collected."""
    recommendations: list[Recommendation]
    kueue: JobKueue | None
    """What Kueue said about the job; null when Kueue does not manage it."""
    replicas: list[JobReplica]
    """A multi-pod run's replica roles; empty for a Job or a pod."""
    cost: Cost | None
    """null until measured, and when `accounting.rates` sets no price (docs/budgets.md)."""


NextCursor = Annotated[
    str | None, Field(description="Pass as ?cursor= for the next page; null on the last page.")
]


@with_config(CLOSED)
class JobPage(TypedDict):
    items: list[Job]
    next_cursor: NextCursor


# --- usage ------------------------------------------------------------------------------------


@with_config(CLOSED)
class UsageGroup(TypedDict):
    group: str | None
    """The team, owner or namespace; null: none known."""
    jobs: int
    """Jobs that finished in the window."""
    measured_jobs: int
    """Of those, jobs whose GPU-minutes were measured."""
    gpu_minutes: float | None
    used_gpu_minutes: float | None
    idle_gpu_minutes: float | None
    memory_jobs: int
    """Jobs with both a memory request and a measured peak."""
    memory_requested_bytes: int | None
    """Sum over memory_jobs of the per-pod request × parallelism."""
    memory_peak_bytes: int | None
    """Sum over memory_jobs of the per-pod peak × parallelism."""
    cost: float | None
    """What the group's measured jobs cost at `accounting.rates` (GPU-hours at each model's price,
    plus requested cores and memory over the runtime where priced), summed over the jobs whose cost
    is known; null without rates or when none is known (docs/budgets.md)."""
    idle_cost: float | None
    """The part of `cost` the idle GPU-minutes make."""
    currency: str | None
    """`accounting.rates.currency`; null without rates."""


@with_config(CLOSED)
class UsageReport(TypedDict):
    group_by: GroupBy
    since: datetime | None
    until: datetime | None
    computed_at: datetime
    """When these figures were computed (cached ≤ 30 s)."""
    groups: list[UsageGroup]


# --- budgets --------------------------------------------------------------------------------


@with_config(CLOSED)
class ModelSpend(TypedDict):
    gpu_model: str | None
    """As dcgm-exporter names it; null for jobs whose model was not measured."""
    gpu_hours: float | None
    cost: float | None
    """At `accounting.rates`; null where no price applies."""


@with_config(CLOSED)
class Budget(TypedDict):
    team: str
    period: Period
    gpu_model: str | None
    """The glob of GPU models the budget counts; null: every model."""
    unit: Literal["gpu_hours", "amount"]
    """What `budget`, `spent` and `forecast` count: GPU-hours, or money in `currency`."""
    currency: str | None
    start: datetime
    """This period's start (local midnight in digest.timezone)."""
    end: datetime
    budget: float
    spent: float | None
    """So far, over the jobs that finished this period and whose spend could be counted; null where
    none could (a money budget of jobs no price applies to)."""
    share: float | None
    """`spent` / `budget`."""
    forecast: float | None
    """Spend at the period's end from the earlier periods' shape (docs/budgets.md); null in the
    period's first tenth."""
    by_model: list[ModelSpend]
    """This period's GPU-hours and cost per GPU model."""


@with_config(CLOSED)
class BudgetList(TypedDict):
    items: list[Budget]
    computed_at: datetime


# --- recommendations across jobs --------------------------------------------------------------


@with_config(CLOSED)
class RecommendedJob(TypedDict):
    """The job a recommendation was made for."""

    cluster: str
    uid: str
    namespace: str
    name: str
    owner: str | None
    team: str | None
    finished_at: datetime | None


@with_config(CLOSED)
class JobRecommendation(Recommendation):
    """An open recommendation (no newer run of the job's family yet) and its job."""

    id: int
    job: RecommendedJob
    waste_gib_hours: float
    waste_core_hours: float
    field_path: str | None
    """The field of the job's spec to change, e.g. `resources.limits["nvidia.com/gpu"]`."""


@with_config(CLOSED)
class RecommendationPage(TypedDict):
    items: list[JobRecommendation]
    next_cursor: NextCursor


# --- advice adoption ----------------------------------------------------------------------------


@with_config(CLOSED)
class AdoptionFigures(TypedDict):
    """Whether new runs of job families followed the advice their family's previous run was given
    (docs/rightsizing.md, "Advice adoption"), and what that freed against the previous request."""

    runs: int
    """New runs of families judged, those without prior advice included."""
    advised: int
    """Runs whose previous run was given advice: followed + partly + ignored + over_corrected."""
    followed: int
    partly: int
    ignored: int
    over_corrected: int
    """Runs that went below the usage the advice was measured on (or were OOM-killed after it)."""
    gpu_hours_freed: float | None
    """GPU-hours freed by advice followed in full or in part: request delta × the new run's pods ×
    its runtime; null when no such run has a known runtime."""
    memory_gib_hours_freed: float | None
    """Memory GiB-hours freed, likewise."""


@with_config(CLOSED)
class AdoptionPersonFigures(AdoptionFigures):
    """One person's adoption."""

    owner: str
    """The owner's e-mail, or "(no owner)"."""


@with_config(CLOSED)
class AdoptionGroup(AdoptionFigures):
    """The adoption of one person of one team."""

    team: str | None
    """The team; null: none known."""
    owner: str | None
    """The owner's e-mail; null: none known."""


@with_config(CLOSED)
class AdoptionReport(TypedDict):
    """Advice adoption of the new runs of job families that finished in [since, until)."""

    team: str | None
    since: datetime | None
    until: datetime | None
    total: AdoptionFigures
    groups: list[AdoptionGroup]
    """Per team and owner, by team then owner."""


# --- notifications -----------------------------------------------------------------------------


@with_config(CLOSED)
class Notification(TypedDict):
    """A delivery-log entry; the rendered message stays out (it can be large and is not the log)."""

    id: int
    kind: NotificationKind
    channel: Channel
    recipient: str
    status: DeliveryStatus
    cluster: str | None
    job_uid: str | None
    group_key: str | None
    created_at: datetime
    due_at: datetime
    next_attempt_at: datetime | None
    attempts: int
    last_error: str | None
    provider_message_id: str | None
    sent_at: datetime | None


@with_config(CLOSED)
class NotificationPage(TypedDict):
    items: list[Notification]
    next_cursor: NextCursor


# --- the directory -----------------------------------------------------------------------------


# What a person may ask for themselves: `never` is an annotation for a job, not a person's choice.
PersonNotify = Literal["always", "failure"]


@with_config(CLOSED)
class Preference(TypedDict):
    """One preference a person (or an admin for them) set over the directory, and where it came from."""

    value: int | list[Channel] | PersonNotify | datetime | bool | None
    via: Via
    """telegram: the person, in their linked chat; slack: the person, from Slack (/inno, a DM, the
    app's Home tab); api: PUT /api/v1/users/{email}; email: the person, through the one-click
    unsubscribe link of an e-mail; page: the person, through a form of their personal page (GET /me)."""
    by: str | None
    """The chat id, the Slack member id, or the API token's name (null for email and page)."""
    at: datetime


@with_config(CLOSED)
class UserPreferences(TypedDict):
    """The preferences the person set, each with its origin (the others: the directory's)."""

    telegram_chat_id: NotRequired[Preference]
    channels: NotRequired[Preference]
    notify: NotRequired[Preference]
    muted_until: NotRequired[Preference]
    nudges: NotRequired[Preference]
    emails: NotRequired[Preference]


@with_config(CLOSED)
class User(TypedDict):
    """A user as routing sees them: the directory entry with their own preferences applied."""

    email: str
    name: str | None
    slack_user_id: str | None
    telegram_chat_id: int | None
    channels: list[Channel]
    notify: PersonNotify
    """failure: the person asked for failed jobs' summaries only (/failures)."""
    muted_until: datetime | None
    """Their messages are held until then (none is lost); null: not muted."""
    nudges: bool
    """false: the person turned idle-GPU nudges off (/nudges off), on every channel."""
    emails: bool
    """false: the person unsubscribed from e-mail (the one-click link every e-mail carries): no
    e-mail at all, whatever a job asks; the other channels are unchanged."""
    preferences: UserPreferences


@with_config(CLOSED)
class UserPage(TypedDict):
    items: list[User]
    next_cursor: NextCursor


class PreferencesBody(BaseModel):
    """A person's own preferences to set (a value) or drop (null: the directory's value stands
    again); the ones left out are kept. Recorded as set through the API by the token's name."""

    model_config = ConfigDict(extra="forbid", strict=True)

    telegram_chat_id: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    channels: tuple[Channel, ...] | None = Field(None, min_length=1)
    notify: PersonNotify | None = None
    muted_until: AwareDatetime | None = Field(None, description=f"At most {MAX_MUTE_HOURS:g} hours ahead.")
    nudges: bool | None = Field(
        None,
        description="false: no idle-GPU nudges on any channel (Telegram: /nudges off); true: nudges again.",
    )
    emails: bool | None = Field(
        None,
        description="false: no e-mail at all (what the one-click unsubscribe link sets); true: e-mail again.",
    )


class UserBody(BaseModel):
    """The body of PUT /api/v1/users/{email}; `email`, if given, must match the path."""

    model_config = ConfigDict(extra="forbid", strict=True)

    email: str | None = Field(None, pattern=EMAIL_PATTERN, description="Must match the path.")
    name: str | None = Field(None, max_length=200, pattern=SAFE_PATTERN)
    slack_user_id: str | None = Field(None, max_length=64, pattern=SAFE_PATTERN)
    telegram_chat_id: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    channels: tuple[Channel, ...] = (Channel.EMAIL,)
    preferences: PreferencesBody | None = Field(
        None, description="The person's own preferences to change; left out or null: none changes."
    )


class OneClickBody(BaseModel):
    """The form a one-click unsubscribe posts (RFC 8058): exactly `List-Unsubscribe=One-Click`, as
    a mail provider's Unsubscribe button or the unsubscribe page's button sends it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    list_unsubscribe: Literal["One-Click"] = Field(alias="List-Unsubscribe")


class PersonalPageForm(BaseModel):
    """One form of the personal page (GET /me): its CSRF token and the one change it asks for."""

    model_config = ConfigDict(extra="forbid", strict=True)

    csrf: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{0,128}$",
        description="The page's form token: base64url HMAC-SHA256 over the address and the link's "
        "signature (missing or wrong: 403, nothing changed).",
    )
    change: Literal["notify", "mute", "unmute", "nudges", "emails", "channels"]
    value: str | None = Field(
        None,
        pattern=r"^[a-z0-9]{1,16}$",
        description="notify: always or failure; mute: 1h, 8h, 1d, 3d or 7d; nudges, emails: on or off.",
    )
    channel_email: Literal["on"] | None = None
    channel_slack: Literal["on"] | None = None
    channel_telegram: Literal["on"] | None = None


# --- pipeline events (POST /api/v1/events) ----------------------------------------------------

TEXT_MAX_CHARS = 4000
KEY_PATTERN = r"^[A-Za-z0-9._:/+@=-]{1,200}$"
TEAM_PATTERN = r"^[^\x00]{1,253}$"
# A plain web URL; the view also asks domain.links for a host (JSON Schema cannot say that).
URL_PATTERN = r"^https?://[!#$%&()*+,\-./0-9:;=?@A-Z\[\]_a-z~]+$"


class LinkBody(BaseModel):
    """A link the message carries, shown with its title."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: str = Field(min_length=1, max_length=TITLE_MAX_CHARS, pattern=SAFE_PATTERN)
    url: str = Field(max_length=URL_MAX_CHARS, pattern=URL_PATTERN)


class EventBody(BaseModel):
    """The body of POST /api/v1/events: a pipeline's message, to exactly one of `to` and `team`."""

    # A null `to` or `team` counts as left out, so "given" in the schema means given as a string.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "oneOf": [
                {"required": [name], "properties": {name: {"type": "string"}}} for name in ("to", "team")
            ]
        },
    )

    to: str | None = Field(
        None,
        max_length=254,
        pattern=EMAIL_PATTERN,
        description="One person's e-mail: their directory channels, else e-mail.",
    )
    team: str | None = Field(
        None,
        pattern=TEAM_PATTERN,
        description="A team: its Slack channel where it has one, else its leads.",
    )
    title: str = Field(min_length=1, max_length=TITLE_MAX_CHARS, pattern=SAFE_PATTERN)
    text: str | None = Field(None, max_length=TEXT_MAX_CHARS, pattern=SAFE_PATTERN)
    links: tuple[LinkBody, ...] = Field((), max_length=LINKS_MAX)
    key: str | None = Field(
        None,
        pattern=KEY_PATTERN,
        description="The message is sent once per key of the posting token: the same token and key "
        "again sends nothing (409 with another body); another token's key is another key.",
    )

    @model_validator(mode="after")
    def _one_recipient(self) -> EventBody:
        if (self.to is None) == (self.team is None):
            raise ValueError("give exactly one of to and team")
        return self


@with_config(CLOSED)
class EventRecipient(TypedDict):
    recipient: str
    """An e-mail address, or the team's Slack channel."""
    channel: Channel


@with_config(CLOSED)
class EventReceipt(TypedDict):
    """A pipeline event routed and queued (or, for a key posted before, the first one's answer)."""

    id: int
    key: str
    """The key sent, or the one made up for a post without a key."""
    recipients: list[EventRecipient]
    duplicate: bool
    """True when the key was posted before: nothing new was sent."""


# --- the weekly digest (domain/digest.py builds it; see DigestProvider in keys.py) -------------


@with_config(CLOSED)
class DigestJobs(TypedDict):
    """The team's GPU jobs that finished in the week (in the digest's zone)."""

    total: int
    unmeasured: int
    """Jobs without any usage measured."""
    succeeded: int
    failed: int
    oom: int


@with_config(CLOSED)
class DigestMemory(TypedDict):
    """GiB × hours held, over the jobs where both the memory request and the peak are known."""

    requested: float | None
    peak: float | None


@with_config(CLOSED)
class DigestQueueWait(TypedDict):
    """Seconds from creation to the first scheduling, over the week's jobs."""

    p50: float | None
    p95: float | None


@with_config(CLOSED)
class DigestPerson(TypedDict):
    owner: str
    """The owner's e-mail, or "(no owner)"."""
    jobs: int
    gpu_hours: float | None
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    """Used over held GPU-hours (0–1), over the jobs where both are known."""


@with_config(CLOSED)
class DigestWaste(TypedDict):
    """One of the week's most wasteful jobs, with its largest recommendation."""

    namespace: str
    name: str
    uid: str
    owner: str
    waste_gpu_hours: float
    kind: RecommendationKind
    severity: Severity
    recommendation: str


@with_config(CLOSED)
class DigestSeries(TypedDict):
    """One person's GPU-hours per local day, Monday first; used is null on a day with an unmeasured job."""

    owner: str
    held: list[float]
    used: list[float | None]


@with_config(CLOSED)
class DigestDaily(TypedDict):
    days: list[IsoDate]
    people: list[DigestSeries]


@with_config(CLOSED)
class DigestChange(TypedDict):
    """This week against the previous one; delta and percent are null where either is unknown."""

    previous: float | None
    delta: float | None
    percent: float | None


@with_config(CLOSED)
class DigestChanges(TypedDict):
    gpu_hours: DigestChange
    efficiency: DigestChange
    idle_gpu_hours: DigestChange


@with_config(CLOSED)
class DigestQuota(TypedDict):
    gpus: float | None
    """The nominal GPU quota of the team's Kueue ClusterQueue, where known."""
    share: float | None
    """GPU-hours held over the quota's GPU-hours in the week."""


@with_config(CLOSED)
class DigestLivePerson(TypedDict):
    """One person's idle GPUs in running pods and workspaces, as the week's nudges saw them."""

    owner: str
    """The owner's e-mail, or "(no owner)"."""
    pods: int
    nudges: int
    idle_gpu_hours: float


@with_config(CLOSED)
class DigestNudgedPod(TypedDict):
    """A pod nudged at least twice in the week."""

    namespace: str
    pod: str
    kind: str
    """What the pod was recorded as: `workspace` (Coder, JupyterHub), `pod` (bare) or `job`."""
    owner: str
    nudges: int
    idle_gpu_hours: float


@with_config(CLOSED)
class DigestLive(TypedDict):
    """Idle GPU-hours in running pods and workspaces, from the week's nudges: per idle stretch, its
    idle GPU-equivalents × the time to its last nudge in the week (a lower bound)."""

    idle_gpu_hours: float | None
    """The sum over people; null when no pod of the team was nudged in the week."""
    people: list[DigestLivePerson]
    """Most idle GPU-hours first."""
    nudged_repeatedly: list[DigestNudgedPod]


@with_config(CLOSED)
class DigestAdoption(AdoptionFigures):
    """The week's new runs: the team's adoption, and per person with advice to follow."""

    people: list[AdoptionPersonFigures]
    """Most advised runs first."""


@with_config(CLOSED)
class DigestMissing(TypedDict):
    figure: str
    reason: str


@with_config(CLOSED)
class DigestModelCost(TypedDict):
    gpu_model: str
    """As dcgm-exporter names it; "(model not measured)" for jobs whose model was not measured."""
    jobs: int
    gpu_hours: float | None
    idle_gpu_hours: float | None
    cost: float | None
    """GPU-hours × the model's price; null where no price applies (never 0)."""
    idle_cost: float | None


@with_config(CLOSED)
class DigestIdleCost(TypedDict):
    owner: str
    idle_gpu_hours: float
    """Of the models with a price."""
    idle_cost: float


@with_config(CLOSED)
class DigestCosts(TypedDict):
    """The week's GPU-hours priced per GPU model (accounting.rates' `gpu_hour`; CPU and memory
    prices are not in the digest's figures); `currency` null and the lists empty without them."""

    currency: str | None
    gpu_cost: float | None
    """Over the priced models."""
    idle_cost: float | None
    by_model: list[DigestModelCost]
    """Most expensive first, models without a price last."""
    top_idle_cost: list[DigestIdleCost]
    """The five people whose idle GPU-hours cost the most."""


@with_config(CLOSED)
class TrendWeek(TypedDict):
    """One week of a trend: the GPU jobs that finished in it (in the trend's zone)."""

    week: str
    start: IsoTime
    end: IsoTime
    jobs: int
    jobs_unmeasured: int
    """Of those, jobs without measured GPU-minutes: the sums leave them out."""
    gpu_hours: float | None
    """GPU-hours held; 0 in a week without GPU jobs, null when none of its jobs was measured."""
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    """Used over held GPU-hours, of the jobs whose use was measured."""
    quota_share: float | None
    """GPU-hours held over the nominal GPU quota × the week's hours; null without a known quota."""


@with_config(CLOSED)
class Digest(TypedDict):
    """A team's week of GPU jobs. Only GPU jobs count; a job belongs to the week in which it finished
    in the digest's zone; a figure measured for no job of the week is null and named in `missing`."""

    team: str
    week: str
    """ISO week, e.g. 2026-W48."""
    timezone: str
    start: IsoTime
    """When the week began in the digest's zone (Monday 00:00), as a UTC time."""
    end: IsoTime
    week_hours: float
    """167, 168 or 169: the local week's length."""
    no_gpu_jobs: bool
    jobs: DigestJobs
    gpu_hours: float | None
    used_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    memory_gib_hours: DigestMemory
    queue_wait_seconds: DigestQueueWait
    people: list[DigestPerson]
    """Largest consumers first."""
    top_waste: list[DigestWaste]
    daily: DigestDaily
    change: DigestChanges
    quota: DigestQuota
    live: DigestLive
    adoption: DigestAdoption
    trend: list[TrendWeek]
    """The team's weeks up to this one, oldest first (twelve, see GET /api/v1/trends)."""
    costs: DigestCosts
    budgets: list[Budget]
    """The team's budgets in their current period as GET /api/v1/budgets reports them."""
    missing: list[DigestMissing]


class ProvidedDigest(Digest):
    """What a digest provider returns: the digest and, under `html`, the page a lead reads."""

    html: NotRequired[str]


# --- trends ------------------------------------------------------------------------------------


@with_config(CLOSED)
class TrendSeries(TypedDict):
    group: str
    """The team or the cluster."""
    quota_gpus: float | None
    """The nominal GPU quota of the group's Kueue ClusterQueues as known now (the quota's history
    is not kept: it applies to every week); null when none is known."""
    weeks: list[TrendWeek]
    """Oldest first, every week of the trend present."""


@with_config(CLOSED)
class TrendReport(TypedDict):
    group_by: TrendGroup
    timezone: str
    """The zone the weeks are counted in (digest.timezone)."""
    weeks: list[str]
    series: list[TrendSeries]
    """One per group with GPU jobs in the weeks (and the one asked for by name), by name."""


# --- probes ------------------------------------------------------------------------------------


@with_config(CLOSED)
class Health(TypedDict):
    status: Literal["ok"]


@with_config(CLOSED)
class Readiness(TypedDict):
    ready: bool
    checks: dict[str, bool]
    not_ready: list[str]
    """Checks that failed."""
