"""The live check's decisions, pure: idle windows, idle-since, GPU-hours, memory held, repeat, quiet
hours, the payload a nudge carries, and who gets it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inno_notify.domain.live import (
    GpuWindow,
    IdleFinding,
    IdlePolicy,
    find_idle,
    finding_from_payload,
    finding_to_payload,
    in_quiet_hours,
    nudge_dedup_key,
    nudge_due,
    parse_quiet_hours,
)
from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    JobRecord,
    JobStatus,
    NotificationKind,
    NotifyMode,
    PodRecord,
    Team,
    WorkloadKind,
)
from inno_notify.domain.routing import Directory, plan_nudge

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
H = timedelta(hours=1)
POLICY = IdlePolicy(window_seconds=3600, idle_util_percent=5.0, scrape_seconds=15)
FULL = 240
LOOKBACK = NOW - timedelta(days=7)


def job(**changes: Any) -> JobRecord:
    base = JobRecord(
        "c", "job-1", "ml", "train", status=JobStatus.RUNNING, owner="alice@example.com", team="ml"
    )
    return replace(base, **changes)


def pod(held: timedelta = 3 * H, gpus: float = 2.0) -> PodRecord:
    return PodRecord(
        "c",
        "pod-1",
        "ml",
        "train-x1",
        "job-1",
        "Running",
        NOW - held,
        node="n1",
        scheduled_at=NOW - held,
        gpu_equivalents=gpus,
    )


def gpu(
    index: str = "0",
    util: float | None = 0.0,
    samples: int = FULL,
    fb: float | None = 300.0,
    busy: datetime | None = None,
) -> GpuWindow:
    return GpuWindow(index, f"GPU-{index}", "A100", None, "n1", util, samples, fb, busy)


@pytest.mark.parametrize(
    ("case", "held", "gpus", "idle", "since", "hours"),
    [
        ("idle from the start", 3 * H, [gpu("0"), gpu("1")], 2, NOW - 3 * H, 6.0),
        ("busy an hour, then idle", 3 * H, [gpu("0", busy=NOW - 2 * H)], 1, NOW - 2 * H, 2.0),
        ("one of two idle", 3 * H, [gpu("0", util=80.0), gpu("1")], 1, NOW - 3 * H, 3.0),
        ("at the threshold is not below it", 3 * H, [gpu("0", util=5.0)], 0, None, None),
        ("busy", 3 * H, [gpu("0", util=60.0)], 0, None, None),
        ("held for less than the window", H - timedelta(minutes=1), [gpu("0")], 0, None, None),
        ("too few samples: metrics just appeared", 3 * H, [gpu("0", samples=100)], 0, None, None),
        ("no GPU series at all", 3 * H, [], 0, None, None),
        ("no utilization figure", 3 * H, [gpu("0", util=None)], 0, None, None),
    ],
)
def test_find_idle(
    case: str, held: timedelta, gpus: list[GpuWindow], idle: int, since: datetime | None, hours: float | None
) -> None:
    record = pod(held, gpus=float(max(1, len(gpus))))
    finding = find_idle(job(), record, gpus, NOW, POLICY, LOOKBACK)
    if not idle:
        assert finding is None, case
        return
    assert finding is not None, case
    assert len(finding.idle) == idle
    assert finding.idle_since == since
    assert finding.idle_gpu_hours == pytest.approx(hours)
    assert not finding.since_at_least and not finding.memory_held


def test_mig_slices_count_their_share_of_a_gpu() -> None:
    slices = [replace(gpu("0"), mig_profile="1g.10gb")]
    finding = find_idle(job(), pod(2 * H, gpus=1 / 7), slices, NOW, POLICY, LOOKBACK)
    assert finding is not None and finding.idle_gpu_hours == pytest.approx(2 / 7)
    assert finding.idle_gpu_equivalents == pytest.approx(1 / 7)


def test_memory_allocated_at_zero_compute() -> None:
    finding = find_idle(job(), pod(), [gpu("0", fb=12000.0), gpu("1", fb=300.0)], NOW, POLICY, LOOKBACK)
    assert finding is not None and finding.memory_held_mib == 12300.0
    # A CUDA context alone is not "memory allocated".
    context = find_idle(job(), pod(), [gpu("0", fb=600.0)], NOW, POLICY, LOOKBACK)
    assert context is not None and not context.memory_held


def test_older_than_the_lookback_is_a_lower_bound() -> None:
    finding = find_idle(job(), pod(held=10 * 24 * H), [gpu("0")], NOW, POLICY, LOOKBACK)
    assert finding is not None and finding.since_at_least and finding.idle_since == LOOKBACK


def test_a_busy_sample_just_inside_the_window_still_means_idle_the_window() -> None:
    """'Last busy' is read a lookback delta after a sample: never later than the window's start."""
    finding = find_idle(job(), pod(), [gpu("0", busy=NOW - timedelta(minutes=57))], NOW, POLICY, LOOKBACK)
    assert finding is not None and finding.idle_since == NOW - H


def test_the_workspace_identity_comes_from_its_labels() -> None:
    labels = {
        "com.coder.workspace.id": "w1",
        "com.coder.workspace.name": "dev",
        "com.coder.user.username": "bob",
    }
    finding = find_idle(
        job(kind=WorkloadKind.WORKSPACE, labels=labels), pod(), [gpu()], NOW, POLICY, LOOKBACK
    )
    assert finding is not None
    assert (finding.platform, finding.platform_user, finding.workspace_name) == ("coder", "bob", "dev")


