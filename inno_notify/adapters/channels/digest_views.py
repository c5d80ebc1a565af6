"""The weekly digest as people read it: spelt figures, and the message per channel, page and JSON.

Like the job summary (views.py, render.py), templates get plain strings ("12.5 h", "41 %",
"+4 h (+80 %) vs last week", "n/a (not measured)") and never compute; the strings are escaped by
each channel's template environment, not here. The chart is rendered once per digest and goes
inline in the e-mail (a CID image) and the web page (a data: URI), always with its alt text.

Templates: `{email,slack,telegram}/digest.*.j2` and `web/digest.html.j2`; a configured template
directory overrides them by the same relative path, as for summaries.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from markupsafe import Markup

from inno_notify.adapters.channels import figures
from inno_notify.adapters.channels.base import InlineImage, MailMessage, RenderedMessage, TelegramMessage
from inno_notify.adapters.channels.cluster_digest_views import cluster_digest_view
from inno_notify.adapters.channels.digest_chart import budget_bar_svg, budget_bar_text, chart_alt_text
from inno_notify.adapters.channels.digest_figures import (
    NOT_MEASURED,
    hours,
    hours_columns,
    money,
    percent,
    trend_text,
)
from inno_notify.adapters.channels.markup import truncate_html
from inno_notify.adapters.channels.render import Templates, mattermost_message, slack_message, template_errors
from inno_notify.adapters.channels.webhook_views import webhook_message
from inno_notify.domain.adoption import AdoptionTally
from inno_notify.domain.budgets import BudgetReport, Period
from inno_notify.domain.cluster_digest import ClusterDigest
from inno_notify.domain.digest import NO_OWNER, Change, Digest, digest_to_dict
from inno_notify.domain.model import Channel
from inno_notify.domain.page_links import PageLinks

CHART_CID = "digest-chart@inno-notify"


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: str
    # "+4 h (+80 %)" against the previous week, or "" where there is nothing to compare.
    change: str = ""


@dataclass(frozen=True, slots=True)
class PersonView:
    owner: str
    jobs: str
    gpu_hours: str
    used_gpu_hours: str
    idle_gpu_hours: str
    efficiency: str


@dataclass(frozen=True, slots=True)
class WasteView:
    job_ref: str
    owner: str
    waste: str
    severity: str
    recommendation: str


@dataclass(frozen=True, slots=True)
class LiveIdleView:
    owner: str
    pods: str
    nudges: str
    idle_gpu_hours: str


@dataclass(frozen=True, slots=True)
class NudgedPodView:
    pod_ref: str
    kind: str
    owner: str
    nudges: str
    idle_gpu_hours: str


@dataclass(frozen=True, slots=True)
class AdoptionView:
    owner: str
    # "3 of 4 runs followed (1 ignored)"
    followed: str
    # "6 GPU-h, 40 GiB-h memory freed", or "" when nothing was freed
    freed: str


@dataclass(frozen=True, slots=True)
class ModelCostView:
    gpu_model: str
    gpu_hours: str
    cost: str
    idle_cost: str


@dataclass(frozen=True, slots=True)
class IdleCostView:
    owner: str
    idle_gpu_hours: str
    idle_cost: str


@dataclass(frozen=True, slots=True)
class BudgetView:
    # "December 2026, H100 GPUs (*H100*)"
    name: str
    # "620.00 EUR of 1,000.00 EUR (62 %); forecast 1,180.00 EUR (118 %) by 01 Jan"
    figures: str
    # "[████████████░░░░░░░┃]": the one-line bar of chat and plain text ("" where spend is unknown)
    bar: str
    # The page's bar (inline SVG, escaped where it is built: digest_chart.budget_bar_svg).
    svg: Markup
    over: bool


@dataclass(frozen=True, slots=True)
class DigestView:
    team: str
    week: str
    # "19 Oct – 25 Oct 2026 (Europe/Berlin)"
    period: str
    no_gpu_jobs: bool
    headline: str
    figures: tuple[Figure, ...]
    people: tuple[PersonView, ...]
    waste: tuple[WasteView, ...]
    notes: tuple[str, ...]
    chart_alt: str
    # Idle GPUs in running pods and workspaces, from the week's nudges (empty: nobody was nudged).
    live_total: str = ""
    live: tuple[LiveIdleView, ...] = ()
    nudged: tuple[NudgedPodView, ...] = ()
    # "Advice followed in 5 of 8 new runs (…); 12 GPU-h freed this week." ("": no run had advice)
    adoption: str = ""
    adoption_people: tuple[AdoptionView, ...] = ()
    # Costs where accounting.rates price GPU-hours ("" and empty otherwise).
    cost: str = ""
    by_model: tuple[ModelCostView, ...] = ()
    idle_cost_people: tuple[IdleCostView, ...] = ()
    # The team's budgets in their current period.
    budgets: tuple[BudgetView, ...] = ()


def change_text(c: Change, *, unit: str = "h", ratio: bool = False) -> str:
    """ "+4 h (+80 %)", "−3 pts" for a ratio, "" where the previous week is unknown."""
    if c.delta is None:
        return "" if c.previous is None else "no previous figure to compare"
    if ratio:
        return f"{_signed(round(100 * c.delta))} pts"
    text = f"{_signed(c.delta)} {unit}"
    if c.percent is not None:
        text += f" ({_signed(round(c.percent))} %)"
    return text


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '−'}{figures.number(abs(value))}"


def _others(t: AdoptionTally) -> str:
    parts = [
        f"{n} {what}"
        for n, what in ((t.partly, "partly"), (t.ignored, "ignored"), (t.over_corrected, "over-corrected"))
        if n
    ]
    return f" ({', '.join(parts)})" if parts else ""


def freed_text(t: AdoptionTally) -> str:
    """ "12 GPU-h and 40 GiB-h of memory freed", "" when nothing was freed."""
    if t.followed + t.partly == 0:
        return ""
    if t.gpu_hours_freed is None and t.memory_gib_hours_freed is None:
        return "freed " + figures.not_available("runtime unknown")
    parts = []
    if t.gpu_hours_freed:
        parts.append(f"{figures.number(t.gpu_hours_freed)} GPU-h")
    if t.memory_gib_hours_freed:
        parts.append(f"{figures.number(t.memory_gib_hours_freed)} GiB-h of memory")
    return f"{' and '.join(parts)} freed" if parts else ""


def adoption_text(t: AdoptionTally) -> str:
    """ "Advice followed in 5 of 8 new runs (2 ignored, 1 partly); 12 GPU-h freed this week." """
    if not t.advised:
        return ""
    freed = freed_text(t)
    return f"Advice followed in {t.followed} of {t.advised} new runs{_others(t)}" + (
        f"; {freed} this week." if freed else "."
    )


def _budget_amount(report: BudgetReport, value: float) -> str:
    if report.status.budget.unit == "gpu_hours":
        return f"{figures.number(value)} GPU-h"
    return money(value, report.status.currency)


def budget_view(report: BudgetReport) -> BudgetView:
    status, budget = report.status, report.status.budget
    period = f"{status.start:%B %Y}" if budget.period is Period.MONTH else f"week of {status.start:%d %b %Y}"
    name = period + (f", GPU models {budget.gpu_model}" if budget.gpu_model else "")
    allowance = _budget_amount(report, budget.allowance)
    if status.spent is None:
        text = f"spend not known (no rate for its GPU models) of {allowance}"
    else:
        text = f"{_budget_amount(report, status.spent)} of {allowance} ({percent(status.share)})"
    if status.forecast is None:
        text += "; no forecast yet (too early in the period)"
    else:
        share = percent(status.forecast / budget.allowance)
        text += f"; forecast {_budget_amount(report, status.forecast)} ({share}) by {status.end:%d %b}"
    label = f"Budget {name}: {text}"
    return BudgetView(
        name=name,
        figures=text,
        bar=budget_bar_text(status.spent, budget.allowance, status.forecast),
        svg=Markup(budget_bar_svg(status.spent, budget.allowance, status.forecast, label)),
        over=(status.share or 0.0) >= 1.0
        or (status.forecast is not None and status.forecast > budget.allowance),
    )


def _costs(d: Digest) -> dict[str, Any]:
    """The cost lines of the view; none where no rate prices GPU-hours."""
    if d.currency is None or d.no_gpu_jobs:
        return {}
    total = f"{money(d.cost, d.currency)} for {hours(d.gpu_hours, 'GPU-h')}"
    if d.idle_cost is not None:
        total += f", of which {money(d.idle_cost, d.currency)} idle"
    return {
        "cost": total,
        "by_model": tuple(
            ModelCostView(
                gpu_model=m.gpu_model,
                gpu_hours=hours(m.gpu_hours, "GPU-h"),
                cost=money(m.cost, d.currency),
                idle_cost=money(m.idle_cost, d.currency),
            )
            for m in d.by_model
        ),
        "idle_cost_people": tuple(
            IdleCostView(p.owner, hours(p.idle_gpu_hours, "GPU-h"), money(p.idle_cost, d.currency))
            for p in d.top_idle_cost
        ),
    }


def digest_view(digest: Digest) -> DigestView:
    d = digest
    last_day = d.days[-1]
    period = f"{d.days[0]:%d %b} – {last_day:%d %b %Y} ({d.timezone})"
    memory = (
        NOT_MEASURED
        if d.memory_requested_gib_hours is None
        else f"{figures.number(d.memory_requested_gib_hours)} requested / "
        f"{figures.number(d.memory_peak_gib_hours or 0.0)} peak GiB-h"
    )
    queue = (
        NOT_MEASURED
        if d.queue_p50_seconds is None
        else f"p50 {figures.duration(d.queue_p50_seconds)} · "
        f"p95 {figures.duration(d.queue_p95_seconds or 0.0)}"
    )
    quota = (
        figures.not_available("no Kueue quota known")
        if d.quota_gpus is None
        else percent(d.quota_share)
        + f" of {figures.number(d.quota_gpus)} GPUs × {figures.number(d.week_hours)} h"
    )
    rows = (
        Figure("GPU-hours held", hours(d.gpu_hours), change_text(d.change_gpu_hours)),
        Figure("GPU-hours used", hours(d.used_gpu_hours)),
        Figure("Idle GPU-hours", hours(d.idle_gpu_hours), change_text(d.change_idle_gpu_hours)),
        Figure(
            "Efficiency (used / held)", percent(d.efficiency), change_text(d.change_efficiency, ratio=True)
        ),
        Figure("Memory (requested / peak)", memory),
        Figure("Jobs", f"{d.jobs}: {d.succeeded} succeeded, {d.failed} failed, {d.oom} OOM-killed"),
        Figure("Queue wait", queue),
        Figure("Share of Kueue quota", quota),
        *((Figure(f"Trend ({len(d.trend)} weeks)", trend_text(d.trend)),) if len(d.trend) > 1 else ()),
    )
    if d.no_gpu_jobs:
        headline = f"No GPU jobs finished in {d.week}."
        if d.change_gpu_hours.previous is not None:
            headline += f" The week before: {hours(d.change_gpu_hours.previous)} held."
    else:
        headline = (
            f"{hours(d.gpu_hours)} of GPU held, {percent(d.efficiency)} used, "
            f"{hours(d.idle_gpu_hours)} idle, over {d.jobs} jobs."
        )
    notes = [f"{m.figure.replace('_', ' ')}: {m.reason}" for m in d.missing if m.figure != "quota_share"]
    if d.jobs_unmeasured:
        notes.insert(0, f"{d.jobs_unmeasured} of {d.jobs} jobs have no measured usage; sums leave them out.")
    return DigestView(
        team=d.team,
        week=d.week,
        period=period,
        no_gpu_jobs=d.no_gpu_jobs,
        headline=headline,
        figures=() if d.no_gpu_jobs else rows,
        people=tuple(PersonView(owner=p.owner, **hours_columns(p)) for p in d.people),
        waste=tuple(
            WasteView(
                job_ref=f"{w.namespace}/{w.name}",
                owner=w.owner,
                waste=hours(w.waste_gpu_hours, "GPU-h"),
                severity=w.severity,
                recommendation=w.recommendation,
            )
            for w in d.top_waste
        ),
        notes=tuple(notes),
        chart_alt=chart_alt_text(d),
        live_total="" if d.live_idle_gpu_hours is None else hours(d.live_idle_gpu_hours, "GPU-h"),
        live=tuple(
            LiveIdleView(
                owner=line.owner,
                pods=str(line.pods),
                nudges=str(line.nudges),
                idle_gpu_hours=hours(line.idle_gpu_hours, "GPU-h"),
            )
            for line in d.live_idle
        ),
        nudged=tuple(
            NudgedPodView(
                pod_ref=f"{n.namespace}/{n.pod}",
                kind=n.kind,
                owner=n.owner,
                nudges=str(n.nudges),
                idle_gpu_hours=hours(n.idle_gpu_hours, "GPU-h"),
            )
            for n in d.nudged_repeatedly
        ),
        adoption=adoption_text(d.adoption),
        adoption_people=tuple(
            AdoptionView(
                owner=p.owner or NO_OWNER,
                followed=f"{p.tally.followed} of {p.tally.advised} runs followed{_others(p.tally)}",
                freed=freed_text(p.tally),
            )
            for p in d.adoption_people
        ),
        **_costs(d),
        budgets=tuple(budget_view(r) for r in d.budgets),
    )


def render_json(digest: Digest) -> str:
    """`--format json` and the API's JSON body."""
    return orjson.dumps(digest_to_dict(digest), option=orjson.OPT_INDENT_2).decode()


