"""`inno-notify demo` end to end: what it delivered matches the workload it generated."""

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
        by_uid = {j.uid: j for j in jobs}
        # Every generated job was recorded with its owner and ended in the state the cluster showed.
        assert set(by_uid) == {j.spec.uid for j in workload.jobs}
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
    assert set(result.recipients) == owners
    # The sweep's jobs (same owner, same group key, ending together) share one e-mail.
    sweep = [sim for sim in workload.jobs if sim.spec.name.startswith("sweep-")]
    assert len(sweep) == 3
    assert result.messages == len(workload.jobs) - len(sweep) + 1

    mails = sorted((tmp_path / "mail").glob("*.eml"))
    assert len(mails) == result.messages
    parsed = [email.message_from_bytes(p.read_bytes(), policy=default) for p in mails]
    assert all(isinstance(m, EmailMessage) and m["Message-ID"] for m in parsed)
    assert {m["To"].addresses[0].addr_spec for m in parsed} == owners
    text = out.getvalue()
    assert "job summaries delivered" in text
    for sim in workload.jobs:
        assert sim.spec.name in text

    # The weekly digest of each team counts that team's jobs, and its page was written.
    for team in workload.teams:
        text, page = result.digests[team.name]
        n_jobs = sum(1 for sim in workload.jobs if sim.person.team == team.name)
        assert f"team {team.name}" in text
        if n_jobs:
            assert f"over {n_jobs} job" in text
        assert page.exists() and "<html" in page.read_text(encoding="utf-8").lower()
