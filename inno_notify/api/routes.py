"""Every endpoint in one table: method, path, view, inputs, answers, and who may call it.

The router (`add_routes`), the probe app, the token check and the OpenAPI document (openapi.py)
all read `ENDPOINTS`, so an endpoint is one view plus one row here. A view takes the request and
its inputs, the dataclass named in its row (params.py reads it from the request, with the API's
400s); mypy holds the two to the same type.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler

from inno_notify.api import resources
from inno_notify.api.auth import READERS, Role, default_roles
from inno_notify.api.errors import Error
from inno_notify.api.params import Inputs, Nothing
from inno_notify.api.views import (
    adoption,
    budgets,
    digests,
    docs,
    events,
    health,
    jobs,
    me,
    notifications,
    pages,
    recommendations,
    trends,
    unsubscribe,
    usage,
    users,
)
from inno_notify.domain.page_links import (
    JOB_PAGE,
    ME_PAGE,
    ME_PATH,
    TEAM_PAGE,
    UNSUBSCRIBE_PAGE,
    UNSUBSCRIBE_PATH,
    WORKFLOW_PAGE,
)

BASE = "/api/v1"

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Reply:
    """One documented answer: what it means, the resource its JSON body is, and other formats."""

    description: str
    resource: Any = None  # a class of resources.py (or any type pydantic describes); None: no JSON
    media: tuple[str, ...] = ()  # other media types, answered as text (CSV, HTML, Prometheus)


@dataclass(frozen=True, slots=True)
class Endpoint(Generic[P]):
    method: str
    path: str
    view: Callable[[web.Request, P], Awaitable[web.StreamResponse]]
    inputs: type[P]
    replies: Mapping[int, Reply]
    summary: str
    tag: str
    open: bool = False  # no token needed (probes and metrics, scraped by Kubernetes and Prometheus)
    roles: frozenset[Role] | None = None  # None: every role reads, only admin writes (auth.default_roles)
    # A page that a signed link in a message opens without a token: the kind of page its links are
    # signed as (domain.page_links), over the values SIGNED_VALUES names.
    signed: str | None = None

    @property
    def allowed(self) -> frozenset[Role]:
        return self.roles if self.roles is not None else default_roles(self.method)


def _json(resource: Any, description: str) -> dict[int, Reply]:
    return {200: Reply(description, resource)}


PROBES = (
    Endpoint(
        "GET",
        "/healthz",
        health.healthz,
        Nothing,
        _json(resources.Health, "Alive."),
        "Liveness",
        "operations",
        open=True,
    ),
    Endpoint(
        "GET",
        "/readyz",
        health.readyz,
        Nothing,
        {
            200: Reply("Ready.", resources.Readiness),
            503: Reply("Not ready; checks says what is not.", resources.Readiness),
        },
        "Readiness: database reachable, watchers synced, dispatcher alive",
        "operations",
        open=True,
    ),
    Endpoint(
        "GET",
        "/metrics",
        health.metrics,
        Nothing,
        {200: Reply("Prometheus text exposition.", media=("text/plain",))},
        "The service's own Prometheus metrics",
        "operations",
        open=True,
    ),
)


def _page(description: str) -> Reply:
    """A page's answer: HTML, for a person in a browser."""
    return Reply(description, media=("text/html",))


def _page_error(description: str) -> Reply:
    """A page's error: the Error resource, shown as a page (auth.HTML_ERRORS) to a browser."""
    return Reply(description, Error, media=("text/html",))


