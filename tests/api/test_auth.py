"""Authentication and roles: every /api/v1 path fails closed; the probes and metrics stay open."""

from __future__ import annotations

import pytest

from inno_notify.api.app import api_enabled, create_app
from inno_notify.api.auth import ApiConfigError, TokenTable, bearer_token
from inno_notify.settings import ApiSettings, ApiToken

from .support import ADMIN_TOKEN, SETTINGS, VIEWER_TOKEN, Api, sha256

# Every routed operation, with a path that exists in shape (the records need not).
OPERATIONS = [
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/jobs/face-research/train"),
    ("GET", "/api/v1/usage"),
    ("GET", "/api/v1/budgets"),
    ("GET", "/api/v1/trends"),
    ("GET", "/api/v1/adoption"),
    ("GET", "/api/v1/recommendations"),
    ("GET", "/api/v1/adoption"),
    ("GET", "/api/v1/notifications"),
    ("POST", "/api/v1/notifications/1/retry"),
    ("GET", "/api/v1/digests/face"),
    ("GET", "/api/v1/users"),
    ("GET", "/api/v1/users/alice@example.com"),
    ("PUT", "/api/v1/users/alice@example.com"),
    ("DELETE", "/api/v1/users/alice@example.com"),
    ("POST", "/api/v1/events"),
    # Not routed: an unauthenticated caller must not learn that either.
    ("GET", "/api/v1/nothing-here"),
    ("GET", "/"),
]
WRITES = [(m, p) for m, p in OPERATIONS if m != "GET"]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong-token",
        f"Basic {ADMIN_TOKEN}",
        f"Bearer {ADMIN_TOKEN}x",
        f"Bearer {ADMIN_TOKEN[:-1]}",
        f"Token {ADMIN_TOKEN}",
    ],
)
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
async def test_without_a_valid_token_every_api_path_is_401(
    api: Api, method: str, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    status, body, response_headers = await api.call(method, path, None, headers=headers, json={})
    assert status == 401
    assert body["error"]["code"] == "unauthorized"
    assert response_headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(("method", "path"), WRITES)
async def test_viewers_may_not_write(api: Api, method: str, path: str) -> None:
    status, body, _ = await api.call(method, path, "viewer", json={"channels": ["email"]})
    assert (status, body["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize(
    ("method", "path"),
    [op for op in OPERATIONS if op[0] == "GET" and "nothing" not in op[1] and op[1] != "/"],
)
async def test_viewers_may_read(api: Api, method: str, path: str) -> None:
    status, _, _ = await api.call(method, path, "viewer")
    assert status not in (401, 403)


async def test_scheme_is_case_insensitive(api: Api) -> None:
    status, _, _ = await api.call(
        "GET", "/api/v1/jobs", None, headers={"Authorization": f"bearer {VIEWER_TOKEN}"}
    )
    assert status == 200


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
async def test_probes_and_metrics_need_no_token(api: Api, path: str) -> None:
    status, _, _ = await api.call("GET", path, None)
    assert status == 200


async def test_unknown_path_with_a_token_is_404_and_wrong_method_405(api: Api) -> None:
    status, body, _ = await api.call("GET", "/api/v1/nothing-here")
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body, headers = await api.call("PATCH", "/api/v1/jobs")
    assert (status, body["error"]["code"]) == (405, "method_not_allowed")
    assert headers["Allow"] == "GET"


def test_no_tokens_refuses_to_build_the_app() -> None:
    with pytest.raises(ApiConfigError, match=r"api\.tokens is empty"):
        create_app(None, ApiSettings(listen="127.0.0.1:8080", tokens=()))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("listen", "enabled"), [("", False), ("127.0.0.1:8080", True), ("0.0.0.0:9000", True)]
)
def test_an_empty_listen_disables_the_api(listen: str, enabled: bool) -> None:
    assert api_enabled(ApiSettings(listen=listen, tokens=())) is enabled


def test_token_table_matches_whole_tokens_only() -> None:
    table = TokenTable(SETTINGS.tokens)
    admin = table.authenticate(ADMIN_TOKEN)
    viewer = table.authenticate(VIEWER_TOKEN)
    assert admin is not None and (admin.name, admin.role) == ("ops", "admin")
    assert viewer is not None and (viewer.name, viewer.role) == ("dashboards", "viewer")
    for wrong in ("", ADMIN_TOKEN[:-1], ADMIN_TOKEN + " ", sha256(ADMIN_TOKEN), ADMIN_TOKEN.upper()):
        assert table.authenticate(wrong) is None


def test_first_configured_token_wins_when_hashes_repeat() -> None:
    token = ApiToken(name="a", sha256=sha256("t"), role="viewer", teams=None, recipients=None)
    again = ApiToken(name="b", sha256=sha256("t").upper(), role="admin", teams=None, recipients=None)
    principal = TokenTable([token, again]).authenticate("t")
    assert principal is not None and principal.name == "a"


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("  bearer   abc  ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
    ],
)
def test_bearer_token_parsing(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
