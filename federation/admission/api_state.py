"""A cluster's quota state as one admission-core snapshot, built from the Kueue objects its caches hold.

Used the same way by the manager (global queues) and the agent (a worker's local queues).

Every Workload is classified once: finished ones are ignored, quota-holding ones charge their ClusterQueue (so
quota is released exactly when a workload finishes or disappears), and pending ones are resolved through their
LocalQueue to a ClusterQueue — or get the reason they cannot be (missing LocalQueue, stopped LocalQueue, namespace
not selected by the ClusterQueue, malformed pod sets). The same snapshot feeds admission, the capacity report
and the ClusterQueue status, so all of them always agree.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ParamSpec, TypeVar

from federation.admission import model as core
from federation.admission.api_quotas import (
    FlavorInfo,
    QueueInfo,
    cohort_spec,
    flavor_info,
    queue_info,
    selector_matches,
)
from federation.admission.api_workloads import (
    ALL_RESOURCES,
    FINISHED_STATE,
    PENDING,
    RESERVED,
    ResourceRules,
    core_workload,
    epoch_seconds,
    reserved_at,
    reserved_cluster_queue,
    reserved_usage,
    without_undeclared,
    workload_key,
    workload_state,
)
from federation.admission.snapshot import FLAVOR_NOT_FOUND, TERMINATING, Snapshot
from federation.api.labels import PODSET_TOPOLOGY_SPREADING_ANNOTATION
from federation.api.workload import EVICTED
from federation.conditions import is_true, parse_time
from federation.limit_ranges import LimitRangeSummary, by_namespace, pod_set_as_run, workload_violations
from federation.podspec import Overheads, runtime_overheads
from federation.protocol import REASON_MISCONFIGURED, REASON_PENDING_EVALUATION, REASON_SUSPENDED

Obj = dict[str, Any]
T = TypeVar("T")
P = ParamSpec("P")
LOOKS_PER_STEP = 2000
"""Workloads looked at between two steps of a build in steps (about a tenth of a second's work)."""


@dataclass(frozen=True, slots=True)
class LocalQueueInfo:
    namespace: str
    name: str
    cluster_queue: str
    stopped: bool


@dataclass(frozen=True, slots=True)
class Blocked:
    """A pending workload that cannot reach the admission core, with Kueue's reason and a message."""

    raw: Obj
    reason: str
    message: str


@dataclass(slots=True)
class QuotaState:
    """Snapshot (quota-holding workloads charged) plus the pending workloads per ClusterQueue."""

    snapshot: Snapshot
    queues: Mapping[str, QueueInfo]
    local_queues: Mapping[str, LocalQueueInfo]
    pending: dict[str, list[tuple[core.Workload, Obj]]] = field(default_factory=dict)
    blocked: list[Blocked] = field(default_factory=list)
    reserving: dict[str, list[Obj]] = field(default_factory=dict)
    """Quota-holding, unfinished workloads per ClusterQueue."""
    next_requeue_at: float | None = None
    """The earliest ``status.requeueState.requeueAt`` (epoch seconds) still ahead: schedule a pass then."""
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Namespace → its labels, as the ClusterQueues' ``namespaceSelector`` is matched against them."""
    limit_ranges: Mapping[str, LimitRangeSummary] = field(default_factory=dict)
    """Namespace → its LimitRanges' summary (only namespaces that have one): pending pod sets get its defaults and
    must keep its bounds."""
    runtime_overheads: Overheads = ()
    """The RuntimeClasses' pod overheads: a pending pod set that names one and sets no overhead is charged it."""

    def pod_set_as_run(self, namespace: str, pod_set: Mapping[str, Any]) -> Mapping[str, Any]:
        """``pod_set`` (a Workload's ``spec.podSets[]`` entry in ``namespace``) with its pod template as its pods will
        be created there: the namespace's LimitRange defaults and the RuntimeClass's overhead laid in."""
        return pod_set_as_run(pod_set, self.limit_ranges.get(namespace), self.runtime_overheads)

    def selects(self, local_queue: LocalQueueInfo) -> bool:
        """Whether the ClusterQueue ``local_queue`` feeds selects its namespace (True when that ClusterQueue is not
        known or not usable: that is reported otherwise)."""
        queue = self.queues.get(local_queue.cluster_queue)
        if queue is None or queue.spec is None:
            return True
        return selector_matches(queue.namespace_selector, self.namespace_labels.get(local_queue.namespace, {}))


def local_queue_info(raw: Mapping[str, Any]) -> LocalQueueInfo:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    return LocalQueueInfo(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        cluster_queue=str(spec.get("clusterQueue") or ""),
        stopped=(spec.get("stopPolicy") or "None") != "None",
    )


def _run(steps: Generator[None, None, T]) -> T:
    """What a generator of steps returns, its steps taken one after the other."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _at_once(steps: Callable[P, Generator[None, None, T]]) -> Callable[P, T]:
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return _run(steps(*args, **kwargs))

    return run


def quota_state_steps(
    *,
    flavors: Mapping[str, FlavorInfo],
    queues: Mapping[str, QueueInfo],
    cohorts: Iterable[core.CohortSpec],
    local_queues: Iterable[LocalQueueInfo],
    namespace_labels: Mapping[str, Mapping[str, str]],
    workloads: Iterable[Mapping[str, Any]],
    now_seconds: float | None = None,
    limit_ranges: Mapping[str, LimitRangeSummary] | None = None,
    runtime_overheads: Overheads = (),
    parse_pending: Callable[[Obj, str], core.Workload] | None = None,
    parse_reserved: Callable[[Obj, str], core.AdmittedWorkload | None] | None = None,
    rules: ResourceRules = ALL_RESOURCES,
    memo: ClassificationMemo | None = None,
    changed: Iterable[str] | None = None,
    lookup: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> Generator[None, None, QuotaState]:
    """Build the quota state in steps: it yields between batches of :data:`LOOKS_PER_STEP` Workloads it looks at (the
    caller may let other work run there; ``workloads`` must then be a list of its own, not a view of a store that
    changes meanwhile; the changed ones are all looked up before the first step), and returns the state.

    ``limit_ranges`` (namespace → its LimitRanges' summary) gives pending pod sets their namespace's defaults and
    bounds, ``runtime_overheads`` their RuntimeClass's overhead; ``now_seconds`` (epoch) keeps workloads whose
    ``status.requeueState.requeueAt`` is ahead out of the queues;
    ``rules`` says which requested resources count (Kueue's ``resources`` configuration); ``memo`` (kept by the
    caller across builds) reuses the verdict on every pending, blocked or finished Workload object seen before, and
    with ``changed`` and ``lookup`` looks only at the Workloads changed since its last build
    (:class:`ClassificationMemo`)."""
    usable = [info.spec for info in queues.values() if info.spec is not None]
    snapshot = Snapshot(cluster_queues=usable, cohorts=cohorts, flavors=[flavor.spec for flavor in flavors.values()])
    for info in queues.values():
        node = snapshot.cluster_queues.get(info.name)
        missing = [name for name in info.flavor_names if name not in flavors]
        if node is not None and missing:
            node.add_own_cause(FLAVOR_NOT_FOUND, f"references missing ResourceFlavor(s): {','.join(missing)}")
        if node is not None and info.terminating:
            node.add_own_cause(TERMINATING, "is terminating")
    by_key = {f"{lq.namespace}/{lq.name}": lq for lq in local_queues}
    ranges = dict(limit_ranges or {})
    state = QuotaState(
        snapshot,
        queues,
        by_key,
        namespace_labels=dict(namespace_labels),
        limit_ranges=ranges,
        runtime_overheads=runtime_overheads,
    )
    parse = parse_pending or (
        lambda raw, queue: core_workload(
            raw, cluster_queue=queue, rules=rules, limits=ranges.get(_namespace(raw)), overheads=runtime_overheads
        )
    )
    if rules.ignore_undeclared:
        parse = _ignoring_undeclared(parse, queues)
    charge = parse_reserved or reserved_workload
    memo = memo if memo is not None else ClassificationMemo()  # one build: every Workload looked at once
    context = (dict(queues), by_key, dict(namespace_labels), ranges, runtime_overheads, rules)
    yield from memo.classify_steps(
        state,
        workloads,
        context,
        namespace_labels,
        now_seconds,
        parse=parse,
        parse_reserved=charge,
        changed=changed,
        lookup=lookup,
    )
    memo.order(state)
    return state


build_quota_state = _at_once(quota_state_steps)


def _namespace(raw: Mapping[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("namespace", ""))


"""The quota state of :func:`quota_state_steps`'s inputs, built at once."""


def _queue_order(item: tuple[core.Workload, Obj]) -> tuple[int, float, str]:
    return (-item[0].priority, item[0].ordering_time, item[0].key)


def _ignoring_undeclared(
    parse: Callable[[Obj, str], core.Workload], queues: Mapping[str, QueueInfo]
) -> Callable[[Obj, str], core.Workload]:
    def parse_covered(raw: Obj, queue: str) -> core.Workload:
        workload = parse(raw, queue)
        spec = queues[queue].spec
        if spec is None:
            return workload
        return without_undeclared(workload, frozenset(r for g in spec.resource_groups for r in g.covered_resources))

    return parse_covered


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How a Workload object was classified: pending in ``queue`` as ``workload``, ``blocked``, holding quota in
    ``queue`` (``charge``), or ignored."""

    queue: str
    item: tuple[core.Workload, Obj] | None
    """The pending entry itself, appended again as is (no new objects per pass for the collector to scan)."""
    blocked: Blocked | None
    charge: tuple[core.AdmittedWorkload, Obj] | None = None
    """A quota holder's snapshot entry and the object listed in ``QuotaState.reserving``, charged again as is."""


_IGNORED = _Outcome("", None, None)


def _blocked(raw: Obj, reason: str, message: str) -> _Outcome:
    return _Outcome("", None, Blocked(raw, reason, message))


class ClassificationMemo:
    """The classification of every pending, blocked, quota-holding or finished Workload, by key, reused for the same
    object (same identity and resourceVersion: a watch cache replaces an object, never changes it) while the
    ClusterQueues, LocalQueues, namespaces and resource rules it was classified against are equal. At 100,000
    pending Workloads, classifying each of them again was most of a scheduling pass in which nothing changed. A quota
    holder's remembered entry is charged into each new snapshot (reading its conditions, ClusterQueue and usage again
    each time was most of a worker agent's pass); a Workload in its requeue backoff, or a holder that could not be
    charged, is looked at again each time (the first is timed).

    Given the keys that ``changed`` since the last build (the caller's watch handler collects them), only those are
    looked at: the per-ClusterQueue pending entries, the blocked ones and the quota holders are kept between builds
    as they were, so a build after one change costs what the change costs, not what the backlog does. Without it
    (or after the context changed) every Workload is looked at, the same objects reused."""

    def __init__(self) -> None:
        self._context: object = None
        self._known: dict[str, tuple[Mapping[str, Any], object, _Outcome]] = {}
        """Key → (the object, its resourceVersion, how it was classified)."""
        self._complete = False
        """``_known`` describes every Workload of the source (a full look happened under this context)."""
        self._pending: dict[str, dict[str, tuple[core.Workload, Obj]]] = {}
        """ClusterQueue → key → its pending entry, as classified."""
        self._blocked: dict[str, Blocked] = {}
        self._holders: dict[str, tuple[str, core.AdmittedWorkload, Obj]] = {}
        self._again: set[str] = set()
        """Keys looked at in every build: in their requeue backoff, or holders that could not be charged."""
        self._ordered: dict[str, tuple[list[tuple[core.Workload, Obj]], list[tuple[core.Workload, Obj]]]] = {}
        """ClusterQueue → (its pending entries as classified, the same in queue order) from the last build."""
        self.hits = 0
        """Objects whose classification the last build reused (looked at, or not looked at since unchanged)."""

    def classify_steps(
        self,
        state: QuotaState,
        workloads: Iterable[Mapping[str, Any]],
        context: object,
        namespace_labels: Mapping[str, Mapping[str, str]],
        now_seconds: float | None,
        *,
        parse: Callable[[Obj, str], core.Workload],
        parse_reserved: Callable[[Obj, str], core.AdmittedWorkload | None],
        changed: Iterable[str] | None = None,
        lookup: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> Generator[None, None, None]:
        """Fill ``state`` from ``workloads``, yielding after every :data:`LOOKS_PER_STEP` Workloads looked at. With
        ``changed`` and ``lookup`` (the source's object by key, None when it has none), only the changed keys are
        looked at, when an earlier build under the same context looked at all: all of them are looked up before the
        first step (tens of thousands change when a pass's verdicts are written)."""
        if context != self._context:
            self._context = context
            self._forget_all()
        timed: list[_Timed] = []

        def look(key: str, raw: Mapping[str, Any] | None) -> None:
            found = self._known.get(key)
            version = (raw.get("metadata") or {}).get("resourceVersion") if raw is not None else None
            if found is not None and found[0] is raw and found[1] == version:
                self.hits += 1
                return
            if found is not None:
                self._forget(key, found[2])
            self._again.discard(key)
            if raw is None:
                return
            verdict = _verdict(
                state, dict(raw), namespace_labels, now_seconds, parse=parse, parse_reserved=parse_reserved
            )
            if isinstance(verdict, _Outcome):
                self._remember(key, raw, version, verdict)
                return
            self._again.add(key)
            if verdict is not None:
                timed.append(verdict)

        self.hits = 0
        if changed is None or lookup is None or not self._complete:
            present: set[str] = set()
            for raw in workloads:
                key = workload_key(raw)
                present.add(key)
                look(key, raw)
                if len(present) % LOOKS_PER_STEP == 0:
                    yield
            for key in [key for key in (*self._known, *self._again) if key not in present]:
                look(key, None)
            self._complete = changed is not None and lookup is not None
        else:
            looked = {*changed, *self._again}
            untouched = len(self._known) - sum(1 for key in looked if key in self._known)
            # all read before the first step: the build looks at one moment, as a full look at its own list does
            current = [(key, lookup(key)) for key in looked]
            for count, (key, obj) in enumerate(current, 1):
                look(key, obj)
                if count % LOOKS_PER_STEP == 0:
                    yield
            self.hits += untouched
        self._fill(state, timed)

    def look_at_all(self) -> None:
        """The next build looks at every Workload (the caller may have missed changes)."""
        self._complete = False

    def _forget_all(self) -> None:
        self._known, self._complete, self._again = {}, False, set()
        self._pending, self._blocked, self._holders = {}, {}, {}

    def _remember(self, key: str, raw: Mapping[str, Any], version: object, outcome: _Outcome) -> None:
        self._known[key] = (raw, version, outcome)
        if outcome.item is not None:
            self._pending.setdefault(outcome.queue, {})[key] = outcome.item
        elif outcome.blocked is not None:
            self._blocked[key] = outcome.blocked
        elif outcome.charge is not None:
            self._holders[key] = (outcome.queue, *outcome.charge)

    def _forget(self, key: str, outcome: _Outcome) -> None:
        del self._known[key]
        if outcome.item is not None:
            entries = self._pending[outcome.queue]
            del entries[key]
            if not entries:
                del self._pending[outcome.queue]
        elif outcome.blocked is not None:
            del self._blocked[key]
        elif outcome.charge is not None:
            del self._holders[key]

    def _fill(self, state: QuotaState, timed: list[_Timed]) -> None:
        for queue, entries in self._pending.items():
            state.pending[queue] = list(entries.values())
        state.blocked.extend(self._blocked.values())
        for queue, admitted, raw in self._holders.values():
            _charge_entry(state, queue, admitted, raw)
        for waiting in timed:
            state.blocked.append(waiting.blocked)
            state.next_requeue_at = min(waiting.until, state.next_requeue_at or waiting.until)

    def order(self, state: QuotaState) -> None:
        """Sort each ClusterQueue's pending entries into queue order, reusing the last order when the entries are the
        very same objects in the same sequence (compared at C speed; sorting 100,000 entries was not)."""
        previous, ordered = self._ordered, {}
        for name, items in state.pending.items():
            last = previous.get(name)
            if last is not None and last[0] == items:
                state.pending[name] = list(last[1])
                ordered[name] = last
                continue
            in_order = sorted(items, key=_queue_order)
            ordered[name] = (items, in_order)
            state.pending[name] = list(in_order)
        self._ordered = ordered


def requeue_at(raw: Obj) -> float | None:
    """``status.requeueState.requeueAt`` in epoch seconds (None when unset)."""
    at = ((raw.get("status") or {}).get("requeueState") or {}).get("requeueAt")
    return parse_time(str(at)).timestamp() if at else None


@dataclass(frozen=True, slots=True)
class _Timed:
    """A pending Workload in its requeue backoff until ``until`` (epoch seconds): blocked, and looked at again each
    time."""

    blocked: Blocked
    until: float


def _verdict(
    state: QuotaState,
    raw: Obj,
    namespace_labels: Mapping[str, Mapping[str, str]],
    now_seconds: float | None,
    *,
    parse: Callable[[Obj, str], core.Workload],
    parse_reserved: Callable[[Obj, str], core.AdmittedWorkload | None],
) -> _Outcome | _Timed | None:
    """What the workload is against the state's queues (the state is only read): an outcome that holds for the
    same object next time; a requeue backoff (timed); None for a quota holder that cannot be charged (its
    ClusterQueue is gone or its usage cannot be read)."""
    kind = workload_state(raw)
    if kind == FINISHED_STATE:
        return _IGNORED
    if kind == RESERVED:
        queue_name = reserved_cluster_queue(raw)
        if queue_name is None or queue_name not in state.snapshot.cluster_queues:
            return None  # its ClusterQueue is gone: nothing left to charge
        admitted = parse_reserved(raw, queue_name)
        return None if admitted is None else _Outcome(queue_name, None, None, (admitted, raw))
    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    if kind != PENDING or meta.get("deletionTimestamp"):
        return _IGNORED  # being deleted (a finalizer holds it): Kueue takes it out of its queue

    namespace, queue_name = str(meta.get("namespace", "")), str(spec.get("queueName") or "")
    if not queue_name:
        return _blocked(raw, REASON_MISCONFIGURED, "Workload has no spec.queueName (LocalQueue)")
    local_queue = state.local_queues.get(f"{namespace}/{queue_name}")
    if local_queue is None:
        return _blocked(raw, REASON_MISCONFIGURED, f"LocalQueue {queue_name} doesn't exist")
    if local_queue.stopped:
        return _blocked(raw, REASON_SUSPENDED, f"LocalQueue {queue_name} is inactive")
    queue = state.queues.get(local_queue.cluster_queue)
    if queue is None:
        return _blocked(raw, REASON_MISCONFIGURED, f"ClusterQueue {local_queue.cluster_queue} doesn't exist")
    if queue.spec is None:
        return _blocked(raw, REASON_SUSPENDED, f"ClusterQueue {queue.name} is inactive: {queue.problem}")
    if not selector_matches(queue.namespace_selector, namespace_labels.get(namespace, {})):
        # Kueue's scheduler finds this one (its admissibility check): its error's words
        return _blocked(raw, REASON_MISCONFIGURED, "workload namespace doesn't match ClusterQueue selector")
    limits = state.limit_ranges.get(namespace)
    if limits is not None:
        try:
            outside = workload_violations(raw, limits, state.runtime_overheads)
        except (ValueError, TypeError) as exc:
            return _blocked(raw, REASON_MISCONFIGURED, f"Workload pod sets cannot be read: {exc}")
        if outside:
            return _blocked(raw, REASON_MISCONFIGURED, outside)
    backoff_until = requeue_at(raw) if now_seconds is not None else None
    if backoff_until is not None and now_seconds is not None and backoff_until > now_seconds:
        at = (raw.get("status") or {}).get("requeueState", {}).get("requeueAt")
        return _Timed(
            Blocked(raw, REASON_PENDING_EVALUATION, f"Waiting for the requeuing backoff until {at}"), backoff_until
        )
    refused = unsupported_topology_request(raw)
    if refused:
        return _blocked(raw, REASON_MISCONFIGURED, refused)
    try:
        workload = parse(raw, queue.name)
    except (ValueError, TypeError) as exc:
        return _blocked(raw, REASON_MISCONFIGURED, f"Workload pod sets cannot be read: {exc}")
    return _Outcome(queue.name, (workload, raw), None)


def unsupported_topology_request(raw: Obj) -> str:
    """Why a workload asks for placement kfed does not do ("" when it does not): Kueue v0.20's alpha
    ``kueue.x-k8s.io/podset-topology-spreading`` (spread groups of matching Workloads over domains by a share per
    domain) is refused openly rather than admitted without its spreading, on the manager and on the agent alike."""
    for pod_set in (raw.get("spec") or {}).get("podSets") or ():
        annotations = ((pod_set.get("template") or {}).get("metadata") or {}).get("annotations") or {}
        if PODSET_TOPOLOGY_SPREADING_ANNOTATION in annotations:
            return (
                f"pod set {pod_set.get('name', '')} asks for {PODSET_TOPOLOGY_SPREADING_ANNOTATION} (Kueue's alpha "
                "topology spreading), which kfed does not place yet; without the annotation the workload is queued"
            )
    return ""


def reserved_workload(raw: Obj, queue_name: str) -> core.AdmittedWorkload | None:
    """The snapshot's view of a quota-holding workload (None when its usage cannot be read)."""
    try:
        usage = reserved_usage(raw)
    except (ValueError, TypeError):
        return None
    # Priority and age matter to preemption; an eviction in progress makes it the first candidate (no second
    # victim is chosen while the first one is still giving its quota back).
    spec = raw.get("spec") or {}
    workload = core.Workload(
        key=workload_key(raw),
        cluster_queue=queue_name,
        pod_sets=(),
        priority=int(spec.get("priority") or 0),
        creation_time=epoch_seconds((raw.get("metadata") or {}).get("creationTimestamp")) or 0.0,
    )
    return core.AdmittedWorkload(workload, usage, reserved_at(raw), evicted=is_true(raw, EVICTED))


def _charge_entry(state: QuotaState, queue_name: str, admitted: core.AdmittedWorkload, raw: Obj) -> None:
    if queue_name not in state.snapshot.cluster_queues or state.snapshot.admitted(admitted.workload.key) is not None:
        return
    state.snapshot.add_workload(admitted)
    state.reserving.setdefault(queue_name, []).append(raw)


@dataclass(frozen=True, slots=True)
class IgnoredObject:
    """A quota object left out of the state because it cannot be read (reported once per resourceVersion)."""

    kind: str
    name: str
    error: str


class QuotaStateBuilder:
    """Builds :class:`QuotaState` from the objects a controller's caches hold, parsing each ResourceFlavor,
    ClusterQueue and Cohort only once per resourceVersion (they change rarely; scheduling passes are frequent).

    A malformed ResourceFlavor or Cohort is left out (its ClusterQueues then report the missing flavor); a malformed
    ClusterQueue becomes inactive with the parse error as its reason. ``ignored`` lists what was newly left out by
    the last ``build`` so the caller can log it once.
    """

    def __init__(self, *, rules: ResourceRules = ALL_RESOURCES, assigns_topology: bool = True) -> None:
        self._rules = rules
        self._assigns_topology = assigns_topology
        """False for a MultiKueue manager, whose ClusterQueues place no pods: its flavors are taken as unknown to
        topology (a manager's TAS flavor may have no ``topologyName``), and the workers judge topology requests."""
        self._memo: dict[tuple[str, str], tuple[str, object]] = {}
        self._pending: dict[tuple[str, object, str, LimitRangeSummary | None, Overheads], core.Workload] = {}
        """A pending workload's core view by (uid, generation, ClusterQueue, its namespace's LimitRanges, the
        RuntimeClasses' overheads): its spec only changes with its generation, and parsing every pending workload's
        pod sets on every pass was most of a pass's cost."""
        self._limit_ranges: dict[str, LimitRangeSummary] = {}
        """The LimitRange summaries of the latest build, by namespace."""
        self._overheads: Overheads = ()
        """The RuntimeClasses' overheads of the latest build."""
        self._reserved: dict[tuple[str, str, str], core.AdmittedWorkload | None] = {}
        """A quota-holding workload's snapshot entry by (uid, resourceVersion, ClusterQueue)."""
        self._classified = ClassificationMemo()
        self._reported: set[tuple[str, str, str]] = set()
        self.ignored: list[IgnoredObject] = []

    def _parse(self, kind: str, raw: Mapping[str, Any], parse: Callable[[Obj], T]) -> T | None:
        meta = raw.get("metadata") or {}
        name, version = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
        found = self._memo.get((kind, name))
        if found is not None and found[0] == version:
            return found[1]  # type: ignore[return-value]
        try:
            value: T | None = parse(dict(raw))
        except ValueError as exc:
            value = None
            if (kind, name, version) not in self._reported:
                self._reported.add((kind, name, version))
                self.ignored.append(IgnoredObject(kind, name, str(exc)[:300]))
        self._memo[(kind, name)] = (version, value)
        return value

    def flavor_infos(self, flavors: Iterable[Mapping[str, Any]]) -> dict[str, FlavorInfo]:
        """The readable ResourceFlavors by name (what a Job start needs: node labels and tolerations)."""
        infos = (self._parse("ResourceFlavor", raw, flavor_info) for raw in flavors)
        found = {info.spec.name: info for info in infos if info is not None}
        if self._assigns_topology:
            return found
        return {name: replace(info, spec=replace(info.spec, topology_name=None)) for name, info in found.items()}

    def build_steps(
        self,
        *,
        flavors: Iterable[Mapping[str, Any]],
        cluster_queues: Iterable[Mapping[str, Any]],
        cohorts: Iterable[Mapping[str, Any]],
        local_queues: Iterable[Mapping[str, Any]],
        namespaces: Iterable[Mapping[str, Any]],
        workloads: Iterable[Mapping[str, Any]],
        limit_ranges: Iterable[Mapping[str, Any]] = (),
        runtime_classes: Iterable[Mapping[str, Any]] = (),
        now_seconds: float | None = None,
        changed: Iterable[str] | None = None,
        lookup: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> Generator[None, None, QuotaState]:
        """The quota state in steps (see :func:`quota_state_steps`; everything but the Workloads is read before the
        first step). ``changed`` and ``lookup``: the Workload keys changed since the last build and the source's object
        by key, when the caller tracks them (see :class:`ClassificationMemo`)."""
        self.ignored = []
        queue_infos = [self._parse("ClusterQueue", raw, queue_info) for raw in cluster_queues]
        cohort_specs = [self._parse("Cohort", raw, cohort_spec) for raw in cohorts]
        self._limit_ranges = by_namespace(limit_ranges)
        self._overheads = runtime_overheads(runtime_classes)
        state = yield from quota_state_steps(
            flavors=self.flavor_infos(flavors),
            queues={info.name: info for info in queue_infos if info is not None},
            cohorts=[spec for spec in cohort_specs if spec is not None],
            local_queues=[local_queue_info(raw) for raw in local_queues],
            namespace_labels={
                str(ns["metadata"]["name"]): dict(ns["metadata"].get("labels") or {}) for ns in namespaces
            },
            workloads=workloads,
            now_seconds=now_seconds,
            limit_ranges=self._limit_ranges,
            runtime_overheads=self._overheads,
            parse_pending=self._parse_pending,
            parse_reserved=self._parse_reserved,
            rules=self._rules,
            memo=self._classified,
            changed=changed,
            lookup=lookup,
        )
        self._forget_gone(state)
        return state

    build = _at_once(build_steps)
    """:meth:`build_steps`, all at once."""

    def look_at_all(self) -> None:
        """The next build looks at every Workload, whatever ``changed`` says (the caller may have missed some)."""
        self._classified.look_at_all()

    def _parse_reserved(self, raw: Obj, queue: str) -> core.AdmittedWorkload | None:
        meta = raw.get("metadata") or {}
        if not meta.get("uid") or not meta.get("resourceVersion"):
            return reserved_workload(raw, queue)
        key = (str(meta["uid"]), str(meta["resourceVersion"]), queue)
        found = self._reserved[key] if key in self._reserved else reserved_workload(raw, queue)
        self._reserved[key] = found
        return found

    def _forget_gone(self, state: QuotaState) -> None:
        """Drop the parses of Workloads no longer pending or holding quota, once they are at least half of the memo
        (rebuilding the memos on every build made ~100,000 new keys per pass for the garbage collector to scan)."""
        pending = sum(len(items) for items in state.pending.values())
        if len(self._pending) > 2 * pending + 1024:
            live = {id(workload) for items in state.pending.values() for workload, _ in items}
            self._pending = {key: value for key, value in self._pending.items() if id(value) in live}
        held = sum(len(node.workloads) for node in state.snapshot.cluster_queues.values())
        if len(self._reserved) > 2 * held + 1024:
            kept = {id(admitted) for admitted in state.snapshot.admitted_workloads()}
            self._reserved = {key: value for key, value in self._reserved.items() if id(value) in kept}

    def _parse_pending(self, raw: Obj, queue: str) -> core.Workload:
        meta = raw.get("metadata") or {}
        generation = meta.get("generation")
        limits = self._limit_ranges.get(str(meta.get("namespace", "")))
        overheads = self._overheads
        if generation is None or not meta.get("uid"):
            return core_workload(raw, cluster_queue=queue, rules=self._rules, limits=limits, overheads=overheads)
        key = (str(meta["uid"]), generation, queue, limits, overheads)
        found = self._pending.get(key)
        if found is None or found.key != workload_key(raw):
            found = core_workload(raw, cluster_queue=queue, rules=self._rules, limits=limits, overheads=overheads)
        self._pending[key] = found
        return found
