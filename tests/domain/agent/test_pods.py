"""Pod objects -> the names the agent's series carry; malformed objects give None, never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from inno_notify.domain.agent.pods import PodIdentity, parse_pod_identity

CID_A = "a" * 64
CID_B = "b" * 64
CID_I = "c" * 64


def pod(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"uid": "7C4B3BDE-1f0e-4a8e-9d4e-2c8a1e6f9b10", "namespace": "face", "name": "train-0"},
        "status": {
            "containerStatuses": [
                {"name": "trainer", "containerID": f"containerd://{CID_A}"},
                {"name": "sidecar", "containerID": f"cri-o://{CID_B}"},
                {"name": "waiting"},  # not started: no containerID yet
            ],
            "initContainerStatuses": [{"name": "fetch", "containerID": f"docker://{CID_I}"}],
        },
    }
    obj.update(overrides)
    return obj


def test_names_and_containers_by_id() -> None:
    assert parse_pod_identity(pod()) == PodIdentity(
        uid="7c4b3bde-1f0e-4a8e-9d4e-2c8a1e6f9b10",
        namespace="face",
        name="train-0",
        containers={CID_A: "trainer", CID_B: "sidecar", CID_I: "fetch"},
    )


def test_pending_pod_has_no_containers() -> None:
    identity = parse_pod_identity(pod(status={"phase": "Pending"}))
    assert identity is not None and identity.containers == {}


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "pod",
        [],
        {},
        {"metadata": "x"},
        {"metadata": {"uid": "u", "namespace": "ns"}},
        {"metadata": {"uid": 5, "namespace": "ns", "name": "p"}},
        {"metadata": {"uid": "u", "namespace": "", "name": "p"}},
        {"metadata": {"uid": "u", "namespace": "ns", "name": "p\x00"}},
        {"metadata": {"uid": "u", "namespace": "ns", "name": "p" * 300}},
    ],
    ids=["none", "str", "list", "empty", "metadata-str", "no-name", "uid-int", "empty-ns", "nul", "huge"],
)
def test_malformed_metadata_is_none(obj: Any) -> None:
    assert parse_pod_identity(obj) is None


@pytest.mark.parametrize(
    "status",
    [
        "running",
        {"containerStatuses": "x"},
        {"containerStatuses": [5, None, {"name": 3, "containerID": "containerd://x"}]},
        {"containerStatuses": [{"name": "a", "containerID": ["containerd://x"]}]},
    ],
    ids=["status-string", "statuses-string", "junk-entries", "id-list"],
)
def test_malformed_status_keeps_the_pod(status: Any) -> None:
    identity = parse_pod_identity(pod(status=status))
    assert identity is not None and identity.name == "train-0" and identity.containers == {}
