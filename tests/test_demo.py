"""`inno-notify demo` end to end: what it delivered matches the workload it generated, and the
JupyterHub server left idling on a GPU gets its nudge while the jobs run."""

from __future__ import annotations

import email
import io
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

from rich.console import Console

from inno_notify.adapters.db.jobs import JobFilter
from inno_notify.adapters.db.repository import Store
from inno_notify.demo import run_demo
from inno_notify.domain.model import JobStatus, WorkloadKind

START = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


async def test_demo_delivers_one_summary_per_job_to_its_owner(tmp_path: Path) -> None:
    out = io.StringIO()
    result = await run_demo(
        jobs=10,
        speed=1000,
        out=tmp_path,
        console=Console(file=out, width=100),
        start=START,
        timeout_seconds=120,
    )
    workload = result.workload
    assert len(workload.jobs) == 10

    store = Store.from_url(result.database_url)
    try:
        jobs, _ = await store.list_jobs(JobFilter(), limit=100)
        by_uid = {j.uid: j for j in jobs if j.kind is WorkloadKind.JOB}
        # Every generated job was recorded with its owner and ended in the state the cluster showed.
        assert set(by_uid) == {j.spec.uid for j in workload.jobs}
        # The notebook server was recorded as a workspace of its JupyterHub user, stopped, measured,
        # and got no summary.
        (workspace,) = workload.workspaces
        (record,) = [j for j in jobs if j.kind is WorkloadKind.WORKSPACE]
        assert (record.uid, record.owner, record.status) == (
            workspace.pod_uid,
            workspace.person.email,
            JobStatus.DELETED,
        )
        usage = await store.get_usage("demo", workspace.pod_uid)
        assert usage is not None and usage.gpus_idle == 1
        for sim in workload.jobs:
            record = by_uid[sim.spec.uid]
            assert record.owner == sim.person.email
            assert record.exit_code == sim.exit_code
            expected_status = "succeeded" if sim.outcome == "succeeded" else "failed"
            assert record.status.value == expected_status
            recs = await store.recommendations_of("demo", sim.spec.uid)
            if sim.over_requested and sim.outcome == "succeeded":
                assert recs, f"{sim.spec.name} over-requested but got no advice"
            if sim.outcome == "oom":
                assert any(r.kind.value == "memory_increase" for r in recs)
    finally:
        await store.close()

    # Exactly one summary per job, all delivered, each to the job's owner.
    assert result.summaries_sent == len(workload.jobs)
    owners = {sim.person.email for sim in workload.jobs}
    # The idle workspace was nudged, to its owner; any other nudge is about a job that held a GPU
    # it did not use (its true mean utilization below the threshold), to that job's owner.
    assert (workspace.person.email, f"JupyterHub server of {workspace.username}: its GPU idle for") in {
        (to, headline.rsplit(" ", 2)[0].rsplit(" for", 1)[0] + " for") for to, headline in result.nudges
    }
    idle_owners = {s.person.email for s in workload.jobs if min(s.behaviour.gpu_util_percent) < 5}
    assert {to for to, _ in result.nudges} <= idle_owners | {workspace.person.email}
    assert set(result.recipients) == owners | {to for to, _ in result.nudges}
    # The sweep's jobs (same owner, same group key, ending together) share one e-mail.
    sweep = [sim for sim in workload.jobs if sim.spec.name.startswith("sweep-")]
    assert len(sweep) == 3
    assert result.messages == len(workload.jobs) - len(sweep) + 1 + len(result.nudges)

    mails = sorted((tmp_path / "mail").glob("*.eml"))
    assert len(mails) == result.messages
    parsed = [email.message_from_bytes(p.read_bytes(), policy=default) for p in mails]
    assert all(isinstance(m, EmailMessage) and m["Message-ID"] for m in parsed)
    assert {m["To"].addresses[0].addr_spec for m in parsed} == set(result.recipients)
    nudge_mail = next(m for m in parsed if "JupyterHub server" in str(m["Subject"]))
    body = nudge_mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "GPU memory is allocated (6 GiB) but compute is idle" in body
    assert "never stops or changes your workload" in body
    text = out.getvalue()
    assert "job summaries and" in text and "idle nudges" in text
    assert "Nudged while running" in text and f"JupyterHub server of {workspace.username}" in text
    for sim in workload.jobs:
        assert sim.spec.name in text

    # The weekly digest of each team counts that team's jobs, and its page was written.
    for team in workload.teams:
        text, page = result.digests[team.name]
        # A stopped workspace is measured and counted with the team's finished work.
        n_jobs = sum(1 for sim in workload.jobs if sim.person.team == team.name)
        n_jobs += sum(1 for w in workload.workspaces if w.person.team == team.name)
        assert f"team {team.name}" in text
        if n_jobs:
            assert f"over {n_jobs} job" in text
        if team.name == workspace.person.team:
            assert "Idle GPUs in running pods and workspaces" in text
            assert workspace.person.email in text.split("Idle GPUs in running pods")[1]
        assert page.exists() and "<html" in page.read_text(encoding="utf-8").lower()
