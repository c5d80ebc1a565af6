"""Buckets by end time and URL-length chunks: pure planning, no server needed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import (
    PodWindow,
    chunk_groups,
    chunk_pods,
    plan_buckets,
    url_length,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def pod(name: str, start_min: float, end_min: float, ns: str = "ns", uid: str | None = None) -> PodWindow:
    return PodWindow(
        ns,
        name,
        uid or f"uid-{name}-{end_min}",
        T0 + timedelta(minutes=start_min),
        T0 + timedelta(minutes=end_min),
    )


@pytest.mark.parametrize(
    ("case", "pods", "gap_minutes", "expected_groups"),
    [
        (
            "one_round_one_bucket",
            [pod("a", 0, 60), pod("b", -600, 61), pod("c", 30, 62)],
            60,
            [["a", "b", "c"]],
        ),
        ("long_gap_splits", [pod("a", 0, 60), pod("b", 0, 300)], 60, [["a"], ["b"]]),
        # A reused name in one range would mix two pods' series: the second one gets its own bucket.
        ("reused_name_splits", [pod("a", 0, 10), pod("a", 20, 30)], 60, [["a"], ["a"]]),
        ("same_name_other_namespace", [pod("a", 0, 10), pod("a", 0, 11, ns="other")], 60, [["a", "a"]]),
    ],
)
def test_buckets(
    case: str, pods: list[PodWindow], gap_minutes: float, expected_groups: list[list[str]]
) -> None:
    buckets = plan_buckets(pods, scrape_seconds=15, gap_seconds=gap_minutes * 60)
    assert [[p.pod for p in b.pods] for b in buckets] == expected_groups


def test_bucket_window_covers_every_lifetime_plus_a_scrape() -> None:
    pods = [pod("a", 0, 60), pod("b", -600, 61)]
    (bucket,) = plan_buckets(pods, scrape_seconds=15, gap_seconds=3600)
    end = (T0 + timedelta(minutes=61)).timestamp()
    assert bucket.window.at == end + 15
    assert bucket.window.range_seconds == 61 * 60 + 600 * 60 + 30
    assert bucket.window.step_seconds == 15


def test_chunks_keep_urls_short_and_cover_every_pod() -> None:
    pods = [pod(f"sweep-{i:04d}-abcde", 0, 60, ns=f"team-{i % 7}") for i in range(500)]
    sel = q.DcgmSelector("pod", "namespace", ("Hostname", "hostname"))

    def build(p: str, n: str, w: q.Window) -> str:
        return q.gpu_util(sel, q.GPU_UTIL, p, n, w)

    chunks = chunk_pods(pods, build, max_url_bytes=8000, scrape_seconds=15)
    assert len(chunks) > 1
    assert all(url_length(query) <= 8000 for _, query in chunks)
    # Not far below the limit either: the length estimate is close.
    assert all(url_length(query) > 7000 for _, query in chunks[:-1])
    assert sorted(p.pod for chunk, _ in chunks for p in chunk) == sorted(p.pod for p in pods)
    # Fewer, larger chunks when URLs may be longer: the count follows the URL budget, not the job count.
    assert len(chunk_pods(pods, build, max_url_bytes=10**6, scrape_seconds=15)) == 1


def test_each_chunk_gets_the_window_of_its_own_pods() -> None:
    # Ends spread over 10 h, each pod living 1 h: a chunk's range covers its pods, not the whole round.
    pods = [pod(f"p-{i:03d}", i * 3 - 60, i * 3) for i in range(200)]

    def build(p: str, n: str, w: q.Window) -> str:
        return f'x{{pod=~"{p}"}}[{w.range_seconds}s] @ {w.at}'

    chunks = chunk_pods(pods, build, max_url_bytes=800, scrape_seconds=15)
    assert len(chunks) > 3
    for chunk, query in chunks:
        spread = (chunk[-1].held_until - chunk[0].held_until).total_seconds()
        assert f"[{3600 + int(spread) + 30}s]" in query


def test_a_single_pod_over_the_limit_still_gets_its_query() -> None:
    chunks = chunk_pods(
        [pod("a" * 60, 0, 1)], lambda p, n, w: f'x{{pod=~"{p}"}}', max_url_bytes=10, scrape_seconds=15
    )
    assert len(chunks) == 1


@pytest.mark.parametrize(
    ("names", "matches", "rejects"),
    [
        (["train-1", "train-2"], ["train-1", "train-2"], ["train-12", "xtrain-1", "train-"]),
        (["web.v1"], ["web.v1"], ["webxv1"]),
    ],
)
def test_regex_is_exact(names: list[str], matches: list[str], rejects: list[str]) -> None:
    # PromQL regexes are anchored; inside the string literal "\\." is the regex "\.".
    regex = q.regex_alternation(names).replace("\\\\", "\\")
    assert all(re.fullmatch(regex, m) for m in matches)
    assert not any(re.fullmatch(regex, r) for r in rejects)


def _classes_query(classes: Mapping[int, tuple[str, str]], _window: q.Window) -> str:
    return " or ".join(
        f'x{{namespace=~"{ns}",pod=~"{p}"}}[{step}s]' for step, (p, ns) in sorted(classes.items())
    )


def test_groups_get_their_own_regexes_within_the_budget() -> None:
    pods = [pod(f"job-{i:04d}-abcde", 0, 60 + i, ns=f"team-{i % 5}") for i in range(400)]
    group = {p.uid: 60 * 2 ** (i % 3) for i, p in enumerate(pods)}
    chunks = chunk_groups(pods, lambda p: group[p.uid], _classes_query, max_url_bytes=6000, scrape_seconds=15)
    assert len(chunks) > 1
    assert all(url_length(query) <= 6000 for _, query in chunks)
    assert all(url_length(query) > 5000 for _, query in chunks[:-1])
    assert sorted(p.uid for chunk, _ in chunks for p in chunk) == sorted(p.uid for p in pods)
    for chunk, query in chunks:
        for step in {group[p.uid] for p in chunk}:
            (regex,) = re.findall(rf'pod=~"([^"]*)"}}\[{step}s\]', query)
            assert set(regex.split("|")) == {p.pod for p in chunk if group[p.uid] == step}
    one = chunk_groups(pods, lambda p: group[p.uid], _classes_query, max_url_bytes=10**6, scrape_seconds=15)
    assert len(one) == 1


def test_a_name_in_two_groups_is_never_in_one_query() -> None:
    # A group's selector takes every name of its regex in every namespace of its regex: "a" of
    # namespace y would come back in group 60's branch too.
    pods = [pod("a", 0, 10, ns="x"), pod("b", 0, 11, ns="y"), pod("a", 0, 12, ns="y")]
    group = {"x": 60, "y": 120}
    chunks = chunk_groups(
        pods,
        lambda p: 60 if p.pod == "b" else group[p.namespace],
        _classes_query,
        max_url_bytes=10**6,
        scrape_seconds=15,
    )
    assert [[(p.namespace, p.pod) for p in chunk] for chunk, _ in chunks] == [
        [("x", "a"), ("y", "b")],
        [("y", "a")],
    ]