def test_the_payload_round_trips_and_refuses_what_is_missing() -> None:
    finding = find_idle(
        job(), pod(), [gpu("0", fb=9000.0), gpu("1", busy=NOW - 2 * H)], NOW, POLICY, LOOKBACK
    )
    assert finding is not None
    payload: dict[str, Any] = {"nudge": finding_to_payload(finding), "name": "Alice"}
    assert finding_from_payload(payload) == finding
    broken: dict[str, Any]
    for broken in (
        {},
        {"nudge": "x"},
        {"nudge": {**payload["nudge"], "idle": []}},
        {"nudge": {**payload["nudge"], "pod": None}},
        {"nudge": {**payload["nudge"], "idle_since": "yesterday"}},
        {"nudge": {**payload["nudge"], "observed_at": 1e300}},
        {"nudge": {**payload["nudge"], "timezone": "Mars/Olympus"}},
        {"nudge": {**payload["nudge"], "idle_gpu_hours": float("nan")}},
    ):
        with pytest.raises(ValueError):
            finding_from_payload(broken)


@pytest.mark.parametrize(
    ("last", "now", "due"),
    [
        (None, NOW, True),
        (NOW - 23 * H, NOW, False),
        (NOW - 24 * H, NOW, True),
    ],
)
def test_nudge_due(last: datetime | None, now: datetime, due: bool) -> None:
    assert nudge_due(last, now, 24.0) is due


def test_writers_at_the_same_moment_share_a_dedup_key() -> None:
    key = nudge_dedup_key("c", "pod-1", NOW, 24.0, "email", "a@x")
    assert key == nudge_dedup_key("c", "pod-1", NOW + timedelta(minutes=5), 24.0, "email", "a@x")
    assert key != nudge_dedup_key("c", "pod-1", NOW + 24 * H, 24.0, "email", "a@x")
    assert "/idle_nudge/" in key


@pytest.mark.parametrize(
    ("spec", "zone", "local", "quiet"),
    [
        ("22:00-07:00", "UTC", "23:30", True),
        ("22:00-07:00", "UTC", "06:59", True),
        ("22:00-07:00", "UTC", "07:00", False),
        ("22:00-07:00", "UTC", "12:00", False),
        ("12:00-13:00", "UTC", "12:30", True),
        ("12:00-13:00", "UTC", "13:00", False),
        # 10:00 UTC is 11:00 in Berlin in winter.
        ("10:30-11:30", "Europe/Berlin", "10:00", True),
    ],
)
def test_quiet_hours(spec: str, zone: str, local: str, quiet: bool) -> None:
    hour, minute = map(int, local.split(":"))
    assert in_quiet_hours(NOW.replace(hour=hour, minute=minute), parse_quiet_hours(spec, zone)) is quiet


@pytest.mark.parametrize("spec", ["", "22-07", "25:00-07:00", "07:00-07:00", "22:00"])
def test_quiet_hours_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_quiet_hours(spec)


# --- routing ----------------------------------------------------------------------------------------

USERS = {
    "alice@example.com": DirectoryUser(
        "alice@example.com", "Alice", telegram_chat_id=7, channels=("telegram", "email")
    ),
    "lead@example.com": DirectoryUser("lead@example.com", channels=("email",)),
}
TEAMS = {"ml": Team("ml", ("ml",), ("lead@example.com",), notify_unowned=True)}
ALL = frozenset({"telegram", "slack", "email"})


def finding_for(record: JobRecord) -> IdleFinding:
    found = find_idle(record, pod(), [gpu()], NOW, POLICY, LOOKBACK)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("changes", "recipients"),
    [
        ({}, {("telegram", "alice@example.com"), ("email", "alice@example.com")}),
        ({"notify": NotifyMode.FAILURE}, {("telegram", "alice@example.com"), ("email", "alice@example.com")}),
        ({"notify": NotifyMode.NEVER}, set()),
        ({"channels": ("email",)}, {("email", "alice@example.com")}),
        ({"owner": None}, {("email", "lead@example.com")}),
        ({"owner": None, "team": "other"}, set()),
        ({"owner": "bob@elsewhere.example"}, {("email", "bob@elsewhere.example")}),
    ],
)
def test_plan_nudge(changes: dict[str, Any], recipients: set[tuple[str, str]]) -> None:
    record = job(**changes)
    plan = plan_nudge(record, finding_for(record), Directory(USERS, TEAMS), ALL, NOW, 24.0)
    assert {(n.channel.value, n.recipient) for n in plan.notifications} == recipients
    for row in plan.notifications:
        assert row.kind is NotificationKind.IDLE_NUDGE
        assert row.job_uid == "pod-1" and row.due_at == NOW and row.group_key is None
        assert finding_from_payload(row.payload).pod == "train-x1"
    if not recipients:
        assert plan.silent_reason


def test_plan_nudge_keeps_the_addresses_and_the_allowed_domains() -> None:
    record = job()
    plan = plan_nudge(record, finding_for(record), Directory(USERS, TEAMS), ALL, NOW, 24.0, ("corp.example",))
    assert [n.channel for n in plan.notifications] == [Channel.TELEGRAM]
    assert plan.notifications[0].address.telegram_chat_id == 7
    assert any(s.channel == "email" for s in plan.skipped)


def test_a_stopped_workspace_gets_no_summary() -> None:
    from inno_notify.domain.routing import plan_summary

    stopped = job(kind=WorkloadKind.WORKSPACE, status=JobStatus.DELETED)
    plan = plan_summary(stopped, Directory(USERS, TEAMS), ALL, NOW, 30.0)
    assert plan.notifications == () and plan.silent_reason is not None and "workspace" in plan.silent_reason
    assert plan_summary(
        replace(stopped, kind=WorkloadKind.POD), Directory(USERS, TEAMS), ALL, NOW, 30.0
    ).notifications
