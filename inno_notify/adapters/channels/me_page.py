"""The personal page (GET /me): a person's runs, open nudges and preferences, with forms, as HTML.

The data is the store's (domain.personal_page.PersonalPage); this module makes strings of it for
`web/me.html.j2`, which shares the other pages' look (`web/_page_style.html.j2`) and escapes every
value itself (autoescape); a configured template directory may override it. Each run links to its
own page (domain.page_links) signed to expire with the link the page was opened with, never later
(PageLinks.until); the nudges are shown as the nudge messages show them (nudge_views).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from inno_notify.adapters.channels import figures
from inno_notify.adapters.channels.nudge_views import NudgeView
from inno_notify.adapters.channels.render import Templates, template_errors
from inno_notify.domain.adoption import Outcome
from inno_notify.domain.model import DirectoryUser, JobStatus, NotifyMode, WorkloadKind
from inno_notify.domain.page_links import PageLinks
from inno_notify.domain.personal_page import (
    MUTE_CHOICES,
    PAGE_CHANNELS,
    PERSONAL_DAYS,
    PageOpening,
    PersonalPage,
    PersonalRun,
)
from inno_notify.domain.preferences import Preferences, apply_preferences

ME_PAGE = "web/me.html.j2"

_ADOPTION_TEXT = {
    Outcome.FOLLOWED.value: "followed",
    Outcome.PARTLY.value: "partly followed",
    Outcome.IGNORED.value: "not followed",
    Outcome.OVER_CORRECTED.value: "over-corrected",
    Outcome.NO_PRIOR_ADVICE.value: "",
    Outcome.UNKNOWN.value: "",
}
_NOTIFY_TEXT = {NotifyMode.FAILURE: "failed runs only"}
_VIA_TEXT = {"telegram": "Telegram", "api": "an admin (API)", "email": "e-mail link", "page": "this page"}


@dataclass(frozen=True, slots=True)
class RunRow:
    name: str
    url: str | None
    kind: str
    status: str
    failed: bool
    running: bool
    when: str
    gpu_hours: str
    advice: tuple[str, ...]
    adoption: str


@dataclass(frozen=True, slots=True)
class Setting:
    label: str
    value: str
    origin: str


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    label: str
    current: bool = False


@dataclass(frozen=True, slots=True)
class MePageView:
    email: str
    name: str
    days: int
    runs: tuple[RunRow, ...]
    more_runs: bool
    totals: str
    nudges: tuple[NudgeView, ...]
    settings: tuple[Setting, ...]
    # The forms (None when the page was opened read-only: a viewer's token).
    action: str | None
    csrf: str | None
    notice: str | None
    notify: tuple[Choice, ...]
    mutes: tuple[Choice, ...]
    muted: bool
    nudges_on: bool
    emails_on: bool
    channels: tuple[Choice, ...]
    generated: str


def _time(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _hours(minutes: float | None) -> str:
    return "–" if minutes is None else figures.number(minutes / 60)


def _run_row(run: PersonalRun, links: PageLinks, now: datetime) -> RunRow:
    if run.kind == WorkloadKind.WORKFLOW.value:
        url = links.workflow(run.namespace, run.name, run.uid, now)
    else:
        url = links.job(run.namespace, run.name, run.uid, now)
    held = run.gpu_minutes_held
    if held is None and run.gpus <= 0:
        gpu = "no GPU"
    elif held is None:
        gpu = "not measured yet" if run.status == JobStatus.RUNNING.value else "not measured"
    else:
        gpu = f"{_hours(run.gpu_minutes_used)} / {_hours(held)} h"
    adoption = _ADOPTION_TEXT.get(run.adoption or "", "")
    if adoption and run.gpu_hours_freed:
        adoption += f" (freed {figures.number(run.gpu_hours_freed)} GPU-h)"
    status = run.status + (f" ({run.reason})" if run.reason and run.status == JobStatus.FAILED.value else "")
    return RunRow(
        name=f"{run.namespace}/{run.name}",
        url=url,
        kind=run.kind,
        status=status,
        failed=run.status == JobStatus.FAILED.value,
        running=run.finished_at is None,
        when=_time(run.finished_at or run.created_at),
        gpu_hours=gpu,
        advice=run.advice,
        adoption=adoption,
    )


def _origin(prefs: Preferences | None, name: str) -> str:
    if prefs is None or name not in prefs.origins:
        return "directory"
    origin = prefs.origins[name]
    return f"{_VIA_TEXT.get(origin.via.value, origin.via.value)}, {_time(origin.at)}"


def me_page_view(page: PersonalPage, opening: PageOpening, links: PageLinks, days: int) -> MePageView:
    prefs, user, now = page.preferences, page.user, page.now
    run_links = links.until(opening.expires)
    # Outside the directory a person is reached by e-mail alone (domain.routing); their own
    # preferences lie over either, as routing lays them.
    effective = apply_preferences(user or DirectoryUser(page.email), prefs)
    notify, channels, nudges_on = effective.notify, effective.channels, effective.nudges
    emails_on = not (prefs is not None and prefs.email_off)
    muted = prefs is not None and prefs.muted_at(now)
    mute_text = "no"
    if muted and prefs is not None and prefs.muted_until is not None:
        scope = ", ".join(prefs.muted_channels) if prefs.muted_channels is not None else "every channel"
        mute_text = f"until {_time(prefs.muted_until)} ({scope})"
    held = sum(r.gpu_minutes_held or 0.0 for r in page.runs)
    used = sum(r.gpu_minutes_used or 0.0 for r in page.runs)
    failed = sum(r.status == JobStatus.FAILED.value for r in page.runs)
    return MePageView(
        email=page.email,
        name=(user.name if user is not None and user.name else page.email),
        days=days,
        runs=tuple(_run_row(r, run_links, now) for r in page.runs),
        more_runs=page.more_runs,
        totals=(
            f"{len(page.runs)}{'+' if page.more_runs else ''} runs, {failed} failed; "
            f"GPU-hours used / held: {_hours(used)} / {_hours(held)}"
        ),
        nudges=tuple(NudgeView.from_finding(f) for f in page.nudges),
        settings=(
            Setting(
                "Messages",
                "failed runs only" if notify is NotifyMode.FAILURE else "every run",
                _origin(prefs, "notify"),
            ),
            Setting("Channels", ", ".join(channels) or "none", _origin(prefs, "channels")),
            Setting("Muted", mute_text, _origin(prefs, "muted_until") if muted else ""),
            Setting("Idle-GPU nudges", "on" if nudges_on else "off", _origin(prefs, "nudges")),
            Setting("E-mail", "on" if emails_on else "off (unsubscribed)", _origin(prefs, "emails")),
        ),
        action=opening.action,
        csrf=opening.csrf,
        notice=opening.notice,
        notify=(
            Choice(NotifyMode.ALWAYS.value, "Every run", notify is not NotifyMode.FAILURE),
            Choice(NotifyMode.FAILURE.value, "Failed runs only", notify is NotifyMode.FAILURE),
        ),
        mutes=tuple(Choice(key, key) for key in MUTE_CHOICES),
        muted=muted,
        nudges_on=nudges_on,
        emails_on=emails_on,
        channels=tuple(Choice(c, c, c in channels) for c in PAGE_CHANNELS),
        generated=_time(now),
    )


class PersonalPageRenderer:
    """Renders the personal page; build one at startup and share it (it compiles its template once)."""

    def __init__(
        self,
        links: PageLinks,
        template_dir: Path | None = None,
        *,
        days: int = PERSONAL_DAYS,
    ) -> None:
        self._links = links
        self._days = days
        with template_errors(ME_PAGE):
            self._template = Templates(template_dir).get(ME_PAGE)

    def html(self, page: PersonalPage, opening: PageOpening) -> str:
        view = me_page_view(page, opening, self._links, self._days)
        with template_errors(ME_PAGE):
            return self._template.render(page=view)
