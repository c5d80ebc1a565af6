"""ResourceWatcher against the simulated API server, with kubernetes-asyncio as the client.

Each fault test ends the same way: the consumer holds exactly the server's objects at the
server's versions (every final state delivered, none missed), and deletions it could not see
live are reported at the relist.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters import kube
from inno_notify.adapters.kube import ResourceWatcher, WatchOptions, load_api_client
from inno_notify.adapters.kube import protocol as kube_protocol
from inno_notify.domain.backoff import Backoff
from inno_notify.sim import kube_api
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS
from tests.adapters.kube.support import (
    FINISHED,
    Consumer,
    FakeClock,
    Knowing,
    job,
    running,
    server_versions,
)
from tests.waiting import eventually


def fast(**overrides: object) -> WatchOptions:
    """Timings shrunk so that faults resolve in milliseconds."""
    settings: dict[str, object] = {"inactivity_timeout": 2.0, "backoff_base": 0.01, "backoff_cap": 0.05}
    settings.update(overrides)
    return WatchOptions(**settings)  # type: ignore[arg-type]


def watcher_for(
    api: ApiClient, consumer: Consumer, options: WatchOptions, **kwargs: object
) -> ResourceWatcher:
    return ResourceWatcher(api, kube.JOBS, consumer.on_event, consumer.on_relist, options=options, **kwargs)  # type: ignore[arg-type]


def converged(consumer: Consumer, sim: SimKubeServer) -> bool:
    return consumer.versions("Job") == server_versions(sim, JOBS)


class GatedSleep:
    """Holds the watcher in its backoff pause until the test has arranged the world."""

    def __init__(self) -> None:
        self.paused = asyncio.Event()
        self.gate = asyncio.Event()

    async def __call__(self, _seconds: float) -> None:
        self.paused.set()
        await self.gate.wait()


async def test_initial_list_is_paginated_and_handed_over_before_synced(
    sim: SimKubeServer, api: ApiClient
) -> None:
    for i in range(20):
        sim.create(JOBS, job(f"j{i}"))
    seen_synced_at_relist: list[bool] = []
    consumer = Consumer()
    watcher = watcher_for(api, consumer, fast(page_size=7))

    async def on_relist(kind: str, uids: frozenset[str]) -> None:
        seen_synced_at_relist.append(watcher.synced.is_set())
        await consumer.on_relist(kind, uids)

    watcher.on_relist = on_relist
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        assert converged(consumer, sim)
        assert seen_synced_at_relist == [False]
        assert sim.stats.lists == 3  # 7 + 7 + 6
        assert consumer.types == ["SYNC"] * 20
        # Typed lists omit kind/apiVersion per item; the watcher puts them back.
        assert {(o["kind"], o["apiVersion"]) for o in consumer.objects["Job"].values()} == {
            ("Job", "batch/v1")
        }


async def test_changes_after_the_list_arrive_as_watch_events(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    sim.create(JOBS, job("a"))
    watcher = watcher_for(api, consumer, fast())
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        b = sim.create(JOBS, job("b"))
        sim.patch(JOBS, "ml", "a", FINISHED)
        sim.delete(JOBS, "ml", "b")
        await consumer.wait_for(lambda: consumer.types[-1:] == ["DELETED"])
    assert consumer.types == ["SYNC", "ADDED", "MODIFIED", "DELETED"]
    assert consumer.deleted["Job"] == {b["metadata"]["uid"]}
    assert converged(consumer, sim)


async def test_dropped_watches_while_50_jobs_finish_lose_nothing(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    names = [f"train-{i}" for i in range(50)]
    for name in names:
        sim.create(JOBS, job(name))
    watcher = watcher_for(api, consumer, fast())
    dropped = 0
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        for i, name in enumerate(names):
            if i % 10 == 0:
                await eventually(lambda: sim.open_watches == 1)
                dropped += sim.drop_watches()
            sim.patch(JOBS, "ml", name, FINISHED)
            await asyncio.sleep(0)
        await consumer.wait_for(lambda: converged(consumer, sim))
    assert dropped == 5
    assert all(o["status"]["succeeded"] == 1 for o in consumer.objects["Job"].values())
    assert len(consumer.objects["Job"]) == 50
    # Each drop cost one reconnect from the last version, never a relist.
    assert watcher.stats.watch_starts == 1 + dropped
    assert watcher.stats.lists == 1


async def test_compacted_history_relists_and_reports_deletions_from_the_gap(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    for i in range(10):
        sim.create(JOBS, job(f"j{i}"))
    sleep = GatedSleep()
    watcher = watcher_for(api, consumer, fast(sleep=sleep))
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        await eventually(lambda: sim.open_watches == 1)
        sim.drop_watches()
        await asyncio.wait_for(sleep.paused.wait(), 5)
        # While the watcher waits to reconnect: deletions, updates, new jobs, then compaction.
        gone = {sim.delete(JOBS, "ml", f"j{i}")["metadata"]["uid"] for i in (1, 4, 7)}
        sim.patch(JOBS, "ml", "j2", FINISHED)
        sim.create(JOBS, job("late"))
        sim.compact()
        sleep.gate.set()
        await consumer.wait_for(lambda: converged(consumer, sim))
    assert consumer.gone_at_relist["Job"] == gone
    assert watcher.stats.gone == 1
    assert watcher.stats.relists == 1
    assert consumer.relists["Job"] == 2
    assert sim.stats.gone == 1


async def test_silently_stalled_stream_is_restarted_by_the_inactivity_timeout(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    watcher = watcher_for(api, consumer, fast(inactivity_timeout=0.6))
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        await eventually(lambda: sim.open_watches == 1)
        assert sim.stall_watches(True) == 1
        for i in range(5):
            sim.create(JOBS, job(f"j{i}"))
        await consumer.wait_for(lambda: converged(consumer, sim))
        # The dead connection is closed by the client, not left open next to the new one.
        await eventually(lambda: sim.open_watches == 1)
    assert len(consumer.objects["Job"]) == 5
    assert watcher.stats.inactivity_restarts == 1
    assert watcher.stats.watch_starts == 2


async def test_bookmarks_keep_a_quiet_stream_alive(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    sim.bookmark_interval = 0.05
    watcher = watcher_for(api, consumer, fast(inactivity_timeout=0.3))
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        # Bookmarks alone, over more than three inactivity timeouts of no object changes.
        await eventually(lambda: watcher.stats.bookmarks >= 20)
    assert watcher.stats.inactivity_restarts == 0
    assert watcher.stats.watch_starts == 1


async def test_500s_for_30_simulated_seconds_back_off_and_recover(tmp_path: Path, consumer: Consumer) -> None:
    clock = FakeClock()
    sim = SimKubeServer(clock=clock)
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    try:
        sim.create(JOBS, job("a"))
        sim.fail_requests(500, seconds=30)
        watcher = watcher_for(api, consumer, WatchOptions(sleep=clock.sleep, rng=random.Random(3)))
        async with running(watcher.run()):
            await asyncio.wait_for(watcher.synced.wait(), 5)
            sim.create(JOBS, job("b"))
            await consumer.wait_for(lambda: converged(consumer, sim))
    finally:
        await api.close()
        await sim.stop()
    delays = clock.sleeps
    # It kept trying until the failures ended, and not one pause longer.
    assert sum(delays) >= 30 > sum(delays[:-1])
    assert sim.stats.failed == len(delays)
    reference = Backoff(0.5, 2.0, 30.0, low=0.5, high=1.0)
    for attempt, delay in enumerate(delays, 1):
        assert reference.ceiling(attempt) / 2 <= delay <= reference.ceiling(attempt)


async def test_watch_reconnect_through_500s_delivers_what_happened_meanwhile(
    tmp_path: Path, consumer: Consumer
) -> None:
    clock = FakeClock()
    sim = SimKubeServer(clock=clock)
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    try:
        watcher = watcher_for(api, consumer, WatchOptions(sleep=clock.sleep, rng=random.Random(5)))
        async with running(watcher.run()):
            await asyncio.wait_for(watcher.synced.wait(), 5)
            await eventually(lambda: sim.open_watches == 1)
            sim.fail_requests(500, seconds=30)
            sim.drop_watches()
            for i in range(5):
                sim.create(JOBS, job(f"j{i}"))
            await consumer.wait_for(lambda: converged(consumer, sim))
    finally:
        await api.close()
        await sim.stop()
    assert len(consumer.objects["Job"]) == 5
    assert sim.stats.failed >= 1
    assert sum(clock.sleeps) >= 30
    # Through all of it the watcher resumed from its version: one LIST only.
    assert watcher.stats.lists == 1


async def test_restarted_watcher_catches_up_and_finds_deletions_made_while_down(
    sim: SimKubeServer, tmp_path: Path, consumer: Consumer
) -> None:
    watcher_stopped = asyncio.Event()

    async def produce(first: int, count: int, hold_at: int | None = None) -> None:
        for i in range(first, first + count):
            if i == hold_at:
                # Half the changes happen while the first watcher runs, half after it stopped.
                await watcher_stopped.wait()
            sim.create(JOBS, job(f"j{i}"))
            if i % 3 == 0:
                sim.patch(JOBS, "ml", f"j{i}", FINISHED)
            if i % 5 == 4:
                sim.delete(JOBS, "ml", f"j{i - 2}")
            await asyncio.sleep(0)

    config = sim.kubeconfig(tmp_path / "kubeconfig")
    api = await load_api_client(config)
    first = watcher_for(api, consumer, fast())
    async with running(first.run()):
        await asyncio.wait_for(first.synced.wait(), 5)
        producer = asyncio.create_task(produce(0, 200, hold_at=100))
        await consumer.wait_for(lambda: len(consumer.types) >= 30)
    await api.close()
    watcher_stopped.set()
    await producer
    seen_before = consumer_names(consumer)
    alive = {o["metadata"]["name"]: o["metadata"]["uid"] for o in sim.store.objects(JOBS)}
    removed_while_down = {alive[name] for name in ("j0", "j6", "j9")}
    for name in ("j0", "j6", "j9"):
        sim.delete(JOBS, "ml", name)

    api = await load_api_client(config)
    second = watcher_for(api, consumer, fast())
    try:
        async with running(second.run()):
            await asyncio.wait_for(second.synced.wait(), 5)
            await produce(200, 20)
            await consumer.wait_for(lambda: converged(consumer, sim))
    finally:
        await api.close()
    assert {"j0", "j6", "j9"} <= seen_before
    assert removed_while_down <= consumer.gone_at_relist["Job"]
    assert len(consumer.objects["Job"]) == len(sim.store.objects(JOBS))


def consumer_names(consumer: Consumer) -> set[str]:
    return {o["metadata"]["name"] for o in consumer.objects["Job"].values()}


async def test_namespaces_filter_watches_each_namespace_and_relists_them_together(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    for namespace in ("a", "b", "c"):
        for i in range(3):
            sim.create(JOBS, job(f"{namespace}{i}", namespace=namespace))
    sleep = GatedSleep()
    watcher = watcher_for(api, consumer, fast(sleep=sleep), namespaces=["a", "b"])

    def expected() -> dict[str, str]:
        return {
            o["metadata"]["uid"]: o["metadata"]["resourceVersion"]
            for o in sim.store.objects(JOBS)
            if o["metadata"]["namespace"] in ("a", "b")
        }

    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        await eventually(lambda: sim.open_watches == 2)
        sim.create(JOBS, job("a-new", namespace="a"))
        sim.create(JOBS, job("c-new", namespace="c"))
        await consumer.wait_for(lambda: consumer.versions("Job") == expected())
        # A 410 in one namespace relists both, so the reconcile sees the complete set.
        sim.drop_watches()
        await asyncio.wait_for(sleep.paused.wait(), 5)
        gone = sim.delete(JOBS, "b", "b1")["metadata"]["uid"]
        sim.compact()
        sleep.gate.set()
        await consumer.wait_for(
            lambda: consumer.relists["Job"] == 2 and consumer.versions("Job") == expected()
        )
    assert {o["metadata"]["namespace"] for o in consumer.objects["Job"].values()} == {"a", "b"}
    assert consumer.gone_at_relist["Job"] == {gone}
    assert watcher.stats.relists == 1


async def test_a_list_is_streamed_page_by_page_and_restarts_when_its_continue_token_expires(
    sim: SimKubeServer, api: ApiClient
) -> None:
    for i in range(20):
        sim.create(JOBS, job(f"j{i:02d}"))
    first_uid = sim.store.get(JOBS, "ml", "j00")["metadata"]["uid"]
    consumer = Consumer()
    pages_when_first_seen: list[int] = []

    async def on_event(kind: str, event_type: str, obj: dict[str, object]) -> None:
        if not pages_when_first_seen:
            # The first object arrives before the second page is asked for: nothing waits for the
            # whole list. Then j00 is deleted and history compacted: the next page's token expires.
            pages_when_first_seen.append(sim.stats.lists)
            sim.delete(JOBS, "ml", "j00")
            sim.compact()
        await consumer.on_event(kind, event_type, obj)

    watcher = ResourceWatcher(api, kube.JOBS, on_event, consumer.on_relist, options=fast(page_size=7))
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        # Page one again, then the rest: j00 is reported gone at the relist, everything else is held.
        await consumer.wait_for(lambda: converged(consumer, sim))
    assert pages_when_first_seen == [1]
    assert sim.stats.gone == 1 and watcher.stats.failures == 1
    assert consumer.gone_at_relist["Job"] == {first_uid}
    assert consumer.relists["Job"] == 1 and watcher.stats.lists == 1


async def test_a_consumer_of_pages_takes_each_page_whole(sim: SimKubeServer, api: ApiClient) -> None:
    for i in range(20):
        sim.create(JOBS, job(f"j{i:02d}"))
    consumer = Consumer()
    pages: list[tuple[int, int]] = []

    async def on_listed(kind: str, objects: list[dict[str, object]]) -> None:
        # Whole objects are not fetched ahead: the next page is asked for once this one is taken.
        pages.append((len(objects), sim.stats.lists))
        for obj in objects:
            await consumer.on_event(kind, "SYNC", obj)

    watcher = ResourceWatcher(
        api, kube.JOBS, consumer.on_event, consumer.on_relist, options=fast(page_size=7), on_listed=on_listed
    )
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        assert converged(consumer, sim)
        sim.create(JOBS, job("later"))
        await consumer.wait_for(lambda: converged(consumer, sim))
    assert pages == [(7, 1), (7, 2), (6, 3)]
    assert consumer.types == ["SYNC"] * 20 + ["ADDED"]  # watch events go to on_event, one by one
    assert consumer.relists["Job"] == 1


async def test_a_metadata_list_asks_for_its_next_page_while_one_is_read(
    sim: SimKubeServer, api: ApiClient
) -> None:
    for i in range(20):
        sim.create(JOBS, job(f"j{i:02d}"))
    pages = kube_protocol.list_pages(api, kube.JOBS, None, page_size=7, request_timeout=5, metadata_only=True)
    seen: list[int] = []
    async with contextlib.aclosing(pages):
        async for page in pages:
            assert page.partial
            seen.append(len(page.items))
            if len(seen) == 1:
                await eventually(lambda: sim.stats.lists == 2, what="the second page asked for")
    assert seen == [7, 7, 6] and sim.stats.metadata_lists == 3


def uid_of(sim: SimKubeServer, name: str) -> str:
    uid: str = sim.store.get(JOBS, "ml", name)["metadata"]["uid"]
    return uid


async def test_a_consumer_holding_the_cluster_is_sent_only_what_changed_while_it_was_away(
    sim: SimKubeServer, api: ApiClient
) -> None:
    for i in range(20):
        sim.create(JOBS, job(f"j{i:02d}"))
    held = server_versions(sim, JOBS)
    sim.patch(JOBS, "ml", "j03", FINISHED)
    sim.patch(JOBS, "ml", "j11", FINISHED)
    gone = uid_of(sim, "j07")
    sim.delete(JOBS, "ml", "j07")
    sim.create(JOBS, job("j20"))
    consumer = Knowing(held)
    watcher = watcher_for(api, consumer, fast(page_size=7), known=consumer)
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
    # Three pages of metadata, then the three objects it lacked, asked for by name.
    assert (sim.stats.lists, sim.stats.metadata_lists, sim.stats.gets) == (3, 3, 3)
    assert consumer_names(consumer) == {"j03", "j11", "j20"}
    assert consumer.types == ["SYNC"] * 3
    current = server_versions(sim, JOBS)
    assert consumer.versions("Job") == {uid: current[uid] for uid in consumer.objects["Job"]}
    assert consumer.passed_over_counts == [17]
    # The relist names everything there is: the deleted job is not in it.
    assert consumer.present == set(current) and gone not in consumer.present


async def test_an_object_changed_after_the_list_is_caught_up_at_its_fetched_state(
    sim: SimKubeServer, api: ApiClient
) -> None:
    """The LIST's version is where the watch starts; an object fetched after it may be newer, so
    its watch events up to the state handed over are passed over (the consumer never sees an older
    state after a newer one); one deleted before its fetch comes as the watch's DELETED."""
    for i in range(5):
        sim.create(JOBS, job(f"j{i}"))
    held = server_versions(sim, JOBS)
    changing, deleted = uid_of(sim, "j1"), uid_of(sim, "j2")
    held[changing] = held[deleted] = "0"  # stored from versions the cluster has moved past

    def meanwhile(lacking: list[dict[str, object]]) -> None:
        # Called with the list's metadata, before anything is fetched.
        sim.patch(JOBS, "ml", "j1", {"metadata": {"labels": {"step": "1"}}})
        sim.delete(JOBS, "ml", "j2")

    consumer = Knowing(held, meanwhile)
    watcher = watcher_for(api, consumer, fast(), known=consumer)
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        sim.patch(JOBS, "ml", "j1", {"metadata": {"labels": {"step": "2"}}})
        await consumer.wait_for(lambda: consumer.types[-1:] == ["MODIFIED"])
    assert consumer.types == ["SYNC", "DELETED", "MODIFIED"]
    assert consumer.objects["Job"][changing]["metadata"]["labels"] == {"step": "2"}
    assert consumer.deleted["Job"] == {deleted} and sim.stats.gets == 2


