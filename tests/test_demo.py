"""`inno-notify demo` end to end: what it delivered matches the workload it generated, pipelines
included (one summary per Argo workflow and Airflow DAG run, one "model is serving", no summary of
a pipeline's GPU step on its own), and the JupyterHub server left idling on a GPU gets its nudge
while the jobs run."""

from __future__ import annotations

import email
import io
import re
from collections import Counter
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

import pytest
from rich.console import Console

from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.demo import demo_budget, run_demo
from inno_notify.domain.model import JobStatus, NotificationKind, WorkloadKind
from inno_notify.sim.workload import GPU_MODEL, SECOND_GPU_MODEL
from tests import stored

pytestmark = pytest.mark.slow

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
        # The demo's PyTorchJob is left out here (its summary may share an e-mail with its owner's
        # other summaries, which would make the counts below depend on timing);
        # tests/test_training_scenario.py plays every training kind through the same demo.
        training=False,
    )
    workload = result.workload
    assert len(workload.jobs) == 10 and not workload.training

    store = Store.from_url(result.database_url)
    steps = [s for w in workload.workflows for s in w.steps] + [t for r in workload.dag_runs for t in r.tasks]
    gpu_attempts = {a.pod_uid: s for s in steps if s.gpus for a in s.attempts}
    try:
        records = await stored.all_jobs(store)
        jobs = [j for j in records if j.kind is WorkloadKind.JOB]
        # A pipeline's GPU attempts are workloads of their own, measured, steps of their workflow
        # (its uid their parent, its owner theirs), with no summary of their own.
        step_jobs = [j for j in records if j.kind is WorkloadKind.POD]
        assert {j.uid for j in step_jobs} == set(gpu_attempts)
        assert all(j.parent_uid is not None and j.owner is not None for j in step_jobs), step_jobs
        sent, _ = await store.outbox.list_notifications(limit=500)
        assert not {n.job_uid for n in sent if n.kind is not NotificationKind.IDLE_NUDGE} & set(gpu_attempts)
        # The notebook server was recorded as a workspace of its JupyterHub user, stopped, measured,
        # and got no summary.
        (workspace,) = workload.workspaces
        (record,) = [j for j in records if j.kind is WorkloadKind.WORKSPACE]
        assert (record.uid, record.owner, record.status) == (
            workspace.pod_uid,
            workspace.person.email,
            JobStatus.DELETED,
        )
        usage = await store.usage.get_usage("demo", workspace.pod_uid)
        assert usage is not None and usage.gpus_idle == 1
        assert not [
            n for n in sent if n.job_uid == workspace.pod_uid and n.kind is NotificationKind.JOB_SUMMARY
        ]
        for uid in gpu_attempts:
            assert await stored.summary_state(store, "demo", uid) is SummaryState.SUMMARIZED
        by_uid = {j.uid: j for j in jobs}
        # Every generated job was recorded with its owner and ended in the state the cluster showed.
        assert set(by_uid) == {j.spec.uid for j in workload.jobs}
        for sim in workload.jobs:
            record = by_uid[sim.spec.uid]
            assert record.owner == sim.person.email
            assert record.exit_code == sim.exit_code
            expected_status = "succeeded" if sim.outcome == "succeeded" else "failed"
            assert record.status.value == expected_status
            recs = await stored.recommendations_of(store, "demo", sim.spec.uid)
            if sim.over_requested and sim.outcome == "succeeded":
                assert recs, f"{sim.spec.name} over-requested but got no advice"
            if sim.outcome == "oom":
                assert any(r.kind.value == "memory_increase" for r in recs)
    finally:
        await store.close()

    # Exactly one summary per job, one per pipeline and one per served model, all delivered, each
    # to its owner.
    pipelines = len(workload.workflows) + len(workload.dag_runs) + len(workload.services)
    assert (len(workload.workflows), len(workload.dag_runs), len(workload.services)) == (1, 1, 1)
    assert result.summaries_sent == len(workload.jobs) + pipelines
    assert result.workflow_summaries == pipelines
    owners = {sim.person.email for sim in workload.jobs}
    pipeline_owners = {w.owner for w in workload.workflows} | {r.owner for r in workload.dag_runs}
    # The idle workspace was nudged, to its owner; any other nudge is about a job that held a GPU
    # it did not use (its true mean utilization below the threshold), to that job's owner.
    headline = f"JupyterHub server of {workspace.username}: its GPU idle for"
    assert any(to == workspace.person.email and h.startswith(headline) for to, h in result.nudges)
    idle_owners = {s.person.email for s in workload.jobs if min(s.behaviour.gpu_util_percent) < 5}
    assert {to for to, _ in result.nudges} <= idle_owners | {workspace.person.email}
    # The lead of the demo's budget gets its one alert (below).
    budget = demo_budget(workload)
    assert budget is not None
    lead = next(t.lead for t in workload.teams if t.name == budget["team"])
    assert set(result.recipients) == owners | pipeline_owners | {to for to, _ in result.nudges} | {lead}
    # The sweep's jobs (same owner, same group key, ending together) share one e-mail — when the
    # machine keeps up: the group wait is 600 simulated seconds, 0.6 s of real time at this speed,
    # and a loaded machine can record their ends further apart than that (then each goes alone).
    sweep = [sim for sim in workload.jobs if sim.spec.name.startswith("sweep-")]
    assert len(sweep) == 3
    mails = sorted((tmp_path / "mail").glob("*.eml"))
    parsed = [email.message_from_bytes(p.read_bytes(), policy=default) for p in mails]
    plain = [m.get_body(("plain",)).get_content() for m in parsed]  # type: ignore[union-attr]
    sweep_mails = [text for text in plain if any(sim.spec.name in text for sim in sweep)]
    assert 1 <= len(sweep_mails) <= len(sweep)
    not_sweep = len(workload.jobs) - len(sweep) + pipelines + len(result.nudges) + 1
    assert result.messages == not_sweep + len(sweep_mails)
    assert len(mails) == result.messages
    assert all(isinstance(m, EmailMessage) and m["Message-ID"] for m in parsed)
    assert {m["To"].addresses[0].addr_spec for m in parsed} == set(result.recipients)
    # Every one-job summary of a GPU job names the simulated GPUs' model, one of two (issue 34).
    summaries = [b for b in plain if "Peak GPU memory:" in b and "no GPU requested" not in b]
    assert summaries and all(f"× {GPU_MODEL}" in b or f"× {SECOND_GPU_MODEL}" in b for b in summaries)
    # The digests price the week's GPU-hours by model: both models, in euros (issue 34).
    texts = [text for text, _ in result.digests.values()]
    assert all("By GPU model" in t and "EUR" in t for t in texts if "No GPU jobs" not in t)
    assert any(GPU_MODEL in t for t in texts) and any(SECOND_GPU_MODEL in t for t in texts)
    # Exactly one budget alert, to the lead of the budget's team, by e-mail, and printed.
    [(title, alert_text)] = result.budget_alerts
    assert title.startswith(f"Budget: {budget['team']} (*A100*)") and "Spent so far:" in alert_text
    [alert_mail] = [m for m in parsed if "Budget:" in str(m["Subject"])]
    assert [a.addr_spec for a in alert_mail["To"].addresses] == [lead]
    assert "budget alert" in out.getvalue() and title in out.getvalue()
    digest_text, _ = result.digests[budget["team"]]
    assert "Budget week of" in digest_text and "GPU-h of" in digest_text
    nudge_mail = next(m for m in parsed if "JupyterHub server" in str(m["Subject"]))
    body = nudge_mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "GPU memory is allocated (6 GiB) but compute is idle" in body
    assert "never stops or changes your workload" in body
    text = out.getvalue()
    assert "job summaries and" in text and "idle nudges delivered" in text
    assert "Nudged while running" in text and f"JupyterHub server of {workspace.username}" in text
    for sim in workload.jobs:
        assert sim.spec.name in text
    [wf] = workload.workflows
    assert f"Argo workflow face-research/{wf.name} succeeded" in text
    assert "Airflow DAG run nlp-research/nightly_embeddings" in text
    assert "face-research/resnet-serve is serving" in text
    subjects = [m["Subject"] for m in parsed]
    assert (
        sum("Argo workflow" in s for s in subjects) == 1
        and sum("Airflow DAG run" in s for s in subjects) == 1
    )

    # The weekly digest of each team counts that team's jobs, and its page was written.
    for team in workload.teams:
        text, page = result.digests[team.name]
        n_jobs = sum(1 for sim in workload.jobs if sim.person.team == team.name)
        # A pipeline's GPU attempts count in its team's digest: they held GPUs.
        namespace = next(t.namespace for t in workload.teams if t.name == team.name)
        n_jobs += sum(
            len(s.attempts) for w in workload.workflows if w.namespace == namespace for s in w.steps if s.gpus
        )
        n_jobs += sum(
            len(t.attempts) for r in workload.dag_runs if r.namespace == namespace for t in r.tasks if t.gpus
        )
        # A stopped workspace is measured and counted with the team's finished work.
        n_jobs += sum(1 for w in workload.workspaces if w.person.team == team.name)
        assert f"team {team.name}" in text
        if n_jobs:
            assert f"over {n_jobs} job" in text
        if team.name == workspace.person.team:
            assert "Idle GPUs in running pods and workspaces" in text
            assert workspace.person.email in text.split("Idle GPUs in running pods")[1]
        assert page.exists() and "<html" in page.read_text(encoding="utf-8").lower()

    # The personal page of the researcher with the most runs: their runs, none of anyone else's.
    assert result.personal_page is not None and result.personal_page.exists()
    me = result.personal_page.read_text(encoding="utf-8")
    runs_of = Counter(sim.person.email for sim in workload.jobs)
    owner = runs_of.most_common(1)[0][0]
    assert owner in me and "Your settings" in me
    mine = {sim.spec.name for sim in workload.jobs if sim.person.email == owner}
    others = {sim.spec.name for sim in workload.jobs if sim.person.email != owner} - mine
    assert all(f"/{name}</a>" in me for name in mine), mine
    assert not any(f"/{name}</a>" in me for name in others), others

    # The same researcher's `/inno status` in Slack, through the signed POST /slack/commands, and
    # the app's answer as the dispatcher sent it: their figures of the week, nobody else's.
    exchange = result.slack
    assert exchange is not None and (exchange.email, exchange.command) == (owner, "/inno status")
    finished = sum(1 for sim in workload.jobs if sim.person.email == owner)
    assert "No job running." in exchange.reply and "GPU-hours held:" in exchange.reply
    # Their jobs, and any pipeline GPU step they own, finished this week.
    counted = re.search(r"(\d+) jobs? finished", exchange.reply)
    assert counted is not None and int(counted.group(1)) >= finished, exchange.reply
    name = next(p.name for p in workload.people if p.email == owner)
    shown = out.getvalue()
    assert f"{name} ({exchange.user_id}) types /inno status in Slack" in shown
    assert f"Slack DM from the app to {name}" in shown and "GPU-hours held:" in shown
    written = (tmp_path / "slack-inno-status.txt").read_text(encoding="utf-8")
    assert written.startswith(f"{owner} ({exchange.user_id}): /inno status") and exchange.reply in written
