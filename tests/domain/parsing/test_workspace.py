"""Workspace pods (Coder, JupyterHub) become WORKSPACE records owned through the platform's own keys."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from inno_notify.domain.model import JobRecord, JobStatus, NotifyMode, WorkloadKind
from inno_notify.domain.parsing import (
    ParseConfig,
    directory_aliases,
    parse_bare_gpu_pod,
    parse_pod,
    parse_selectors,
    workspace_identity,
)
from inno_notify.settings import DEFAULT_WORKSPACE_SELECTORS

DIRECTORY = ["bob@example.com", "j51000101@uni.example", "alice@a.example", "alice@b.example"]
CFG = ParseConfig(
    cluster="lab",
    namespace_teams={"coder": "platform", "jhub": "nlp"},
    workspace_selectors=parse_selectors(DEFAULT_WORKSPACE_SELECTORS),
    user_aliases=directory_aliases(DIRECTORY),
)
CODER_VALUES = {
    "${data.coder_workspace.me.id}": "7c1d0a4e-2f6b-4a8e-9d3c-5b1e2f3a4c5d",
    "${data.coder_workspace.me.name}": "dev",
    "${data.coder_workspace_owner.me.id}": "0e9a1b2c-3d4e-4f5a-8b6c-7d8e9f0a1b2c",
    "${data.coder_workspace_owner.me.name}": "bob",
}


def pod(
    name: str,
    namespace: str,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    *,
    gpus: str = "1",
    phase: str = "Running",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-30T08:00:00Z",
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
        "status": {"phase": phase, "startTime": "2026-11-30T08:00:05Z"},
    }


def coder_pod(captures: Path, **annotations: str) -> dict[str, Any]:
    capture = json.loads((captures / "coder" / "kubernetes-template-workspace-labels.json").read_text())
    labels = dict(capture["kubernetes_deployment.main"]["spec"]["template"]["metadata"]["labels"])
    for key, value in labels.items():
        for expression, real in CODER_VALUES.items():
            value = value.replace(expression, real)
        labels[key] = value
    obj = pod("coder-7c1d0a4e-5d8b9-x2k4q", "coder", labels, dict(annotations))
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1"}
    ]
    return obj


def jupyterhub_pod(captures: Path) -> dict[str, Any]:
    metadata = json.loads(
        (captures / "jupyterhub" / "singleuser-pod-metadata-z2jh-3.3.8-excerpt.json").read_text()
    )["metadata"]
    return pod("jupyter-j51000101", "jhub", dict(metadata["labels"]), dict(metadata["annotations"]))


def described_pod(captures: Path) -> dict[str, Any]:
    """The escaped-username BinderHub pod, from its `kubectl describe` header."""
    text = (
        captures / "jupyterhub" / "singleuser-pod-describe-z2jh-2.0.0-escaped-username-excerpt.txt"
    ).read_text()
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    section = None
    for line in text.splitlines():
        head, _, rest = line.partition(":")
        if not line.startswith(" "):
            section = head
            value = rest.strip()
        else:
            value = line.strip()
        if section == "Labels" and "=" in value:
            key, _, val = value.partition("=")
            labels[key] = val
        elif section == "Annotations" and ": " in value:
            key, _, val = value.partition(": ")
            annotations[key] = val
    return pod("jupyter-jupyterhub-2dbinderhub-2d0v3uud9a", "gesis", labels, annotations)


def parse(obj: dict[str, Any], cfg: ParseConfig = CFG) -> JobRecord | None:
    return parse_bare_gpu_pod(obj, cfg, [], pod=parse_pod(obj, cfg))


def test_coder_workspace_owned_through_its_user_name(captures: Path) -> None:
    record = parse(coder_pod(captures))
    assert record is not None
    assert (record.kind, record.status, record.owner, record.team) == (
        WorkloadKind.WORKSPACE,
        JobStatus.RUNNING,
        "bob@example.com",
        "platform",
    )
    identity = workspace_identity(record.labels)
    assert (identity.platform, identity.user, identity.name) == ("coder", "bob", "dev")


def test_coder_email_annotation_wins_where_a_template_puts_it_on_the_pod(captures: Path) -> None:
    record = parse(coder_pod(captures, **{"com.coder.user.email": "Bob.Builder@corp.example"}))
    assert record is not None and record.owner == "Bob.Builder@corp.example"


def test_jupyterhub_server_owned_through_its_annotation(captures: Path) -> None:
    record = parse(jupyterhub_pod(captures))
    assert record is not None
    assert (record.kind, record.owner, record.team) == (
        WorkloadKind.WORKSPACE,
        "j51000101@uni.example",
        "nlp",
    )
    identity = workspace_identity(record.labels)
    assert (identity.platform, identity.user, identity.name) == ("jupyterhub", "j51000101", None)


def test_the_raw_annotation_beats_the_escaped_label(captures: Path) -> None:
    obj = described_pod(captures)
    assert obj["metadata"]["labels"]["hub.jupyter.org/username"] == "jupyterhub-2dbinderhub-2d0v3uud9a"
    cfg = ParseConfig(
        cluster="lab",
        workspace_selectors=CFG.workspace_selectors,
        user_aliases=directory_aliases(["jupyterhub-binderhub-0v3uud9a@mybinder.example"]),
    )
    record = parse(obj, cfg)
    assert record is not None and record.owner == "jupyterhub-binderhub-0v3uud9a@mybinder.example"
    # Not in the directory, and no e-mail: recorded without an owner (team leads may take it).
    unknown = parse(obj)
    assert unknown is not None and unknown.kind is WorkloadKind.WORKSPACE and unknown.owner is None


@pytest.mark.parametrize(
    ("username", "annotations", "owner"),
    [
        ("alice@example.org", {}, "alice@example.org"),  # a user name that is an address
        ("BOB", {}, "bob@example.com"),  # the directory matches case-insensitively
        ("alice", {}, None),  # two directory users share the local part: ambiguous
        ("alice", {"inno-notify/owner": "carol@example.com"}, "carol@example.com"),
        ("carol", {"inno-notify/owner": "carol@example.com"}, "carol@example.com"),
        ("attacker@evil.example,victim@corp.example", {}, None),  # not one address
        ("\x00", {}, "j51000101@uni.example"),  # blank once cleaned: the label decides
    ],
)
def test_owner_resolution(
    captures: Path, username: str, annotations: dict[str, str], owner: str | None
) -> None:
    obj = jupyterhub_pod(captures)
    obj["metadata"]["annotations"] = {"hub.jupyter.org/username": username, **annotations}
    record = parse(obj)
    assert record is not None and record.owner == owner


def test_opt_out_and_channels_are_read_as_for_any_pod(captures: Path) -> None:
    obj = jupyterhub_pod(captures)
    obj["metadata"]["annotations"].update({"inno-notify/notify": "never", "inno-notify/channels": "slack"})
    record = parse(obj)
    assert record is not None and record.notify is NotifyMode.NEVER and record.channels == ("slack",)


def test_what_is_not_a_workspace(captures: Path) -> None:
    no_gpu = jupyterhub_pod(captures)
    no_gpu["spec"]["containers"][0]["resources"] = {}
    assert parse(no_gpu) is None
    # A Job's pod stays the Job's, whatever its labels.
    job_pod = jupyterhub_pod(captures)
    job_pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "job-1"
    assert parse(job_pod) is None
    # Without selectors the bare-pod rules apply: a bare GPU pod, its owner only from inno-notify/owner.
    bare = parse(jupyterhub_pod(captures), ParseConfig(cluster="lab"))
    assert bare is not None and (bare.kind, bare.owner) == (WorkloadKind.POD, None)
    # An unrelated GPU pod with an owner is a bare pod, not a workspace.
    other = pod("train-x", "ml", {"app": "x"}, {"inno-notify/owner": "bob@example.com"})
    record = parse(other)
    assert record is not None and record.kind is WorkloadKind.POD


def test_a_workspace_that_ended_is_closed(captures: Path) -> None:
    record = parse(copy.deepcopy(jupyterhub_pod(captures)) | {"status": {"phase": "Succeeded"}})
    assert record is not None and record.status is JobStatus.SUCCEEDED


def test_another_platform_by_its_own_selector() -> None:
    """A Kubeflow notebook (a StatefulSet's pod) picked by a configured selector: a generic workspace."""
    cfg = ParseConfig(cluster="lab", workspace_selectors=parse_selectors(["notebook-name"]))
    obj = pod(
        "alice-notebook-0",
        "ml",
        {"notebook-name": "alice-notebook"},
        {"inno-notify/owner": "alice@a.example"},
    )
    obj["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "alice-notebook", "uid": "s1"}]
    record = parse(obj, cfg)
    assert record is not None and record.kind is WorkloadKind.WORKSPACE and record.owner == "alice@a.example"
    assert workspace_identity(record.labels).platform == "workspace"