# The pages the links in messages open (outside /api/v1, HTML): a signed link or a reader's token.
# Not a pipeline token: it sits in CI systems and DAG definitions, the likeliest to leak, and it
# reads nothing else either (CONTRACT §5).
PAGE_ROLES: frozenset[Role] = READERS
_PAGE_REPLIES = {
    400: _page_error("A parameter that is not one (invalid_parameter); a page."),
    401: _page_error(
        "Neither a valid signed link (link_expired, invalid_link) nor a token (unauthorized); a page."
    ),
    403: _page_error("forbidden: a pipeline token (pages are for viewers and admins); a page."),
    404: _page_error(
        "No such job, workflow or team (job_not_found, workflow_not_found, team_not_found); a page."
    ),
}
PAGES = (
    Endpoint(
        "GET",
        "/jobs/{namespace}/{name}",
        pages.job_page,
        pages.JobPageRequest,
        {
            200: _page(
                "The job's page (figures, chart, advice with its evidence, Kueue, logs), for the signed "
                "link a message carried (exp, sig) or a viewer or admin token."
            ),
            **_PAGE_REPLIES,
        },
        "A job run's page",
        "pages",
        roles=PAGE_ROLES,
        signed=JOB_PAGE,
    ),
    Endpoint(
        "GET",
        "/workflows/{namespace}/{name}",
        pages.workflow_page,
        pages.JobPageRequest,
        {
            200: _page(
                "The workflow's page (an Argo Workflow or an Airflow DAG run: its steps with their phase, "
                "duration, GPUs and GPU-minutes, the advice its GPU steps got), for the signed link its "
                "summary carried (exp, sig) or a viewer or admin token."
            ),
            **_PAGE_REPLIES,
        },
        "A workflow run's page",
        "pages",
        roles=PAGE_ROLES,
        signed=WORKFLOW_PAGE,
    ),
    Endpoint(
        "GET",
        "/teams/{team}",
        pages.team_page,
        pages.TeamPageRequest,
        {
            200: _page(
                "The team's weekly digest page, for the signed link a digest carried or a viewer or admin "
                "token."
            ),
            **_PAGE_REPLIES,
        },
        "A team's digest page",
        "pages",
        roles=PAGE_ROLES,
        signed=TEAM_PAGE,
    ),
)
# The one-click unsubscribe every e-mail's List-Unsubscribe names (RFC 8058, views/unsubscribe.py):
# its signed link alone authorises it; of the tokens, only an admin's acts for someone.
UNSUBSCRIBE_ROLES: frozenset[Role] = frozenset({"admin"})
# A page's form posted with a body over params' bound (the unsubscribe's and the personal page's).
_FORM_TOO_LARGE = _page_error("payload_too_large: a body over 64 KiB.")
_UNSUBSCRIBE_REPLIES = {
    401: _PAGE_REPLIES[401],
    403: _page_error("forbidden: a token other than an admin's; a page."),
}
UNSUBSCRIBE = (
    Endpoint(
        "GET",
        UNSUBSCRIBE_PATH,
        unsubscribe.unsubscribe_page,
        unsubscribe.UnsubscribeLink,
        {
            200: _page(
                "A page whose button posts List-Unsubscribe=One-Click to the same link; it changes "
                "nothing itself (link scanners fetch every link of a message)."
            ),
            400: _PAGE_REPLIES[400],
            **_UNSUBSCRIBE_REPLIES,
        },
        "The page of an e-mail's unsubscribe link",
        "pages",
        roles=UNSUBSCRIBE_ROLES,
        signed=UNSUBSCRIBE_PAGE,
    ),
    Endpoint(
        "POST",
        UNSUBSCRIBE_PATH,
        unsubscribe.unsubscribe,
        unsubscribe.OneClickPost,
        {
            200: _page(
                "E-mail is off for the address, in the directory or not (posting again changes "
                "nothing); other channels are unchanged; a page."
            ),
            400: _page_error(
                "invalid_parameter, or invalid_body: not the form List-Unsubscribe=One-Click "
                "(application/x-www-form-urlencoded or multipart/form-data)."
            ),
            **_UNSUBSCRIBE_REPLIES,
            413: _FORM_TOO_LARGE,
        },
        "One-click unsubscribe from e-mail (RFC 8058)",
        "pages",
        roles=UNSUBSCRIBE_ROLES,
        signed=UNSUBSCRIBE_PAGE,
    ),
)
# The personal page (views/me.py): the signed link a message carried, or a reader's token to look
# (read-only: a browser's form sends no token). Its forms post with the link and a CSRF token; of
# the tokens, only an admin's posts for someone (recorded as the API's), as with the unsubscribe.
ME_POST_ROLES: frozenset[Role] = frozenset({"admin"})
ME = (
    Endpoint(
        "GET",
        ME_PATH,
        me.me_page,
        me.MeLink,
        {
            200: _page(
                "The person's page: their runs of the last 30 days with GPU-hours and advice, the nudges "
                "about workloads that still run, their preferences and (for the signed link) the forms "
                "that change them; it changes nothing."
            ),
            **_PAGE_REPLIES,
        },
        "A person's own page",
        "pages",
        roles=PAGE_ROLES,
        signed=ME_PAGE,
    ),
    Endpoint(
        "POST",
        ME_PATH,
        me.change,
        me.MePost,
        {
            200: _page("The page again, the change made (origin page) and said."),
            400: _page_error("invalid_parameter, or invalid_body: not one of the page's forms."),
            401: _PAGE_REPLIES[401],
            403: _page_error(
                "invalid_csrf: the form's token is missing or not this link's; forbidden: a token other "
                "than an admin's. Nothing changed."
            ),
            413: _FORM_TOO_LARGE,
        },
        "Change one of one's own preferences from the personal page",
        "pages",
        roles=ME_POST_ROLES,
        signed=ME_PAGE,
    ),
)
ENDPOINTS = (
    *PROBES,
    Endpoint(
        "GET",
        f"{BASE}/openapi.json",
        docs.openapi_document,
        Nothing,
        _json(dict[str, Any], "The OpenAPI 3.1 document."),
        "This document",
        "operations",
    ),
    Endpoint(
        "GET",
        f"{BASE}/jobs",
        jobs.list_jobs,
        jobs.JobFilters,
        _json(resources.JobPage, "A page of jobs."),
        "Jobs, newest finish (else creation) first",
        "jobs",
    ),
    Endpoint(
        "GET",
        f"{BASE}/jobs/{{namespace}}/{{name}}",
        jobs.get_job,
        jobs.JobName,
        _json(resources.Job, "The job."),
        "The newest job of that name, or the one with ?uid=",
        "jobs",
    ),
    Endpoint(
        "GET",
        f"{BASE}/usage",
        usage.usage,
        usage.UsageWindow,
        {
            200: Reply(
                "Per group, most GPU-minutes first (Accept: text/csv for CSV).",
                resources.UsageReport,
                media=("text/csv",),
            )
        },
        "GPU-minutes, used and idle GPU-minutes, memory requested vs peak, per group",
        "usage",
    ),
    Endpoint(
        "GET",
        f"{BASE}/budgets",
        budgets.budgets,
        budgets.BudgetQuery,
        {
            200: Reply(
                "Every configured budget of the filter (Accept: text/csv for CSV, a row per GPU model).",
                resources.BudgetList,
                media=("text/csv",),
            )
        },
        "Spend so far, forecast to the period's end and budget, by GPU model",
        "usage",
    ),
    Endpoint(
        "GET",
        f"{BASE}/trends",
        trends.trends,
        trends.TrendQuery,
        {
            200: Reply(
                "One series per group, every week present (Accept: text/csv for CSV).",
                resources.TrendReport,
                media=("text/csv",),
            )
        },
        "Weekly GPU-hours held, used and idle, efficiency and quota share, per team or cluster",
        "usage",
    ),
    Endpoint(
        "GET",
        f"{BASE}/recommendations",
        recommendations.list_recommendations,
        recommendations.RecommendationFilters,
        _json(resources.RecommendationPage, "A page of recommendations."),
        "Open recommendations (no newer run of the family yet), largest waste first",
        "usage",
    ),
    Endpoint(
        "GET",
        f"{BASE}/adoption",
        adoption.adoption,
        adoption.AdoptionWindow,
        {
            200: Reply(
                "Per team and owner, and in total (Accept: text/csv for CSV, one row per team and owner).",
                resources.AdoptionReport,
                media=("text/csv",),
            )
        },
        "Whether new runs of job families followed their previous run's advice, and what it freed",
        "usage",
    ),
    Endpoint(
        "GET",
        f"{BASE}/notifications",
        notifications.list_notifications,
        notifications.LogFilters,
        _json(resources.NotificationPage, "A page of notifications."),
        "The delivery log, newest first",
        "notifications",
    ),
    Endpoint(
        "POST",
        f"{BASE}/notifications/{{id}}/retry",
        notifications.retry_notification,
        notifications.NotificationId,
        _json(resources.Notification, "The notification, pending again."),
        "Re-queue a failed notification (admin); 409 unless it failed",
        "notifications",
    ),
    Endpoint(
        "GET",
        f"{BASE}/digests/{{team}}",
        digests.get_digest,
        digests.TeamWeek,
        {200: Reply("The digest.", resources.Digest, media=("text/html",))},
        "A team's weekly digest (Accept: text/html for the page a lead reads)",
        "digests",
    ),
    Endpoint(
        "GET",
        f"{BASE}/users",
        users.list_users,
        users.UserPageRequest,
        _json(resources.UserPage, "A page of users."),
        "The directory, by e-mail",
        "directory",
    ),
    Endpoint(
        "GET",
        f"{BASE}/users/{{email}}",
        users.get_user,
        users.UserAddress,
        _json(resources.User, "The user."),
        "One user",
        "directory",
    ),
    Endpoint(
        "PUT",
        f"{BASE}/users/{{email}}",
        users.put_user,
        users.UserWrite,
        {200: Reply("The user.", resources.User), 201: Reply("The user, created.", resources.User)},
        "Create (201) or replace (200) a user (admin)",
        "directory",
    ),
    Endpoint(
        "DELETE",
        f"{BASE}/users/{{email}}",
        users.delete_user,
        users.UserAddress,
        {204: Reply("Removed.")},
        "Remove a user (admin)",
        "directory",
    ),
    Endpoint(
        "POST",
        f"{BASE}/events",
        events.post_event,
        events.EventPost,
        {
            202: Reply(
                "Routed and queued; for a key posted before, nothing new (duplicate: true).",
                resources.EventReceipt,
            ),
            400: Reply(
                "invalid_body: not exactly one of to and team, a value outside its rule, more than one "
                "address in to, a link URL without a host.",
                Error,
            ),
            403: Reply(
                "forbidden: a role other than admin and pipeline; out_of_scope: a team or address "
                "outside the pipeline token's scope (api.tokens[].teams, recipients).",
                Error,
            ),
            409: Reply(
                "key_reused: this token posted the key before with another message; nothing sent.", Error
            ),
            413: Reply("payload_too_large: a body over 64 KiB.", Error),
            422: Reply(
                "no_recipients: nobody can receive it (unknown team, an address outside "
                "allowed_email_domains or unsubscribed from e-mail, no channel configured); nothing "
                "was recorded.",
                Error,
            ),
            429: Reply(
                "rate_limited: past api.events.per_token_per_minute for this token or "
                "per_recipient_per_hour for a recipient (counted over all replicas); nothing was "
                "queued; Retry-After says when to try again.",
                Error,
            ),
        },
        "Post pipeline events",  # also the pipeline role's 403 message (only_named)
        "pipelines",
        roles=frozenset({"admin", "pipeline"}),
    ),
    *PAGES,
    *UNSUBSCRIBE,
    *ME,
)