_FILES: dict[Channel, tuple[str, ...]] = {
    Channel.TELEGRAM: ("telegram/digest.html.j2",),
    Channel.SLACK: ("slack/digest.mrkdwn.j2",),
    Channel.EMAIL: ("email/digest.subject.j2", "email/digest.txt.j2", "email/digest.html.j2"),
    Channel.WEBHOOK: ("email/digest.subject.j2", "email/digest.txt.j2"),
    Channel.MATTERMOST: ("mattermost/digest.md.j2",),
}
WEB_PAGE = "web/digest.html.j2"
# What a RenderError of the digest's templates starts with.
_TEMPLATE_ERROR = "digest template error"

# The admins' cluster digest (cluster_digest_views.FILES).
_CLUSTER_FILES = (
    "email/cluster_digest.subject.j2",
    "email/cluster_digest.txt.j2",
    "email/cluster_digest.html.j2",
)


class DigestRenderer:
    """Renders digests for every channel, the text for the terminal and the page for the API."""

    def __init__(
        self,
        template_dir: Path | None = None,
        dashboard_url: str | None = None,
        *,
        links: PageLinks | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        # The team page link (signed and expiring when `links` has a key); `dashboard_url` is the
        # older spelling of a plain base URL.
        self._links_for = links if links is not None else PageLinks(dashboard_url)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._templates = Templates(template_dir)
        with template_errors(_TEMPLATE_ERROR):
            for name in [*(n for names in _FILES.values() for n in names), WEB_PAGE, *_CLUSTER_FILES]:
                self._templates.get(name)

    def message(self, channel: Channel | str, digest: Digest, chart_png: bytes | None) -> RenderedMessage:
        """The digest for `channel`. E-mail carries the chart inline (CID); Slack gets it uploaded
        into the post's thread, with its alt text; Telegram gets text only."""
        channel = Channel(channel)
        view = digest_view(digest)
        images = (
            (
                InlineImage(
                    CHART_CID,
                    chart_png,
                    f"digest-{digest.team}-{digest.week}.png",
                    alt_text=chart_alt_text(digest),
                ),
            )
            if chart_png
            else ()
        )
        context = {
            "d": view,
            "chart_src": f"cid:{CHART_CID}" if chart_png else None,
            "page": False,
            **self._links(digest),
        }
        parts = self._render(_FILES[channel], context)
        if channel is Channel.TELEGRAM:
            return TelegramMessage(truncate_html(parts[0].strip()))
        if channel is Channel.SLACK:
            return replace(slack_message(parts[0]), images=images)
        if channel is Channel.MATTERMOST:
            return mattermost_message(parts[0])
        if channel is Channel.WEBHOOK:
            # The digest's own JSON (the API's), with its figures as numbers, not its view's text.
            return webhook_message(
                "digest", parts[0], parts[1], context, data={"digest": digest_to_dict(digest)}
            )
        subject, text, html = parts
        return MailMessage(
            subject=" ".join(subject.split()), text=text.strip() + "\n", html=html, images=images
        )

    def cluster_message(self, digest: ClusterDigest) -> MailMessage:
        """The admins' cluster digest, by e-mail (cluster_digest_views.py)."""
        subject, text, html = self._render(_CLUSTER_FILES, {"d": cluster_digest_view(digest)})
        return MailMessage(subject=" ".join(subject.split()), text=text.strip() + "\n", html=html)

    def text(self, digest: Digest) -> str:
        """Plain text, as `inno-notify digest` prints it (the e-mail's text part)."""
        context = {"d": digest_view(digest), "chart_src": None, "page": False, **self._links(digest)}
        return self._render(("email/digest.txt.j2",), context)[0].strip() + "\n"

    def html_page(self, digest: Digest, chart_png: bytes | None) -> str:
        """A standalone page (`--format html`, the API's text/html) with the chart as a data: URI."""
        src = None if chart_png is None else "data:image/png;base64," + base64.b64encode(chart_png).decode()
        # No link to itself: whoever reads the page is on it already, and a link minted now would
        # carry a fresh expiry, so a page opened with a link about to expire would hand out one
        # that lives a full `links.ttl_days` (CONTRACT §5: a page never outlives its link).
        context = {"d": digest_view(digest), "chart_src": src, "dashboard_url": None, "page": True}
        return self._render((WEB_PAGE,), context)[0]

    def _links(self, digest: Digest) -> dict[str, Any]:
        return {"dashboard_url": self._links_for.team(digest.team, digest.week, self._clock())}

    def _render(self, names: Sequence[str], context: dict[str, Any]) -> list[str]:
        with template_errors(_TEMPLATE_ERROR):
            return self._templates.render(names, context)
