"""Delete kfed-manager's copies in the workers: of a finished or withdrawn Workload, strays on workers that do not
hold it, and garbage (copies no manager Workload holds, swept periodically and after a Workload's deletion).

A copy is deleted only while it is still the same object (uid precondition), so a same-named object someone else
created since is never touched; the manager's Workload cache decides what belongs where
(:func:`manager.decisions.lifecycle.copy_belongs`).

The Workload copies of finished workloads are the exception, and the bulk: one per Job. Nothing waits for them
(their Jobs ended, and the worker's garbage collector takes each Job copy with its Workload copy), so they are
gathered for up to :data:`BATCH_WINDOW_SECONDS` per worker and namespace and deleted with one ``deletecollection``
whose label selector names this manager's origin and the finished Workloads' uids
(:func:`manager.decisions.remote_copies.copies_selector`): in a burst, one request per worker and namespace a
second instead of one per Job. Each worker's and namespace's batches go on their own
(:class:`federation.kube.batches.Batches`), so a worker that stopped answering holds up only its own. The selector
stands in for the uid precondition: a copy of a finished Workload is never made again, and no one else's object
carries our origin and that uid.

A worker whose kubeconfig's identity may not ``deletecollection`` Workloads (Kueue's documented MultiKueue role
grants ``delete`` only) gets one DELETE per copy for the next :data:`REFUSAL_RETRY_SECONDS`, and kfed-manager's log
says what to grant. A batch that fails otherwise is logged, and RemoteSync looks at those workloads again after
``COPIES_LOOK_AGAIN_SECONDS`` and sends their copies again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import structlog

from federation.api.labels import PREBUILT_WORKLOAD_LABEL
from federation.kube.api import Propagation
from federation.kube.batches import Batches
from federation.kube.errors import Conflict, Forbidden, KubeError
from federation.kube.overlay import WriteOverlay
from federation.kube.resources import JOBS, WORKLOADS, Resource
from federation.protocol import MANAGER_UID_LABEL
from manager.concurrently import concurrently
from manager.decisions.lifecycle import adoptions, copy_belongs, held_worker
from manager.decisions.remote_copies import copies_selector, owned_by
from manager.decisions.shared_servers import same_object
from manager.worker_connection import WorkerConnection
from manager.workers import WorkerPool

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

DELETE_RESEND_SECONDS = 10.0
"""A copy whose delete was accepted is not sent another delete for this long (its foreground deletion is under way
while the watch catches up); after that a copy still there gets one again."""


BATCH_WINDOW_SECONDS = 1.0
"""How long a finished workload's Workload copy waits for others in the same worker and namespace, to be deleted
with them in one request."""
BATCH_MAX = 50
"""The most copies one ``deletecollection`` names (their uids are in the request's URL)."""
REFUSAL_RETRY_SECONDS = 600.0
"""How long a worker that refused ``deletecollection`` gets one DELETE per copy before a batch is tried again (its
admin may have granted the verb since)."""


class CopyCleaner:
    def __init__(
        self,
        *,
        pool: WorkerPool,
        workloads: WriteOverlay,
        origin: str,
        batch_window: float = BATCH_WINDOW_SECONDS,
    ) -> None:
        self._pool = pool
        self._workload_view = workloads
        """The manager Workloads (with this process's writes laid over): what holds a copy."""
        self._origin = origin
        self._deletes_sent: dict[str, float] = {}
        """uid → when its delete was sent: a pass before the watch shows the deletion does not send it again."""
        self._batches: Batches[tuple[str, str], Obj] = Batches(
            "finished copies", self._delete_batch, window=batch_window
        )
        """Finished Workload copies by (worker, namespace), by manager Workload uid; a worker that stopped answering
        holds up only its own."""
        self._refused: dict[str, float] = {}
        """Fingerprint of a worker connection that refused ``deletecollection`` → when: one DELETE per copy there, for
        :data:`REFUSAL_RETRY_SECONDS`."""

    async def run(self) -> None:
        """Send the finished copies' batches, each worker's and namespace's on its own (until cancelled)."""
        await self._batches.run()

    def _batchable(self, conn: WorkerConnection, copy: Obj, *, finished: bool) -> bool:
        labels = copy["metadata"].get("labels") or {}
        return (
            finished
            and self._batches.running
            and copy.get("kind") == "Workload"
            and bool(labels.get(MANAGER_UID_LABEL))
            and not self._refuses(conn)
        )

    def _refuses(self, conn: WorkerConnection) -> bool:
        return time.monotonic() - self._refused.get(conn.fingerprint, -math.inf) < REFUSAL_RETRY_SECONDS

    def _queue(self, conn: WorkerConnection, copy: Obj) -> None:
        meta = copy["metadata"]
        self._batches.add((conn.name, meta["namespace"]), meta["labels"][MANAGER_UID_LABEL], copy)
        self._mark_sent(str(meta.get("uid") or ""))

    def _mark_sent(self, uid: str) -> None:
        """Remember that ``uid``'s delete went out now, forgetting the deletes older than
        :data:`DELETE_RESEND_SECONDS` (so the map holds only the last few seconds' deletes, batched or not)."""
        now = time.monotonic()
        self._deletes_sent = {u: t for u, t in self._deletes_sent.items() if now - t < DELETE_RESEND_SECONDS}
        if uid:
            self._deletes_sent[uid] = now

    async def _delete_batch(self, where: tuple[str, str], copies: list[Obj]) -> None:
        """Delete these finished Workload copies in ``deletecollection`` requests of up to :data:`BATCH_MAX`; never
        raises (a failure is logged, and the workloads' next pass sends their copies again)."""
        worker, namespace = where
        conn = self._pool.connections.get(worker)
        names = sorted(str(copy["metadata"]["name"]) for copy in copies)
        if conn is None or not conn.connected:
            self._forget_sent(copies)
            log.info("finished copies left for the next pass: worker not connected", cluster=worker, names=names)
            return
        if self._refuses(conn):
            await self._delete_one_by_one(conn, copies)
            return
        for start in range(0, len(copies), BATCH_MAX):
            chunk = copies[start : start + BATCH_MAX]
            selector = copies_selector(
                origin=self._origin,
                manager_workload_uids=(str(copy["metadata"]["labels"][MANAGER_UID_LABEL]) for copy in chunk),
            )
            try:
                deleted = await conn.api.delete_collection(
                    WORKLOADS, namespace=namespace, label_selector=selector, propagation_policy=Propagation.BACKGROUND
                )
            except Exception as err:  # refused, an outage, a closed connection
                if isinstance(err, Forbidden) or (isinstance(err, KubeError) and err.status == 405):
                    self._refused[conn.fingerprint] = time.monotonic()
                    log.warning(
                        "worker refuses deletecollection of Workload copies: deleting them one by one",
                        cluster=worker,
                        error=str(err)[:300],
                        grant="verb deletecollection on workloads.kueue.x-k8s.io to the kubeconfig's identity",
                    )
                    await self._delete_one_by_one(conn, copies[start:])
                    return
                self._forget_sent(chunk)
                log.warning(
                    "deleting finished copies failed; sent again on the next pass",
                    cluster=worker,
                    namespace=namespace,
                    names=names,
                    error=f"{type(err).__name__}: {err}"[:300],
                )
                continue
            log.info(
                "deleted remote objects",
                cluster=worker,
                kind="Workload",
                namespace=namespace,
                names=sorted(str(copy["metadata"]["name"]) for copy in chunk),
                deleted=deleted,
                reason="the workloads finished",
            )

    async def _delete_one_by_one(self, conn: WorkerConnection, copies: list[Obj]) -> None:
        self._forget_sent(copies)
        try:
            await self.delete_copies(conn, copies, why="the workload finished", finished=True)
        except Exception as err:  # the next pass sends them again
            log.warning("deleting finished copies failed; sent again on the next pass", cluster=conn.name,
                        error=f"{type(err).__name__}: {err}"[:300])  # fmt: skip

    def _forget_sent(self, copies: Sequence[Obj]) -> None:
        for copy in copies:
            self._deletes_sent.pop(str(copy["metadata"].get("uid") or ""), None)

    async def delete_strays(self, key: str, *, job_name: str | None, holder: str | None) -> int:
        """Delete copies of this workload on reachable workers other than the one holding it (e.g. left on a worker
        that was unreachable when the workload was requeued): they are found the moment that worker's caches list
        them again, so nothing stale keeps running there. Returns how many there were."""
        count = 0
        namespace, name = key.split("/", 1)
        for conn in list(self._pool.connections.values()):
            if holder in self._pool.names_reaching(conn.name) or not conn.connected or conn.manager_cluster:
                continue  # (a connection that reaches the manager cluster itself holds no copies of ours)
            found = [conn.workloads.store.get_by_name(name, namespace=namespace)]
            if job_name is not None:
                found.append(conn.jobs.store.get_by_name(job_name, namespace=namespace))
            strays = [
                copy
                for copy, resource in zip(found, (WORKLOADS, JOBS), strict=False)
                if copy is not None and not self._seen_by_holder(conn, resource, copy, holder)
            ]
            if strays:
                count += len(strays)
                await self.delete_copies(conn, strays, why="stale copy: the workload is not held by this worker")
        return count

    async def delete_copies(
        self, conn: WorkerConnection, copies: Sequence[Obj | None], *, why: str, finished: bool = False
    ) -> int:
        """Delete these objects of ours from the worker, each only if it is still the same object (uid
        precondition): a same-named object created since by someone else is never touched. Jobs go with their
        pods first (foreground), so "gone from the cache" means nothing of it runs any more; a copy owned by another
        copy deleted here (a stock Kueue worker's Workload copy by its Job copy, a kfed-agent worker's Job copy by
        its Workload copy once finished) is deleted by the worker's garbage collector with it. The copies of a
        ``finished`` workload go in the background: its Job ended, no pod of it runs, and waiting for the garbage
        collector to delete every pod first cost the worker's apiserver a finalizer write and several reads per
        Job. A finished workload's Workload copy is queued for the next batch (see the module's docstring) while
        :meth:`run` runs; returns how many copies wait for a batch, queued now or on an earlier pass (the
        caller looks at them again once :data:`DELETE_RESEND_SECONDS` have passed, and a copy still there is sent
        again: so a finished workload is looked at again for as long as its copies last)."""

        def recently_sent(copy: Obj) -> bool:
            uid = str(copy["metadata"].get("uid") or "")
            return bool(uid) and time.monotonic() - self._deletes_sent.get(uid, -math.inf) < DELETE_RESEND_SECONDS

        async def delete(copy: Obj) -> None:
            meta = copy["metadata"]
            resource = JOBS if copy.get("kind") == "Job" else WORKLOADS
            if recently_sent(copy):
                return
            try:
                await conn.api.delete(
                    resource,
                    meta["name"],
                    namespace=meta["namespace"],
                    uid=meta.get("uid"),
                    propagation_policy=Propagation.FOREGROUND
                    if resource is JOBS and not finished
                    else Propagation.BACKGROUND,
                    missing_ok=True,
                )
            except Conflict:
                return  # replaced by another object meanwhile: not ours to delete
            self._mark_sent(str(meta.get("uid") or ""))
            log.info("deleted remote object", cluster=conn.name, kind=resource.kind, name=meta["name"], reason=why)

        present = [copy for copy in copies if copy is not None]

        def goes_with_its_owner(copy: Obj) -> bool:
            """A copy owned by another copy deleted here, or by one whose delete was sent lately (a background
            deletion is gone from the cache before the garbage collector took its dependents): the collector deletes
            it (after ``DELETE_RESEND_SECONDS`` kfed does, should it still be there). A Job copy is left to the
            collector only when the workload finished: otherwise it goes in the foreground, so that "gone" means no
            pod of it runs any more."""
            if copy.get("kind") == "Job" and not finished:
                return False
            if any(owned_by(copy, owner) for owner in present if owner is not copy):
                return True
            now = time.monotonic()
            owners = (copy["metadata"].get("ownerReferences")) or ()
            return any(
                now - self._deletes_sent.get(str(ref.get("uid")), -math.inf) < DELETE_RESEND_SECONDS for ref in owners
            )

        doomed = [c for c in present if not c["metadata"].get("deletionTimestamp") and not goes_with_its_owner(c)]
        batched: list[Obj] = []
        alone: list[Obj] = []
        for copy in doomed:
            (batched if self._batchable(conn, copy, finished=finished) else alone).append(copy)
        for copy in batched:
            if not recently_sent(copy):
                self._queue(conn, copy)
        await concurrently(*(partial(delete, copy) for copy in alone))
        return len(batched)

    def _adoptable(self, conn: WorkerConnection, remote: Obj, manager: Obj | None, key: str) -> bool:
        """Whether ``remote`` is a copy a stock Kueue manager made of the manager Workload ``manager`` before
        kfed-manager took over (``lifecycle.adoptions``)."""
        is_workload = remote.get("kind") == "Workload"
        workload_copy = remote if is_workload else conn.workload_view.get(key)
        job_copy = None if is_workload else remote
        found = adoptions(workload_copy, job_copy, workload=manager, worker=conn.name, origin=self._origin)
        return any(copy is remote for copy in found)

    def _seen_by_holder(self, conn: WorkerConnection, resource: Resource, copy: Obj, holder: str | None) -> bool:
        """The copy seen through ``conn`` is one the worker holding its Workload (``holder``) sees too: the two names
        reach one API server (``shared_servers.same_object``), and deleting it here would delete the holder's copy.
        The pool is told, and the copy left alone. A holder without a connection counts as seeing it when it was
        last connected to the server ``conn`` reaches."""
        if holder is None or holder == conn.name:
            return False
        other = self._pool.connections.get(holder)
        if other is None:
            # No connection of the holder to compare with (its MultiKueueCluster deleted, say renamed, or its
            # kubeconfig broken): the server it was last connected to tells. Its workloads wait there until the
            # worker-lost timeout, as for any worker that cannot be used.
            return self._pool.last_reached(holder) == conn.address
        meta = copy["metadata"]
        view = other.workload_view if resource is WORKLOADS else other.job_view
        if not same_object(copy, view.get_by_name(meta["name"], namespace=meta["namespace"])):
            return False
        self._pool.same_server(conn.name, holder)
        return True

    async def collect_garbage(self, *, only_key: str | None = None, job_name: str | None = None) -> int:
        """Delete our copies that no manager Workload holds on that worker (``copy_belongs``); returns how many. With
        ``only_key``, only that Workload's copies are looked at: its Workload copy by key, and its Job copy by
        ``job_name`` when known, else among the Jobs of its namespace (a sweep over every copy per deleted Workload
        made deleting many Workloads quadratic)."""
        deleted = 0
        for conn in list(self._pool.connections.values()):
            if not conn.connected or conn.manager_cluster:
                continue  # what carries our origin label in the manager cluster itself is not a copy of ours
            names = self._pool.names_reaching(conn.name)
            for resource, remote in garbage_candidates(conn, only_key=only_key, job_name=job_name):
                key = remote_workload_key(remote)
                if key is None or (only_key is not None and key != only_key):
                    continue
                manager = self._workload_view.get(key)
                labels = remote["metadata"].get("labels") or {}
                if copy_belongs(manager, worker_names=names, manager_uid=labels.get(MANAGER_UID_LABEL)):
                    continue
                if MANAGER_UID_LABEL not in labels and self._adoptable(conn, remote, manager, key):
                    continue  # a stock Kueue manager's copy of that Workload: the remote sync adopts it
                if manager is not None and self._seen_by_holder(conn, resource, remote, held_worker(manager)):
                    continue
                meta = remote["metadata"]
                await conn.api.delete(
                    resource,
                    meta["name"],
                    namespace=meta["namespace"],
                    uid=meta.get("uid"),
                    propagation_policy=Propagation.BACKGROUND,
                    missing_ok=True,
                )
                deleted += 1
                log.info("garbage-collected remote object", cluster=conn.name, kind=resource.kind, workload=key)
        return deleted


def garbage_candidates(
    conn: WorkerConnection, *, only_key: str | None, job_name: str | None
) -> list[tuple[Resource, Obj]]:
    """The copies in ``conn``'s worker that :meth:`CopyCleaner.collect_garbage` looks at."""
    if only_key is None:
        return [(JOBS, job) for job in conn.jobs.store] + [(WORKLOADS, wl) for wl in conn.workloads.store]
    namespace = only_key.split("/", 1)[0]
    jobs = (
        [conn.jobs.store.get_by_name(job_name, namespace=namespace)]
        if job_name is not None
        else conn.jobs.store.list(namespace=namespace)
    )
    found = [(JOBS, job) for job in jobs if job is not None]
    workload = conn.workloads.store.get(only_key)
    return [*found, (WORKLOADS, workload)] if workload is not None else found


def remote_workload_key(remote: Obj) -> str | None:
    """The manager Workload key a remote Workload or Job copy belongs to."""
    meta = remote["metadata"]
    if remote.get("kind") == "Workload":
        return f"{meta['namespace']}/{meta['name']}"
    name = (meta.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL)
    return f"{meta['namespace']}/{name}" if name else None