# Page kind -> the parameters (path first, then query) its links are signed over, in order.
SIGNED_VALUES: dict[str, tuple[str, ...]] = {
    JOB_PAGE: ("namespace", "name", "uid"),
    WORKFLOW_PAGE: ("namespace", "name", "uid"),
    TEAM_PAGE: ("team", "week"),
    UNSUBSCRIBE_PAGE: ("email",),
    ME_PAGE: ("email",),
}


def signed_subject(
    endpoints: tuple[Endpoint[Any], ...] = ENDPOINTS,
) -> Callable[[web.Request], tuple[str, list[str]] | None]:
    """For auth.SignedPages: the kind of page a request is and the values its link is signed over
    (as the request spells them), or None for a request that is no signed page."""
    table = {(e.method, e.path): e.signed for e in endpoints if e.signed}

    def subject(request: web.Request) -> tuple[str, list[str]] | None:
        resource = request.match_info.route.resource
        kind = None if resource is None else table.get((request.method, resource.canonical))
        if kind is None:
            return None
        values = [request.match_info.get(name, request.query.get(name, "")) for name in SIGNED_VALUES[kind]]
        return kind, values

    return subject


def handler(endpoint: Endpoint[P]) -> Handler:
    """The aiohttp handler of `endpoint`: reads its inputs, then calls its view."""
    inputs = Inputs(endpoint.inputs, endpoint.path)
    view = endpoint.view

    async def handle(request: web.Request) -> web.StreamResponse:
        return await view(request, inputs.read(request))

    async def handle_with_body(request: web.Request) -> web.StreamResponse:
        return await view(request, await inputs.read_with_body(request))

    return handle if inputs.body is None else handle_with_body


