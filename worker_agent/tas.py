"""Topology-aware scheduling on the worker: Node/Pod/Topology watches, the ungater and node-failure repair.

Why this module exists: it is the I/O side of TAS in the agent. It owns the watches TAS needs (Nodes; bound,
non-terminal Pods with a field selector; Pods of TAS pod sets with Kueue's ``kueue.x-k8s.io/tas`` label;
Topologies), feeds their events into ``TopologyIndex``, and runs, under the reconciler's lock:

* ``placer``: the admission veto over the snapshots (``decisions.tas_admission``), after re-deriving the
  assumed usage of admitted workloads;
* ``ungate_pass``: pins gated pods to the domains of their assignment and removes the gate
  (``decisions.tas_ungate``); the kube-scheduler binds them;
* ``repair_pass``: finds failed nodes under admitted TAS workloads and writes the replacement or the
  ``NodeFailures`` eviction (``decisions.tas_failures``), then retires the pods left on failed nodes (tracking
  finalizer dropped, DisruptionTarget, deleted) so the Job controller replaces them at once; pods there that the
  taint manager or PodGC is already deleting lose the tracking finalizer too.

Every decision is re-derived from the caches on each pass (level-triggered); only the leader runs this.

The Node and bound-Pod watches run only while some ResourceFlavor names a topology (``run_cluster_watches``):
without one, TAS has nothing to place, and they would only cost the worker's apiserver a watch event for every pod
change in the cluster. Until they have listed, TAS workloads wait with a message saying so.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio
import structlog

from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import RESERVED, workload_key, workload_state
from federation.admission.queue_metrics import admitted_for, workload_labels
from federation.api.labels import HOSTNAME_LABEL
from federation.conditions import is_true
from federation.kube import resources as r
from federation.kube.api import KubeApi, PatchType
from federation.kube.cache import WatchCache, unsynced
from federation.kube.errors import Conflict, KubeError, NotFound
from federation.kube.recorder import EventRecorder
from federation.obs.metrics import Metrics
from federation.pod_injection import PODSET_LABEL, TAS_LABEL, TOPOLOGY_GATE, WORKLOAD_ANNOTATION
from federation.topology import summarize
from federation.topology.model import NODE_FAILURES_REASON
from federation.topology.report import summary_entry
from worker_agent.decisions.tas_admission import AsRun, TasPlacer, TasPodSet, admitted_tas_pod_sets, assumed_usage
from worker_agent.decisions.tas_failures import (
    PodSetRepair,
    assignment_hosts,
    current_unhealthy,
    disruption_patch,
    dying_but_tracked,
    judge_node,
    missing_pods,
    node_healthy,
    plan_repair,
    running_pods,
    untrack_patch,
)
from worker_agent.decisions.tas_objects import (
    COMPLETION_INDEX_LABEL,
    flavor_topology,
    pod_key,
    pod_live,
    pod_terminal,
    topology_levels,
)
from worker_agent.decisions.tas_ungate import PodView, plan_ungates, pod_domain
from worker_agent.overlay import RecentWrites

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
BOUND_PODS_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
DEFAULT_NODE_FAILURE_DELAY = 30.0
CLUSTER_WATCHES_WAITING = "kfed-agent is still listing the cluster's nodes and pods for topology-aware scheduling"
AGENT = "kfed-agent"


def _node_signature(node: Mapping[str, Any] | None) -> Any:
    """What of a Node matters to TAS (labels, taints, allocatable, readiness): heartbeats alone change nothing."""
    if node is None:
        return None
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    return (
        meta.get("labels"),
        (node.get("spec") or {}).get("taints"),
        (node.get("spec") or {}).get("unschedulable"),
        status.get("allocatable"),
        ready,
    )


def _booking_key(pod: Mapping[str, Any]) -> str | None:
    meta = pod.get("metadata") or {}
    workload = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
    if not workload:
        return None
    podset = (meta.get("labels") or {}).get(PODSET_LABEL) or "main"
    return f"{meta.get('namespace', '')}/{workload}/{podset}"


def _placed_on(pod: Mapping[str, Any]) -> str | None:
    """The node a pod is bound to, or pinned to by its hostname nodeSelector (ungated, not bound yet)."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName") or (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL)
    return str(node) if node else None


