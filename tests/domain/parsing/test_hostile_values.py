"""Hostile values at the parsing boundary, one table per rule: what is refused (ParseError with a
reason), what is dropped and noted, what is cleaned (NUL) or capped with a visible mark."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest

from inno_notify.domain.parsing import (
    ParseConfig,
    ParseError,
    SetAside,
    parse_bare_gpu_pod,
    parse_job,
    parse_pod,
    parse_workload,
)
from inno_notify.domain.parsing.annotations import one_address
from inno_notify.domain.parsing.storable import (
    INDEXED_MAX_BYTES,
    TEXT_MAX_BYTES,
    TRUNCATION_MARK,
    storable,
    storable_key,
    storable_map,
)
from tests.domain.parsing._load import load

CFG = ParseConfig(cluster="c1", namespace_teams={"nlp": "nlp"})
OWNER = "inno-notify/owner"
INDEX = "batch.kubernetes.io/job-completion-index"


def job_with(annotations: dict[str, Any]) -> dict[str, Any]:
    job = load("job-kueue-2-preempted.json")
    job["metadata"].setdefault("annotations", {}).update(annotations)
    return job


def pod_with_index(value: Any, where: str = "annotations") -> dict[str, Any]:
    pod = load("pod-indexed-3.json")
    pod["metadata"]["annotations"].pop(INDEX)
    pod["metadata"]["labels"].pop(INDEX)
    pod["metadata"][where][INDEX] = value
    return pod


# --- the completion index -----------------------------------------------------------------------

INDEXES = [
    pytest.param("3", 3, [], id="an index"),
    pytest.param("0", 0, [], id="zero"),
    pytest.param("2147483647", 2147483647, [], id="the largest 32-bit index"),
    pytest.param("²", None, [SetAside("completion_index", "out_of_range")], id="superscript two"),
    pytest.param("٣", None, [SetAside("completion_index", "out_of_range")], id="Arabic-Indic three"),
    pytest.param("1" * 5000, None, [SetAside("completion_index", "out_of_range")], id="5000 digits"),
    pytest.param("2147483648", None, [SetAside("completion_index", "out_of_range")], id="past 32 bits"),
    pytest.param("-1", None, [SetAside("completion_index", "out_of_range")], id="negative"),
    pytest.param(" 7", None, [SetAside("completion_index", "out_of_range")], id="padded"),
]


@pytest.mark.parametrize(("written", "index", "notes"), INDEXES)
@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_completion_index_is_ascii_digits_within_32_bits(
    written: str, index: int | None, notes: list[SetAside], where: str
) -> None:
    seen: list[SetAside] = []
    pod = parse_pod(pod_with_index(written, where), CFG, seen)
    assert (pod.completion_index, seen) == (index, notes)


# --- the owner: exactly one addr_spec -------------------------------------------------------------

OWNERS = [
    pytest.param("alice@example.com", "alice@example.com", id="one address"),
    pytest.param("  alice@example.com ", "alice@example.com", id="blanks around it"),
    pytest.param('"a b"@example.com', None, id="quoted local part"),
    pytest.param("attacker@evil.example,victim@corp.example", None, id="two addresses"),
    pytest.param("a@x.org;b@y.org", None, id="semicolon list"),
    pytest.param("a@x.org b@y.org", None, id="blank-separated list"),
    pytest.param("Alice <alice@example.com>", None, id="display name"),
    pytest.param("alice@example.com (Alice)", None, id="comment"),
    pytest.param("alice", None, id="no domain"),
    pytest.param("@example.com", None, id="no local part"),
    pytest.param("alice@", None, id="nothing after the at"),
    pytest.param("alice@example.com\nBcc: victim@corp.example", None, id="header injection"),
    pytest.param("al\x00ice@example.com", "alice@example.com", id="NUL removed before parsing"),
    pytest.param("a" * 65 + "@example.com", None, id="local part over 64"),
    pytest.param("a@" + "x" * 3000 + ".org", None, id="over 2.7 KB"),
]


@pytest.mark.parametrize(("written", "owner"), OWNERS)
def test_owner_is_exactly_one_address(written: str, owner: str | None) -> None:
    notes: list[SetAside] = []
    record = parse_job(job_with({OWNER: written}), CFG, notes)
    assert record.owner == owner
    assert notes == ([] if owner else [SetAside("owner", "not_one_address")])


def test_a_bare_gpu_pod_whose_owner_is_two_addresses_has_no_owner() -> None:
    pod = load("pod-airflow-kpo.json")
    pod["metadata"].setdefault("annotations", {})[OWNER] = "attacker@evil.example,victim@corp.example"
    notes: list[SetAside] = []
    record = parse_bare_gpu_pod(pod, CFG, notes)
    assert record is not None and record.owner is None
    assert notes == [SetAside("owner", "not_one_address")]


@pytest.mark.parametrize("value", ["a@b.c", "x.y+tag@sub.example.org"])
def test_one_address_is_cached_and_stable(value: str) -> None:
    assert one_address(value) == one_address(value) == value


# --- NUL and caps -------------------------------------------------------------------------------


def test_nul_is_removed_from_annotations_and_labels() -> None:
    job = job_with({"inno-notify/team": "fa\x00ce", "inno-notify/group": "\x00sweep"})
    job["metadata"]["labels"]["note"] = "a\x00b"
    record = parse_job(job, CFG)
    assert (record.team, record.group_key, record.labels["note"]) == ("face", "sweep", "ab")


def test_nul_is_removed_from_a_termination_message() -> None:
    pod = load("pod-indexed-3.json")
    pod["status"]["containerStatuses"] = [
        {
            "name": "worker",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "reason": "Err\x00or", "message": "boom\x00\x00!"}},
        }
    ]
    [container] = parse_pod(pod, CFG).containers
    assert container.terminated is not None
    assert (container.terminated.reason, container.terminated.message) == ("Error", "boom!")


@pytest.mark.parametrize("field", ["inno-notify/team", "inno-notify/group", "inno-notify/family"])
@pytest.mark.parametrize("piece", ["x", "日", "\U0001f600"])
def test_indexed_annotations_are_capped_with_a_mark(field: str, piece: str) -> None:
    record = parse_job(job_with({field: piece * 3000}), CFG)
    value = {"inno-notify/team": record.team, "inno-notify/group": record.group_key}.get(field, record.family)
    assert value is not None and value.endswith(TRUNCATION_MARK)
    assert len(value.encode()) <= INDEXED_MAX_BYTES


def test_a_long_termination_message_is_capped_with_a_mark() -> None:
    pod = load("pod-indexed-3.json")
    pod["status"]["containerStatuses"] = [
        {"name": "worker", "state": {"terminated": {"exitCode": 1, "message": "é" * 10_000}}}
    ]
    [container] = parse_pod(pod, CFG).containers
    message = container.terminated.message if container.terminated else None
    assert message is not None and message.endswith(TRUNCATION_MARK)
    assert len(message.encode()) <= TEXT_MAX_BYTES


STORABLE = [
    pytest.param("plain", 10, "plain", id="short"),
    pytest.param("a\x00b", 10, "ab", id="NUL"),
    pytest.param("x" * 20, 18, "xxxx" + TRUNCATION_MARK, id="cut ascii"),
    pytest.param("é" * 20, 18, "éé" + TRUNCATION_MARK, id="cut on a character boundary"),
    pytest.param("a\ud800b", 10, "a?b", id="lone surrogate"),
]


@pytest.mark.parametrize(("value", "limit", "expected"), STORABLE)
def test_storable(value: str, limit: int, expected: str) -> None:
    assert storable(value, limit) == expected
    assert storable(expected, limit) == expected  # idempotent


def test_keys_are_refused_not_cut() -> None:
    assert storable_key("a" * 128) == "a" * 128
    assert [storable_key(v) for v in ("a" * 129, "a\x00b", "a\ud800b")] == [None, None, None]


def test_label_maps_are_capped_with_a_count_of_what_was_dropped() -> None:
    kept = storable_map({f"k{i}": "v" for i in range(1000)}, 64, 64)
    assert len(kept) == 256 and kept[TRUNCATION_MARK] == "745 more dropped"


# --- refused: a ParseError with its reason ----------------------------------------------------------


def _set(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return obj


def _terminated(exit_code: Any) -> list[dict[str, Any]]:
    return [{"name": "worker", "state": {"terminated": {"exitCode": exit_code}}}]


POD = load("pod-indexed-3.json")
JOB = load("job-kueue-2-preempted.json")
REFUSED = [
    pytest.param(
        POD, ("status", "containerStatuses"), _terminated(2**31), "out_of_range", id="exit code 2**31"
    ),
    pytest.param(POD, ("status", "containerStatuses"), _terminated("²"), "wrong_type", id="exit code ²"),
    pytest.param(POD, ("status", "containerStatuses"), _terminated(True), "wrong_type", id="exit code bool"),
    pytest.param(POD, ("status", "containerStatuses"), _terminated(None), "missing_field", id="no exit code"),
    pytest.param(POD, ("metadata", "uid"), "u" * 200, "bad_key", id="uid too long"),
    pytest.param(POD, ("metadata", "uid"), {"a": 1}, "wrong_type", id="uid object"),
    pytest.param(JOB, ("metadata", "labels"), {"x": {"nested": 1}}, "wrong_type", id="label value object"),
    pytest.param(
        POD, ("metadata", "labels", "batch.kubernetes.io/controller-uid"), "u" * 200, "bad_key", id="job uid"
    ),
    pytest.param(
        POD, ("metadata", "creationTimestamp"), "0001-01-01T00:00:00+05:00", "bad_time", id="year 0"
    ),
    pytest.param(
        POD, ("metadata", "creationTimestamp"), "9999-12-31T23:59:59Z", "out_of_range", id="year 9999"
    ),
    pytest.param(POD, ("metadata", "creationTimestamp"), "2" * 100, "bad_time", id="long time"),
    pytest.param(
        POD, ("spec", "containers", 0, "resources", "limits", "memory"), "8Ei", "out_of_range", id="8 EiB"
    ),
    pytest.param(
        POD, ("spec", "containers", 0, "resources", "limits", "memory"), "1e400", "bad_quantity", id="1e400"
    ),
    pytest.param(
        POD, ("spec", "containers", 0, "resources", "limits", "memory"), -1, "out_of_range", id="negative"
    ),
    pytest.param(
        POD, ("spec", "containers", 0, "resources", "limits", "memory"), ["4Gi"], "bad_quantity", id="a list"
    ),
    pytest.param(
        POD, ("spec", "containers", 0, "resources", "limits", "cpu"), float("nan"), "bad_quantity", id="NaN"
    ),
    pytest.param(JOB, ("spec", "parallelism"), 2**40, "out_of_range", id="parallelism 2**40"),
    pytest.param(JOB, ("spec", "completions"), "1_000", "wrong_type", id="completions 1_000"),
    pytest.param(JOB, ("metadata", "labels"), {"x": 10**5000}, "out_of_range", id="5000-digit label value"),
]


@pytest.mark.parametrize(("obj", "path", "value", "reason"), REFUSED)
def test_refused_with_a_reason(obj: dict[str, Any], path: tuple[Any, ...], value: Any, reason: str) -> None:
    hostile = _set(obj, path, value)
    parse = parse_pod if hostile.get("kind") == "Pod" else parse_job
    with pytest.raises(ParseError) as raised:
        parse(hostile, CFG)
    assert raised.value.reason == reason


def test_deep_nesting_anywhere_is_no_recursion_error() -> None:
    deep: Any = "bottom"
    for _ in range(100_000):
        deep = {"a": [deep]}
    for path in [("metadata", "labels", "x"), ("spec",), ("status", "conditions"), ("metadata", "extra")]:
        with contextlib.suppress(ParseError):
            parse_job(_set(JOB, path, deep), CFG)


def test_workload_counts_are_range_checked_and_summed_within_32_bits() -> None:
    workload = load("workload-kueue-readmitted.json")
    workload["status"]["schedulingStats"] = {
        "evictions": [{"reason": "Preempted", "count": 2**31 - 1}, {"reason": "Preempted", "count": 5}]
    }
    _, info = parse_workload(workload)
    assert (info.evictions, info.preemptions) == (2**31 - 1, 2**31 - 1)
    workload["status"]["schedulingStats"]["evictions"][0]["count"] = -3
    with pytest.raises(ParseError):
        parse_workload(workload)
