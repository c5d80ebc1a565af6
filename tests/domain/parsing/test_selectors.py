"""Label selectors in kubectl's grammar: what matches, and what is refused."""

from __future__ import annotations

import pytest

from inno_notify.domain.parsing import SelectorError, parse_selector, parse_selectors

CODER = {"com.coder.workspace.id": "7c1d", "app.kubernetes.io/name": "coder-workspace"}
JHUB = {
    "component": "singleuser-server",
    "hub.jupyter.org/username": "alice",
    "hub.jupyter.org/servername": "",
}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("com.coder.workspace.id", CODER, True),
        ("com.coder.workspace.id", JHUB, False),
        ("!com.coder.workspace.id", JHUB, True),
        ("component=singleuser-server,hub.jupyter.org/username", JHUB, True),
        ("component==singleuser-server", JHUB, True),
        ("component=singleuser-server", {"component": "hub"}, False),
        ("component!=hub", JHUB, True),
        ("component!=hub", {}, True),
        ("component in (singleuser-server, notebook)", JHUB, True),
        ("component in (hub,proxy)", JHUB, False),
        ("component notin (hub,proxy)", {}, True),
        ("hub.jupyter.org/servername=", JHUB, True),
        ("hub.jupyter.org/servername=gpu", JHUB, False),
        ("a, b", {"a": "1"}, False),
        # A label value that is not a string (a hand-written object) is no label.
        ("a", {"a": 1}, False),
    ],
)
def test_matches(selector: str, labels: dict[str, object], matches: bool) -> None:
    assert parse_selector(selector).matches(labels) is matches


@pytest.mark.parametrize(
    "selector",
    ["", "   ", "a=b=c", "a in (b", "a in b)", "=b", "a in ((b))", "a b", "a=b c", "a in (b;c)", "-a"],
)
def test_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(selector)


def test_the_configured_defaults_parse() -> None:
    from inno_notify.settings import DEFAULT_WORKSPACE_SELECTORS

    assert len(parse_selectors(DEFAULT_WORKSPACE_SELECTORS)) == 2