class Tas:
    def __init__(
        self,
        api: KubeApi,
        *,
        flavors: WatchCache,
        topologies: WatchCache,
        events: EventRecorder,
        metrics: Metrics,
        cluster: str,
        wake: Callable[..., None],
        node_failure_delay: float = DEFAULT_NODE_FAILURE_DELAY,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        from worker_agent.tas_index import TopologyIndex

        self.api = api
        self.flavors = flavors
        self.events = events
        self.metrics = metrics
        self.wake = wake
        self.delay = node_failure_delay
        self.clock = clock
        self.nodes = WatchCache(api, r.NODES)
        self.bound_pods = WatchCache(api, r.PODS, field_selector=BOUND_PODS_SELECTOR)
        self.tas_pods = WatchCache(api, r.PODS, label_selector=TAS_LABEL)
        self.topologies = topologies
        self.pod_writes = RecentWrites()
        self.as_run: AsRun | None = None
        """Each pod set as its pods will be created, from the latest quota state (LimitRange defaults, RuntimeClass
        overheads): what placement and the bookings count."""
        self.index = TopologyIndex()
        self.recheck_at: float | None = None
        self._log = log.bind(cluster=cluster)
        self._cluster_watching = False
        self._changed = anyio.Event()
        """Set (and replaced) when the TAS configuration changes or the on-demand watches have listed."""
        self.nodes.add_handler(self._on_node)
        self.bound_pods.add_handler(self._on_bound_pod)
        self.tas_pods.add_handler(self.pod_writes.observe)
        self.tas_pods.add_handler(lambda *_: self.wake())
        self.topologies.add_handler(self._on_config)
        self.flavors.add_handler(self._on_config)

    def caches(self) -> tuple[WatchCache, ...]:
        """The watches that always run (``run_cluster_watches`` runs the others; the Topologies are the world's)."""
        return (self.tas_pods,)

    def unsynced_cluster_watches(self) -> list[str]:
        """The on-demand watches that are wanted but have not listed yet (for readiness)."""
        if not self.wants_cluster_watches():
            return []
        return unsynced((self.nodes, self.bound_pods))

    def wants_cluster_watches(self) -> bool:
        """True while some ResourceFlavor names a topology."""
        return any(flavor_topology(raw) is not None for raw in self.flavors.store)

    def cluster_watches_synced(self) -> bool:
        return self._cluster_watching and self.nodes.synced and self.bound_pods.synced

    async def wait_cluster_watches(self) -> None:
        """Return once the on-demand watches are not wanted or have listed (the agent's start-up waits for this)."""
        while self.wants_cluster_watches() and not self.cluster_watches_synced():
            await self._changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def run_cluster_watches(self) -> None:
        """Run the Node and bound-Pod watches while :meth:`wants_cluster_watches`; stop and forget them when the
        last TAS flavor goes. Start it once the flavors have synced."""
        while True:
            while not self.wants_cluster_watches():
                await self._changed.wait()
            self._log.info("tas.cluster_watches_started", watches=[self.nodes.resource.label, "bound pods"])
            async with anyio.create_task_group() as tg:
                self._cluster_watching = True
                tg.start_soon(self.nodes.run)
                tg.start_soon(self.bound_pods.run)
                await self.nodes.wait_synced()
                await self.bound_pods.wait_synced()
                self.reconfigure()
                self.wake()
                self._notify()
                while self.wants_cluster_watches():
                    await self._changed.wait()
                tg.cancel_scope.cancel()
            self._cluster_watching = False
            self.nodes.reset()
            self.bound_pods.reset()
            self.reconfigure()
            self._log.info("tas.cluster_watches_stopped", reason="no ResourceFlavor names a topology")

    # -- events -----------------------------------------------------------------------------------------------

    def _on_node(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        self.index.node_event(event_type, obj)
        if event_type == "DELETED" or _node_signature(obj) != _node_signature(old):
            self.wake()

    def _on_bound_pod(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        self.index.pod_event(event_type, obj)
        if event_type != "MODIFIED":
            self.wake()

    def _on_config(self, *_: object) -> None:
        self._notify()
        self.reconfigure()
        self.wake()

    def reconfigure(self) -> None:
        tas_flavors = [f for f in (flavor_topology(raw) for raw in self.flavors.store) if f is not None]
        levels = {
            str((raw.get("metadata") or {}).get("name", "")): topology_levels(raw) for raw in self.topologies.store
        }
        if not self.cluster_watches_synced():
            levels = {}  # no snapshot from half-listed nodes and pods: they would show room that is taken
        rebuilt = self.index.configure(tas_flavors, levels, nodes=self.nodes.store, pods=self.bound_pods.store)
        if rebuilt:
            self._log.info("tas.snapshots_rebuilt", flavors=rebuilt, nodes=len(self.nodes.store))

    def summaries(self) -> list[Obj]:
        """The ClusterCapacity ``topologies`` entries: per TAS flavor, free capacity per domain above the nodes."""
        entries = []
        for name in sorted(self.index.snapshots):
            flavor = self.index.flavors[name]
            entries.append(summary_entry(name, flavor.topology, summarize(self.index.snapshots[name])))
        return entries

    # -- admission --------------------------------------------------------------------------------------------

    def placer(self, state: QuotaState, workloads: Iterable[Obj]) -> TasPlacer:
        """Book what admitted workloads still hold, then hand out the veto for this pass's drain."""
        self.as_run = state.pod_set_as_run
        pod_sets = self._admitted_pod_sets(workloads)
        bound: dict[str, dict[str, int]] = {}
        for pod in self.tas_pods.store:
            key = _booking_key(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            if key is None or not node or pod_terminal(pod):
                continue
            per_node = bound.setdefault(key, {})
            per_node[str(node)] = per_node.get(str(node), 0) + 1
        by_flavor = assumed_usage(pod_sets, self.index.snapshots, bound)
        for flavor in self.index.snapshots:
            self.index.set_assumed(flavor, by_flavor.get(flavor, {}))
        raw = {workload.key: item for items in state.pending.values() for workload, item in items}
        waiting = None if self.cluster_watches_synced() else CLUSTER_WATCHES_WAITING
        return TasPlacer(
            self.index.flavors,
            self.index.snapshots,
            raw,
            book=self.index.assume_now,
            waiting=waiting,
            as_run=self.as_run,
        )

    def _admitted_pod_sets(self, workloads: Iterable[Obj]) -> list[TasPodSet]:
        if not self.index.flavors:
            return []  # a pass over every workload for nothing (a few % of the agent's CPU in a burst)
        found: list[TasPodSet] = []
        for workload in workloads:
            if workload_state(workload) != RESERVED:
                continue
            found.extend(admitted_tas_pod_sets(workload, self.index.flavors, as_run=self.as_run))
        return found

    # -- pods of TAS workloads --------------------------------------------------------------------------------

    def _pods_by_key(self) -> dict[str, list[Obj]]:
        grouped: dict[str, list[Obj]] = {}
        for cached in self.tas_pods.store:
            pod = self.pod_writes.view(cached)
            key = _booking_key(pod)
            if key is not None:
                grouped.setdefault(key, []).append(pod)
        return grouped

    def _node_labels(self, name: str) -> Mapping[str, str]:
        node = self.nodes.store.get(name)
        return ((node or {}).get("metadata") or {}).get("labels") or {}

    async def ungate_pass(self, workloads: Iterable[Obj]) -> int:
        """Pin and ungate the gated pods of every admitted TAS workload; returns how many were ungated."""
        pods = self._pods_by_key()
        if not pods:
            return 0
        ungated = 0
        workloads = list(workloads)
        raw_of = {workload_key(workload): workload for workload in workloads}
        for pod_set in self._admitted_pod_sets(workloads):
            members = pods.get(pod_set.key)
            if not members:
                continue
            levels = pod_set.assignment.levels
            views: list[PodView] = []
            by_key: dict[str, Obj] = {}
            for pod in members:
                if not pod_live(pod):
                    continue
                spec = pod.get("spec") or {}
                gated = any(g.get("name") == TOPOLOGY_GATE for g in spec.get("schedulingGates") or ())
                domain = pod_domain(levels, spec.get("nodeSelector") or {})
                if domain is None and spec.get("nodeName"):
                    domain = pod_domain(levels, self._node_labels(str(spec["nodeName"])))
                index_text = ((pod.get("metadata") or {}).get("labels") or {}).get(COMPLETION_INDEX_LABEL)
                index = int(index_text) if index_text and str(index_text).isdigit() else None
                views.append(PodView(key=pod_key(pod), gated=gated, domain=domain, index=index))
                by_key[pod_key(pod)] = pod
            for ungate in plan_ungates(pod_set.assignment, views):
                if await self._ungate(by_key[ungate.pod], ungate.node_selector, workload=pod_set.workload):
                    ungated += 1
                    raw = raw_of.get(pod_set.workload) or {}
                    waited = admitted_for(raw, now=dt.datetime.now(dt.UTC))
                    if waited is not None:
                        queue = str(((raw.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
                        self.metrics.gate_removed(
                            gate=TOPOLOGY_GATE, cluster_queue=queue, is_group=False, seconds=waited
                        )
        return ungated

    async def _ungate(self, pod: Obj, node_selector: Mapping[str, str], *, workload: str) -> bool:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        remaining = [g for g in spec.get("schedulingGates") or () if g.get("name") != TOPOLOGY_GATE]
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "spec": {"nodeSelector": dict(node_selector), "schedulingGates": remaining or None},
        }
        bound = self._log.bind(workload=workload, pod=pod_key(pod))
        try:
            written = await self.api.patch(
                r.PODS, str(meta.get("name")), patch, namespace=str(meta.get("namespace")), field_manager="kfed-agent"
            )
        except Conflict:
            self.wake()
            return False
        except NotFound:
            return False
        except KubeError as exc:
            bound.warning("tas.ungate_failed", error=str(exc)[:300])
            self.wake()
            return False
        self.pod_writes.remember(written)
        bound.debug("tas.ungated", node_selector=dict(node_selector))
        return True

    # -- node failures ----------------------------------------------------------------------------------------

    def seconds_until_recheck(self) -> float | None:
        return None if self.recheck_at is None else max(0.0, self.recheck_at - time.time())

    async def repair_pass(self, workloads: Iterable[Obj], *, remember: Callable[[Obj], None]) -> None:
        if not self.index.flavors:
            return  # no TAS flavor: no workload holds a topology assignment to repair
        now = self.clock()
        pods = self._pods_by_key()
        recheck: dt.datetime | None = None
        by_workload: dict[str, list[TasPodSet]] = {}
        raw_of: dict[str, Obj] = {}
        for workload in workloads:
            if workload_state(workload) != RESERVED or is_true(workload, "Evicted"):
                continue
            sets = admitted_tas_pod_sets(workload, self.index.flavors, as_run=self.as_run)
            if sets:
                by_workload[workload_key(workload)] = sets
                raw_of[workload_key(workload)] = workload
        for key, pod_sets in by_workload.items():
            workload = raw_of[key]
            repairs: list[PodSetRepair] = []
            tolerations_seen: list[Any] = []
            failed_all: dict[str, str] = {}
            for pod_set in pod_sets:
                snapshot = self.index.snapshots.get(pod_set.flavor.name)
                if snapshot is None:
                    continue
                members = pods.get(pod_set.key, [])
                failed: dict[str, str] = {}
                for host, assigned in assignment_hosts(pod_set.assignment).items():
                    state = snapshot.node_by_hostname(host)
                    name = state.spec.name if state is not None else host
                    node = self.nodes.store.get(name)
                    terminating = any(
                        (p.get("spec") or {}).get("nodeName") == name
                        and (p.get("metadata") or {}).get("deletionTimestamp")
                        for p in members
                    )
                    verdict = judge_node(
                        node,
                        now=now,
                        delay=self.delay,
                        tolerations=pod_set.request.tolerations,
                        pods_terminating=terminating,
                        pods_missing=missing_pods(assigned, name, members),
                        pods_running=running_pods(name, members),
                    )
                    if verdict.failed:
                        failed[name] = verdict.failed
                    elif verdict.recheck_at is not None and (recheck is None or verdict.recheck_at < recheck):
                        recheck = verdict.recheck_at
                tolerations_seen.extend(pod_set.request.tolerations)
                failed_all.update(failed)
                repairs.append(PodSetRepair(pod_set.name, pod_set.request, snapshot, pod_set.assignment, failed))
            unhealthy = current_unhealthy(workload)
            recovered = {
                name for name in unhealthy if node_healthy(self.nodes.store.get(name), tolerations=tolerations_seen)
            }
            still_failed = (set(unhealthy) - recovered) | set(failed_all)
            on_failed = [
                pod for pod_set in pod_sets for pod in pods.get(pod_set.key, []) if _placed_on(pod) in still_failed
            ]
            doomed = [pod for pod in on_failed if pod_live(pod)]
            # Being deleted by someone else (the NoExecute taint manager, PodGC) or failed there, still tracked by
            # the Job: untracked too, before the Job controller's batched sync (1 s) counts them as failures.
            dying = dying_but_tracked(on_failed)
            repair = plan_repair(
                workload, repairs, recovered=recovered, pods_on_failed=[pod_key(p) for p in doomed], now=now
            )
            if repair is None:
                if dying:
                    await self._retire_all([], dying, failed_all, bound=self._log.bind(workload=key))
                continue
            await self._apply_repair(workload, repair, doomed, dying, remember=remember)
        self.recheck_at = recheck.timestamp() if recheck is not None else None

    async def _apply_repair(
        self, workload: Obj, repair: Any, doomed: list[Obj], dying: list[Obj], *, remember: Callable[[Obj], None]
    ) -> None:
        meta = workload.get("metadata") or {}
        bound = self._log.bind(workload=workload_key(workload))
        if repair.status:
            body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": repair.status}
            try:
                written = await self.api.patch_status(
                    r.WORKLOADS,
                    str(meta.get("name")),
                    body,
                    namespace=str(meta.get("namespace")),
                    field_manager="kfed-agent",
                )
            except Conflict:
                self.wake()
                return
            except NotFound:
                return
            except KubeError as exc:
                bound.warning("tas.repair_write_failed", error=str(exc)[:300])
                self.wake()
                return
            remember(written)
            queue = str(((written.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
            if repair.evicted:
                namespace, local_queue, priority_class = workload_labels(written)
                self.metrics.evicted(
                    cluster_queue=queue,
                    namespace=namespace,
                    local_queue=local_queue,
                    priority_class=priority_class,
                    reason=NODE_FAILURES_REASON,
                )
                bound.warning("tas.evicted", failed=dict(repair.failed), message=repair.message)
                self.events.emit(
                    written,
                    reason="EvictedDueToNodeFailures",
                    note=repair.message,
                    action="Evict",
                    event_type="Normal",  # as Kueue records its EvictedDueTo… Events
                )
            elif repair.moved_pods:
                bound.info("tas.replaced", failed=dict(repair.failed), moved_pods=repair.moved_pods)
                self.events.emit(
                    written,
                    reason="NodeFailureReplacement",
                    note=f"Topology assignment updated: {repair.message}",
                    action="Replace",
                    event_type="Warning",
                )
            else:
                bound.info("tas.unhealthy_nodes", unhealthy=(repair.status.get("unhealthyNodes") or []))
        await self._retire_all(doomed, dying, repair.failed, bound=bound)

    async def _retire_all(self, doomed: list[Obj], dying: list[Obj], failed: Mapping[str, str], *, bound: Any) -> None:
        """Retire the pods on failed nodes (see ``decisions.tas_failures``): first every pod's tracking finalizer,
        all at once (the race with the Job controller's count), then DisruptionTarget and the delete of the live
        ones."""
        async with anyio.create_task_group() as tg:
            for pod in [*doomed, *dying]:
                tg.start_soon(self._untrack, pod, bound)
        async with anyio.create_task_group() as tg:
            for pod in doomed:
                tg.start_soon(self._retire, pod, failed, bound)

    async def _untrack(self, pod: Obj, bound: Any) -> None:
        patch = untrack_patch(pod)
        if patch is None:
            return
        meta = pod.get("metadata") or {}
        try:
            await self.api.patch(
                r.PODS,
                str(meta.get("name")),
                patch,
                namespace=str(meta.get("namespace")),
                patch_type=PatchType.STRATEGIC,
                field_manager=AGENT,
            )
        except (Conflict, NotFound):
            return
        except KubeError as exc:
            bound.warning("tas.pod_untrack_failed", pod=pod_key(pod), error=str(exc)[:300])
            self.wake()
            return
        bound.info("tas.pod_untracked", pod=pod_key(pod), node=_placed_on(pod), deleting=not pod_live(pod))

    async def _retire(self, pod: Obj, failed: Mapping[str, str], bound: Any) -> None:
        """DisruptionTarget, then delete: the Job controller replaces the pod at once (its finalizer is gone)."""
        meta = pod.get("metadata") or {}
        name, namespace = str(meta.get("name")), str(meta.get("namespace"))
        node = _placed_on(pod) or ""
        try:
            condition = disruption_patch(pod, node=node, why=failed.get(node, "failed"), now=self.clock())
            if condition is not None:
                await self.api.patch_status(
                    r.PODS, name, condition, namespace=namespace, patch_type=PatchType.STRATEGIC, field_manager=AGENT
                )
            await self.api.delete(
                r.PODS, name, namespace=namespace, uid=str(meta.get("uid") or "") or None, missing_ok=True
            )
        except (Conflict, NotFound):
            return
        except KubeError as exc:
            bound.warning("tas.pod_delete_failed", pod=pod_key(pod), error=str(exc)[:300])
            self.wake()
            return
        bound.info("tas.pod_deleted", pod=pod_key(pod), node=node)
