"""The node's pod directories: when the kubelet's list is read again, what a failure leaves."""

from __future__ import annotations

from typing import Any

from inno_notify.service.agent_pods import PolledPods, WatchedPods
from tests.service.agent_support import POD_A, POD_B, UID_A, UID_B


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Kubelet:
    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods: list[Any] = list(pods)
        self.failure: Exception | None = None
        self.calls = 0

    async def __call__(self) -> list[Any]:
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        return list(self.pods)


async def test_read_again_only_for_unknown_pods_and_not_too_often() -> None:
    kubelet, clock = Kubelet(POD_A, {"metadata": "junk"}), Clock()
    pods = PolledPods(kubelet, min_refresh_seconds=30, max_age_seconds=600, clock=clock)
    lookup = await pods.resolve({UID_A})
    assert lookup.error is None and lookup.pods is not None and set(lookup.pods) == {UID_A}
    assert pods.rejected == 1

    clock.now = 10
    kubelet.pods.append(POD_B)
    lookup = await pods.resolve({UID_A, UID_B})
    assert lookup.pods is not None and set(lookup.pods) == {UID_A}
    assert kubelet.calls == 1  # unknown, but read 10 s ago

    clock.now = 31
    lookup = await pods.resolve({UID_A, UID_B})
    assert lookup.pods is not None and set(lookup.pods) == {UID_A, UID_B} and kubelet.calls == 2

    clock.now = 500
    await pods.resolve({UID_A})
    assert kubelet.calls == 2  # everything known: no reason to ask
    clock.now = 631
    await pods.resolve({UID_A})
    assert kubelet.calls == 3  # but not forever: pods that left the node are forgotten


async def test_a_failed_read_keeps_the_last_list_and_says_why() -> None:
    kubelet, clock = Kubelet(POD_A), Clock()
    pods = PolledPods(kubelet, min_refresh_seconds=1, clock=clock)
    await pods.resolve({UID_A})
    kubelet.failure = ConnectionRefusedError("connection refused")
    clock.now = 5
    lookup = await pods.resolve({UID_A, UID_B})
    assert lookup.error == "connection refused"
    assert lookup.pods is not None and set(lookup.pods) == {UID_A}


async def test_no_list_ever_read() -> None:
    kubelet = Kubelet()
    kubelet.failure = TimeoutError()
    lookup = await PolledPods(kubelet, clock=Clock()).resolve({UID_A})
    assert lookup.pods is None and lookup.error == "TimeoutError"


async def test_watched_pods_follow_events_and_relists() -> None:
    pods = WatchedPods()
    assert (await pods.resolve({UID_A})).pods is None  # not synced: nothing to say yet
    # A list hands its objects over as SYNC events first, then the uids it held.
    await pods.on_event("Pod", "SYNC", POD_A)
    await pods.on_event("Pod", "SYNC", {"bad": 1})
    await pods.on_event("Pod", "SYNC", POD_B)
    await pods.on_relist("Pod", frozenset({UID_A}))  # POD_B was gone by the end of the list
    assert pods.rejected == 1 and pods.size == 1
    await pods.on_event("Pod", "ADDED", POD_B)
    lookup = await pods.resolve({UID_A, UID_B})
    assert lookup.pods is not None and {p.name for p in lookup.pods.values()} == {"train-a", "eval-b"}
    await pods.on_event("Pod", "DELETED", POD_A)
    await pods.on_event("Pod", "MODIFIED", "not a pod")  # type: ignore[arg-type]
    assert pods.size == 1 and pods.rejected == 2