@pytest.mark.parametrize(
    "why", ["too many changed", "a name that is no object name", "an older server", "a role without get"]
)
async def test_a_list_too_far_from_what_the_consumer_holds_is_taken_whole(
    sim: SimKubeServer, api: ApiClient, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    for i in range(20):
        sim.create(JOBS, job(f"j{i:02d}"))
    if why == "a name that is no object name":
        sim.create(JOBS, job("Not_A_Name"))
    held = server_versions(sim, JOBS)
    stale = [uid_of(sim, name) for name in ("j00", "j01", "j02")]
    if why == "too many changed":
        held.update(dict.fromkeys(stale, "0"))
    elif why == "a name that is no object name":
        held[uid_of(sim, "Not_A_Name")] = "0"
    elif why == "an older server":
        # A server that does not serve metadata-only lists answers with whole objects.
        monkeypatch.setattr(kube_api, "_wants_metadata_only", lambda request: False)
    else:
        held[stale[0]] = "0"

        def forbidden(rt: object, namespace: str | None, name: str) -> web.Response:
            refused.append(name)
            status = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "cannot get jobs"}
            return web.json_response(status, status=403)

        monkeypatch.setattr(sim, "_get_one", forbidden)
    refused: list[str] = []
    consumer = Knowing(held)
    watcher = watcher_for(api, consumer, fast(page_size=7, fetch_max=2), known=consumer)
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        assert converged(consumer, sim)
    assert consumer.types == ["SYNC"] * len(server_versions(sim, JOBS))
    assert sim.stats.gets == 0 and consumer.passed_over_counts == []
    assert refused == (["j00"] if why == "a role without get" else [])


