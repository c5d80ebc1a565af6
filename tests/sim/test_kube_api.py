"""The simulated API server over real HTTP, checked with kubernetes-asyncio's own APIs and Watch."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import (
    ApiClient,
    ApisApi,
    BatchV1Api,
    CoreV1Api,
    CustomObjectsApi,
    EventsV1Api,
)
from kubernetes_asyncio.client.exceptions import ApiException

from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import CORE_EVENTS, JOBS, WORKLOADS_V1BETA1
from tests.waiting import eventually


def job(name: str, namespace: str = "ml", **labels: str) -> dict[str, Any]:
    # The library's models insist on the fields a real server always returns.
    template = {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"template": template},
    }


async def raw_watch(api: ApiClient, path: str, **query: str) -> aiohttp.ClientResponse:
    response: aiohttp.ClientResponse = await api.call_api(
        path, "GET", query_params=[("watch", "true"), *query.items()], _preload_content=False
    )
    return response


async def read_events(response: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    return [orjson.loads(await response.content.readline()) for _ in range(count)]


async def test_list_pages_are_one_consistent_snapshot(sim: SimKubeServer, api: ApiClient) -> None:
    for i in range(5):
        sim.create(JOBS, job(f"j{i}"))
    batch = BatchV1Api(api)
    first = await batch.list_job_for_all_namespaces(limit=2)
    # `_continue` is the library model's public name for the `continue` field (a Python keyword).
    sim.delete(JOBS, "ml", "j3")
    sim.create(JOBS, job("j9"))
    rest = await batch.list_job_for_all_namespaces(limit=10, _continue=first.metadata._continue)
    assert [j.metadata.name for j in first.items + rest.items] == ["j0", "j1", "j2", "j3", "j4"]
    assert first.metadata.resource_version == rest.metadata.resource_version == "6"
    assert first.metadata.remaining_item_count == 3
    assert rest.metadata._continue is None
    fresh = await batch.list_namespaced_job("ml")
    assert fresh.metadata.resource_version == "8"
    assert [j.metadata.name for j in fresh.items] == ["j0", "j1", "j2", "j4", "j9"]


@pytest.mark.parametrize(
    ("accept", "partial"),
    [
        ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", True),
        ("application/json;as=Table;g=meta.k8s.io;v=v1,application/json", False),
        ("application/json", False),
    ],
)
async def test_a_list_of_metadata_only_when_the_client_asks_for_one_first(
    sim: SimKubeServer, api: ApiClient, accept: str, partial: bool
) -> None:
    """As kube-apiserver: the first media type of the Accept header that it serves decides; a
    PartialObjectMetadataList holds each object's metadata alone, paginated like any list."""
    for i in range(3):
        sim.create(JOBS, job(f"j{i}", team="face"))
    response = await api.call_api(
        "/apis/batch/v1/jobs",
        "GET",
        query_params=[("limit", "2")],
        header_params={"Accept": accept},
        _preload_content=False,
    )
    doc = orjson.loads(await response.read())
    response.release()
    items = doc["items"]
    assert [i["metadata"]["name"] for i in items] == ["j0", "j1"]
    assert doc["metadata"]["resourceVersion"] == str(sim.store.resource_version)
    assert doc["metadata"]["continue"]
    if partial:
        assert (doc["kind"], doc["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
        assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in items)
        assert {(i["kind"], i["apiVersion"]) for i in items} == {("PartialObjectMetadata", "meta.k8s.io/v1")}
        assert items[0]["metadata"] == sim.store.get(JOBS, "ml", "j0")["metadata"]
        assert sim.stats.metadata_lists == 1
    else:
        assert doc["kind"] == "JobList" and "spec" in items[0]
        assert sim.stats.metadata_lists == 0


async def test_continue_token_expires_with_compaction(sim: SimKubeServer, api: ApiClient) -> None:
    for i in range(3):
        sim.create(JOBS, job(f"j{i}"))
    batch = BatchV1Api(api)
    first = await batch.list_job_for_all_namespaces(limit=1)
    sim.create(JOBS, job("later"))
    sim.compact()
    with pytest.raises(ApiException) as caught:
        await batch.list_job_for_all_namespaces(limit=1, _continue=first.metadata._continue)
    assert caught.value.status == 410


async def test_selectors_and_namespaces_filter_lists(sim: SimKubeServer, api: ApiClient) -> None:
    sim.create(JOBS, job("a", team="face"))
    sim.create(JOBS, job("b", team="nlp"))
    sim.create(JOBS, job("c", namespace="other", team="face"))
    batch = BatchV1Api(api)
    by_label = await batch.list_job_for_all_namespaces(label_selector="team=face")
    in_ns = await batch.list_namespaced_job("ml", label_selector="team=face")
    by_field = await batch.list_job_for_all_namespaces(field_selector="metadata.name=b")
    assert [j.metadata.name for j in by_label.items] == ["a", "c"]
    assert [j.metadata.name for j in in_ns.items] == ["a"]
    assert [j.metadata.name for j in by_field.items] == ["b"]


async def test_library_watch_sees_changes_in_order_and_bookmarks(sim: SimKubeServer, api: ApiClient) -> None:
    batch = BatchV1Api(api)
    sim.create(JOBS, job("elsewhere", namespace="other"))
    listed = await batch.list_namespaced_job("ml")
    sim.create(JOBS, job("a"))
    sim.patch(JOBS, "ml", "a", {"status": {"succeeded": 1}})
    sim.delete(JOBS, "ml", "a")
    seen: list[tuple[str, str]] = []
    stream = watch.Watch()
    async with stream:
        async for event in stream.stream(
            batch.list_namespaced_job,
            "ml",
            resource_version=listed.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            seen.append((event["type"], event["raw_object"]["metadata"]["resourceVersion"]))
            if event["type"] == "BOOKMARK":
                break
    assert listed.metadata.resource_version == "2"
    assert seen == [("ADDED", "3"), ("MODIFIED", "4"), ("DELETED", "5"), ("BOOKMARK", "5")]


async def test_timeout_seconds_ends_the_watch(sim: SimKubeServer, api: ApiClient) -> None:
    sim.bookmark_interval = 60
    loop = asyncio.get_running_loop()
    started = loop.time()  # the clock the server's deadline runs on
    stream = watch.Watch()
    async with asyncio.timeout(10), stream:
        events = [
            e async for e in stream.stream(BatchV1Api(api).list_job_for_all_namespaces, timeout_seconds=1)
        ]
    assert events == []
    assert loop.time() - started >= 1.0  # the server ended it, and not before the second was up


async def test_watch_from_compacted_version_is_410(sim: SimKubeServer, api: ApiClient) -> None:
    for i in range(3):
        sim.create(JOBS, job(f"j{i}"))
    sim.compact()
    response = await raw_watch(api, "/apis/batch/v1/jobs", resourceVersion="1")
    [event] = await read_events(response, 1)
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    assert await response.content.readline() == b""  # and the stream ends
    response.close()
    # The library turns it into ApiException(410) for its users.
    stream = watch.Watch()
    with pytest.raises(ApiException) as caught:
        async with stream:
            async for _ in stream.stream(
                BatchV1Api(api).list_job_for_all_namespaces, resource_version="1", timeout_seconds=5
            ):
                pass
    assert caught.value.status == 410


async def test_watch_without_version_starts_with_the_current_state(
    sim: SimKubeServer, api: ApiClient
) -> None:
    sim.create(JOBS, job("a"))
    sim.create(JOBS, job("b"))
    response = await raw_watch(api, "/apis/batch/v1/namespaces/ml/jobs")
    sim.create(JOBS, job("c"))
    events = await read_events(response, 3)
    response.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
    ]


async def test_label_selected_watch_sees_objects_move_in_and_out(sim: SimKubeServer, api: ApiClient) -> None:
    sim.create(JOBS, job("a", stage="queued"))
    response = await raw_watch(api, "/apis/batch/v1/jobs", resourceVersion="1", labelSelector="stage=running")
    sim.patch(JOBS, "ml", "a", {"metadata": {"labels": {"stage": "running"}}})
    sim.patch(JOBS, "ml", "a", {"status": {"active": 1}})
    sim.patch(JOBS, "ml", "a", {"metadata": {"labels": {"stage": "done"}}})
    events = await read_events(response, 3)
    response.close()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


async def test_both_event_apis_serve_the_same_objects(sim: SimKubeServer, api: ApiClient) -> None:
    sim.create(
        CORE_EVENTS,
        {
            "metadata": {"name": "j.1", "namespace": "ml"},
            "involvedObject": {"kind": "Job", "name": "j", "namespace": "ml"},
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "type": "Warning",
            # Required by the events.k8s.io model; a real server returns null for old-style events.
            "eventTime": "2026-11-30T10:00:00.000000Z",
            "reportingComponent": "job-controller",
            "reportingInstance": "kube-controller-manager-1",
            "action": "Fail",
        },
    )
    core = await CoreV1Api(api).list_event_for_all_namespaces(field_selector="involvedObject.kind=Job")
    new = await EventsV1Api(api).list_event_for_all_namespaces(field_selector="regarding.kind=Job")
    assert [(e.reason, e.message, e.involved_object.name) for e in core.items] == [
        ("BackoffLimitExceeded", "Job has reached the specified backoff limit", "j")
    ]
    assert [(e.reason, e.note, e.regarding.name) for e in new.items] == [
        ("BackoffLimitExceeded", "Job has reached the specified backoff limit", "j")
    ]


async def test_discovery_and_kueue_versions(sim: SimKubeServer, api: ApiClient) -> None:
    groups = await ApisApi(api).get_api_versions()
    kueue = {g.name: g for g in groups.groups}["kueue.x-k8s.io"]
    assert [v.version for v in kueue.versions] == ["v1beta2", "v1beta1"]
    assert kueue.preferred_version.version == "v1beta2"
    sim.create(WORKLOADS_V1BETA1, {"metadata": {"name": "job-a-1", "namespace": "ml"}, "spec": {}})
    custom = CustomObjectsApi(api)
    for version in ("v1beta1", "v1beta2"):
        listed = await custom.list_cluster_custom_object("kueue.x-k8s.io", version, "workloads")
        assert [w["apiVersion"] for w in listed["items"]] == [f"kueue.x-k8s.io/{version}"]
    resources = await CoreV1Api(api).get_api_resources()
    assert {r.name for r in resources.resources} == {"pods", "namespaces", "events"}

    sim.kueue_versions = ()
    with pytest.raises(ApiException) as caught:
        await custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")
    assert caught.value.status == 404
    assert "kueue.x-k8s.io" not in {g.name for g in (await ApisApi(api).get_api_versions()).groups}


async def test_injected_failures_answer_500_for_a_count(sim: SimKubeServer, api: ApiClient) -> None:
    batch = BatchV1Api(api)
    sim.fail_requests(500, count=2)
    statuses = []
    for _ in range(3):
        try:
            await batch.list_job_for_all_namespaces()
            statuses.append(200)
        except ApiException as exc:
            statuses.append(exc.status)
    assert statuses == [500, 500, 200]
    assert sim.stats.failed == 2


async def test_dropped_watch_ends_without_a_final_chunk(sim: SimKubeServer, api: ApiClient) -> None:
    response = await raw_watch(api, "/apis/batch/v1/jobs", resourceVersion="0")
    await eventually(lambda: sim.open_watches == 1)
    assert sim.drop_watches() == 1
    with pytest.raises(aiohttp.ClientPayloadError):
        await asyncio.wait_for(response.content.readline(), 5)
    response.close()


async def test_stalled_watch_stays_open_and_silent(sim: SimKubeServer, api: ApiClient) -> None:
    jobs = "/apis/batch/v1/jobs"
    stalled = await raw_watch(api, jobs, resourceVersion="0", allowWatchBookmarks="true")
    await eventually(lambda: sim.open_watches == 1)
    sim.stall_watches(True)
    sim.create(JOBS, job("a"))
    # A second watch opened later, not stalled: once its first bookmark is here, the stalled one's
    # bookmark was due too (the same interval, from an earlier start) and the event long pending.
    witness = await raw_watch(api, jobs, resourceVersion="0", allowWatchBookmarks="true")
    assert [e["type"] for e in await read_events(witness, 2)] == ["ADDED", "BOOKMARK"]
    assert sim.open_watches == 2  # the stalled one is still open
    witness.close()
    # The stalled stream's version is compacted away before it speaks again: its first line is the
    # 410 for the version it was stuck at. Anything it had sent meanwhile, event or bookmark, would
    # have come first.
    sim.compact()
    sim.stall_watches(False)
    [event] = await read_events(stalled, 1)
    stalled.close()
    assert (event["type"], event["object"]["code"]) == ("ERROR", 410)


async def test_watch_delivers_thousands_of_events_in_order(sim: SimKubeServer, api: ApiClient) -> None:
    # How fast it does so is bench/sim_watch.py's question, not a test's.
    count = 2000
    response = await raw_watch(api, "/apis/batch/v1/jobs", resourceVersion="0")
    await eventually(lambda: sim.open_watches == 1)
    for i in range(count):
        sim.create(JOBS, job(f"j{i}"))
        if i % 500 == 0:
            await asyncio.sleep(0)  # let the stream flush while the writes go on
    events = await asyncio.wait_for(read_events(response, count), 30)
    response.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", f"j{i}") for i in range(count)
    ]
    assert [int(e["object"]["metadata"]["resourceVersion"]) for e in events] == list(range(2, count + 2))