def add_routes(app: web.Application, endpoints: tuple[Endpoint[Any], ...] = ENDPOINTS) -> None:
    # HEAD is not documented, so it is not routed either (405, like any undocumented method).
    for endpoint in endpoints:
        app.router.add_route(endpoint.method, endpoint.path, handler(endpoint))


def open_paths(endpoints: tuple[Endpoint[Any], ...] = ENDPOINTS) -> frozenset[str]:
    return frozenset(e.path for e in endpoints if e.open)


def roles_of(endpoints: tuple[Endpoint[Any], ...] = ENDPOINTS) -> Callable[[web.Request], frozenset[Role]]:
    """Who may call what a request matched; the method's default where it matched no endpoint."""
    table = {(e.method, e.path): e.allowed for e in endpoints}

    def roles(request: web.Request) -> frozenset[Role]:
        resource = request.match_info.route.resource
        found = None if resource is None else table.get((request.method, resource.canonical))
        return found if found is not None else default_roles(request.method)

    return roles


def only_named(endpoints: tuple[Endpoint[Any], ...] = ENDPOINTS) -> dict[Role, str]:
    """What each role outside auth.READERS may call (the rows that name it), for its 403s: such a
    role is refused everywhere else, so the message says where it is allowed instead."""
    named: dict[Role, list[str]] = {}
    for endpoint in endpoints:
        for role in sorted(endpoint.roles or ()):
            if role not in READERS:
                what = endpoint.summary[:1].lower() + endpoint.summary[1:]
                named.setdefault(role, []).append(f"{what} ({endpoint.method} {endpoint.path})")
    return {role: "; ".join(calls) for role, calls in named.items()}
