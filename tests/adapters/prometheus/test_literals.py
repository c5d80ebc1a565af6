"""Label values in PromQL: a matcher built from any string matches exactly that string.

`regex_alternation` once escaped `"` for RE2 but not for the PromQL string literal, so a name with
a quote or a backslash ended the literal early (a broken query, or a different one); names are
DNS labels today, but nothing may rely on it. The table pins the literal; the server test asks a
real Prometheus (skipped without the binaries) which series such a matcher selects.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill

HOSTILE = [
    'a"b\\c',  # quote and backslash
    'a"b',
    "b\\c",
    "a\\\\b",  # two backslashes
    'end\\"',  # a backslash before the quote
    "a.b",  # RE2 metacharacters
    "a|b",
    "(x)+[y]*{2}^$?",
    "new\nline",
    "tab\there",
    "nul\x00byte",
    "del\x7f",
    "grüße-日本",  # non-ASCII, as UTF-8
    "",
]


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("plain-name-1", "plain-name-1"),
        ('a"b', 'a\\"b'),
        ("b\\c", "b\\\\c"),
        ("new\nline", "new\\x0aline"),
        ("nul\x00", "nul\\x00"),
        ("del\x7f", "del\\x7f"),
        ("grüße", "grüße"),
    ],
)
def test_promql_string_escapes_what_ends_or_breaks_a_literal(value: str, literal: str) -> None:
    assert q.promql_string(value) == literal
    assert ast.literal_eval(f'"{literal}"') == value  # Go's and Python's escapes agree on these


@pytest.mark.parametrize(
    ("values", "literal"),
    [
        (["train-1", "train-2"], "train-1|train-2"),
        (["web.v1"], "web\\\\.v1"),
        (['a"b\\c'], 'a\\"b\\\\\\\\c'),
        (["x|y", "z"], "x\\\\|y|z"),
        (["new\nline"], "new\\x0aline"),
    ],
)
def test_regex_alternation_is_quoted_for_re2_then_for_the_literal(values: list[str], literal: str) -> None:
    assert q.regex_alternation(values) == literal


@pytest.mark.parametrize("value", HOSTILE)
def test_the_alternation_matches_exactly_its_values(value: str) -> None:
    # Unquote the literal as PromQL would, then anchor the pattern as PromQL does.
    pattern = ast.literal_eval('"' + q.regex_alternation([value]) + '"')
    others = [v for v in HOSTILE if v != value]
    assert re.fullmatch(pattern, value, re.DOTALL)
    assert not any(re.fullmatch(pattern, other, re.DOTALL) for other in others)


def test_a_value_that_is_not_unicode_matches_nothing() -> None:
    pattern = q.regex_alternation(["bad\ud800"])
    assert pattern == q.promql_string(q.re2_quote("bad\ud800"))
    assert "\ud800" not in pattern
    pattern.encode()  # sendable


def _openmetrics_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# Prometheus keeps label values that are valid UTF-8; the exposition format cannot carry NUL.
ON_SERVER = [v for v in HOSTILE if v and "\x00" not in v]
T = 1_800_000_000


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    tmp: Path = tmp_path_factory.mktemp("prom-literals")
    lines = ["# TYPE probe gauge"]
    for n, pod in enumerate(ON_SERVER):
        lines.append(f'probe{{namespace="ns",pod="{_openmetrics_value(pod)}"}} {n} {T}')
    lines.append("# EOF")
    (tmp / "data.om").write_text("\n".join(lines) + "\n", encoding="utf-8")
    backfill(tmp / "data.om", tmp / "tsdb")
    with PrometheusServer(tmp / "tsdb") as server:
        yield server


@pytest.mark.prometheus
@pytest.mark.parametrize("pod", ON_SERVER)
async def test_a_real_prometheus_selects_exactly_the_pod_named(
    prometheus: PrometheusServer, pod: str
) -> None:
    client = PrometheusClient(ClientConfig(url=prometheus.url, timeout_seconds=30))
    try:
        exact = await client.query(f'probe{{pod=~"{q.regex_alternation([pod])}"}} @ {T}')
        equal = await client.query(f'probe{{pod="{q.promql_string(pod)}"}} @ {T}')
    finally:
        client.close()
    assert [s["metric"]["pod"] for s in exact] == [pod]
    assert [s["metric"]["pod"] for s in equal] == [pod]
