"""Kueue ClusterQueues and LocalQueues: real captures (tests/fixtures/kueue) and hostile shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inno_notify.domain.kueue_queues import parse_cluster_queue, parse_local_queue
from inno_notify.domain.parsing import ParseError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "kueue"
GPU = {"nvidia.com/gpu": 1.0}


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def test_two_gpu_flavors_add_up() -> None:
    # nominalQuota 8 (gpu-a40) + 4 (gpu-a100), as JSON numbers.
    quota = parse_cluster_queue(fixture("clusterqueue-gpu-flavors-v0.5.2.json"), GPU)
    assert (quota.name, quota.nominal_gpus) == ("cq-all-resources", 12.0)


def test_a_quota_spelt_as_a_string() -> None:
    obj = {"metadata": {"name": "cq-40"}, **fixture("clusterqueue-gpu40-reserving-4-admitted-3-excerpt.json")}
    assert parse_cluster_queue(obj, GPU).nominal_gpus == 40.0


def test_gpu_equivalents_weigh_each_resource() -> None:
    obj = fixture("clusterqueue-gpu-flavors-v0.5.2.json")
    assert parse_cluster_queue(obj, {"nvidia.com/gpu": 0.5}).nominal_gpus == 6.0
    # A ClusterQueue covering no GPU resource has no GPU quota (None), not 0.
    assert parse_cluster_queue(obj, {"amd.com/gpu": 1.0}).nominal_gpus is None


def test_local_queue() -> None:
    ref = parse_local_queue(fixture("localqueue-v0.5.2.json"))
    assert (ref.namespace, ref.name, ref.cluster_queue) == ("ml-user", "lq-all-resources", "cq-all-resources")


def _cq(quota: object) -> dict[str, Any]:
    flavor = {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}
    return {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [flavor]}]}}


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": {"name": ""}},
        {"metadata": "cq"},
        {"metadata": {"name": "cq"}, "spec": {"resourceGroups": "all"}},
        _cq("lots"),
        _cq("1e400"),
        _cq(-4),
        _cq(10**7),
        _cq(True),
        _cq("4\x00"),
    ],
)
def test_hostile_cluster_queues_are_refused(obj: dict[str, Any]) -> None:
    with pytest.raises(ParseError):
        parse_cluster_queue(obj, GPU)


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": {"name": "lq"}},
        {"metadata": {"namespace": "ns"}},
        {"metadata": {"name": "lq", "namespace": ["ns"]}},
    ],
)
def test_hostile_local_queues_are_refused(obj: dict[str, Any]) -> None:
    with pytest.raises(ParseError):
        parse_local_queue(obj)


def test_entries_that_are_not_objects_are_skipped() -> None:
    obj = _cq(2)
    obj["spec"]["resourceGroups"][0]["flavors"].append("junk")
    obj["spec"]["resourceGroups"].append(
        {"flavors": [{"resources": [None, {"name": "cpu", "nominalQuota": "x"}]}]}
    )
    assert parse_cluster_queue(obj, GPU).nominal_gpus == 2.0
