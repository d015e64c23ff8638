"""Queue status and finalizer writes: a second write before the watch shows the first goes at the written version;
a finalizer write refused as stale is reported for a new decision, not taken as written."""

from __future__ import annotations

from typing import Any

import anyio

from federation.kube.errors import Conflict
from federation.kube.overlay import WriteOverlay
from federation.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES
from federation.kube.status_writes import write_finalizers, write_status_patches
from federation.kube.store import Store


class RecordingApi:
    """Answers each status patch with the object at the next resourceVersion, and records what was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._version = 10

    async def patch_status(self, _resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.sent.append(body["metadata"]["resourceVersion"])
        self._version += 1
        meta = {"name": name, "namespace": kw.get("namespace"), "resourceVersion": str(self._version)}
        return {"metadata": meta, "status": body["status"]}


def test_a_second_status_write_before_the_watch_catches_up_uses_the_written_version() -> None:
    store = Store()
    store.upsert({"metadata": {"name": "lq", "namespace": "ns", "resourceVersion": "3"}, "status": {}})
    view = WriteOverlay(store)
    api = RecordingApi()

    async def twice() -> None:
        for pending in (1, 2):  # the cache still holds version 3 both times
            current = {"ns/lq": next(iter(view))}
            patches = {"ns/lq": {"pendingWorkloads": pending}}
            assert await write_status_patches(
                api,  # type: ignore[arg-type]
                LOCAL_QUEUES,
                patches,
                current=current,
                field_manager="kfed",
                overlay=view,
            )

    anyio.run(twice)
    assert api.sent == ["3", "11"]


class ConflictingApi:
    """Refuses every patch as made on a stale resourceVersion, as the apiserver does after another writer."""

    async def patch(self, _resource: Any, name: str, _body: dict[str, Any], **_kw: Any) -> dict[str, Any]:
        raise Conflict(f"the object {name} has been modified")


def test_a_finalizer_write_refused_as_stale_asks_for_a_new_decision() -> None:
    store = Store()
    store.upsert({"metadata": {"name": "cq", "resourceVersion": "3", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}})
    view = WriteOverlay(store)

    async def write() -> tuple[bool, dict[str, dict[str, Any]]]:
        return await write_finalizers(
            ConflictingApi(),  # type: ignore[arg-type]
            CLUSTER_QUEUES,
            {"cq": []},
            current={"cq": next(iter(view))},
            field_manager="kfed",
            overlay=view,
        )

    all_written, written = anyio.run(write)
    assert (all_written, written) == (False, {})
    assert view.pending == 0