async def test_label_selector_limits_what_is_watched(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer
) -> None:
    sim.create(JOBS, job("mine", team="face"))
    sim.create(JOBS, job("theirs", team="nlp"))
    resource = kube.Resource("Job", "batch", "v1", "jobs", label_selector="team=face")
    watcher = ResourceWatcher(api, resource, consumer.on_event, consumer.on_relist, options=fast())
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.synced.wait(), 5)
        sim.create(JOBS, job("mine-2", team="face"))
        sim.create(JOBS, job("theirs-2", team="nlp"))
        # A selected job after the unselected one: once it is here, "theirs-2" would have been too.
        sim.create(JOBS, job("mine-3", team="face"))
        await consumer.wait_for(lambda: "mine-3" in consumer_names(consumer))
    assert consumer_names(consumer) == {"mine", "mine-2", "mine-3"}
    assert consumer.types == ["SYNC", "ADDED", "ADDED"]


@pytest.mark.parametrize("error", [RuntimeError("bug"), TimeoutError("database timed out")])
async def test_consumer_errors_propagate_instead_of_passing_for_stream_trouble(
    sim: SimKubeServer, api: ApiClient, consumer: Consumer, error: Exception
) -> None:
    async def failing(kind: str, event_type: str, obj: dict[str, object]) -> None:
        if event_type == "ADDED":
            raise error
        await consumer.on_event(kind, event_type, obj)

    watcher = ResourceWatcher(api, kube.JOBS, failing, consumer.on_relist, options=fast())
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.synced.wait(), 5)
    sim.create(JOBS, job("a"))
    done, _ = await asyncio.wait([task], timeout=5)
    assert done == {task}
    assert task.exception() is error
    assert watcher.stats.inactivity_restarts == 0
    assert watcher.stats.watch_starts == 1
