"""The ProvisioningRequest admission check on a worker, as pure decisions (Kueue's provisioning controller).

A Workload that reserved quota in a ClusterQueue with a check of controller ``kueue.x-k8s.io/provisioning-request``
needs capacity from the cluster autoscaler before it may run. For each such check this module says: which
``autoscaling.x-k8s.io/v1`` ProvisioningRequest (and PodTemplates) must exist, under Kueue's names
(``<workload>-<check>-<attempt>``, templates ``ppt-<request>-<podset>``); which owned requests are stale; and the
check's state read from the request's conditions — Pending until ``Provisioned=True`` (Ready), Retry with
Kueue's backoff (``backoffBaseSeconds * 2^(n-1)``, capped at ``backoffMaxSeconds``) on ``Failed`` or on
``BookingExpired`` before admission, Rejected once ``backoffLimitCount`` retries are used up or on
``CapacityRevoked``. The I/O lives in ``worker_agent.provisioning``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from federation.conditions import find_condition, format_time

Obj = dict[str, Any]

CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
CONFIG_KIND = "ProvisioningRequestConfig"
CONFIG_GROUP = "kueue.x-k8s.io"
CHECK_INACTIVE_MESSAGE = "the check is not active"
NO_REQUEST_NEEDED = "the provisioning request is not needed"
MANAGED_BY_LABEL = "kueue.x-k8s.io/managed"
MANAGED_BY_VALUE = "true"
PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"

PROVISIONED, ACCEPTED, FAILED = "Provisioned", "Accepted", "Failed"
BOOKING_EXPIRED, CAPACITY_REVOKED = "BookingExpired", "CapacityRevoked"

PENDING, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"

_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH
_TEMPLATE_PREFIX = "ppt"


# -- names --------------------------------------------------------------------------------------------------------


def limit_object_name(full: str) -> str:
    """Kueue's shortening: names over 247 characters keep 247 and get ``-`` and 5 hex digits of their sha1."""
    if len(full) <= _MAX_PREFIX:
        return full
    return f"{full[:_MAX_PREFIX]}-{hashlib.sha1(full.encode()).hexdigest()[:_HASH_LENGTH]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_object_name(f"{workload}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    return limit_object_name(f"{_TEMPLATE_PREFIX}-{request}-{pod_set}")


def attempt_of(request: str, *, workload: str, check: str) -> int | None:
    """The attempt number in a request's name, or None when the name is not one of this workload's and check's."""
    prefix = limit_object_name(f"{workload}-{check}-")
    found = re.fullmatch(re.escape(prefix) + r"([0-9]+)", request)
    return int(found.group(1)) if found else None


# -- config -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """The parts of a ProvisioningRequestConfig the decisions use, with Kueue's defaults filled in."""

    class_name: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    managed_resources: frozenset[str] = frozenset()
    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800
    node_selector_updates: tuple[tuple[str, str], ...] = ()
    """(node selector key, provisioningClassDetails key) pairs of ``podSetUpdates.nodeSelector``."""


def config_of(raw: Mapping[str, Any]) -> Config:
    spec = raw.get("spec") or {}
    retry = spec.get("retryStrategy") or {}
    updates = (spec.get("podSetUpdates") or {}).get("nodeSelector") or ()

    def number(name: str, default: int) -> int:
        value = retry.get(name)
        return default if value is None else int(value)

    return Config(
        class_name=str(spec.get("provisioningClassName") or ""),
        parameters={str(k): str(v) for k, v in (spec.get("parameters") or {}).items()},
        managed_resources=frozenset(str(r) for r in spec.get("managedResources") or ()),
        backoff_limit_count=number("backoffLimitCount", 3),
        backoff_base_seconds=number("backoffBaseSeconds", 60),
        backoff_max_seconds=number("backoffMaxSeconds", 1800),
        node_selector_updates=tuple(
            (str(u.get("key")), str(u.get("valueFromProvisioningClassDetail"))) for u in updates
        ),
    )


def config_for_check(
    check: Mapping[str, Any] | None, configs: Mapping[str, Mapping[str, Any]]
) -> tuple[Config | None, str]:
    """The config an AdmissionCheck of this controller names (None, with why, when it names none that exists)."""
    if check is None:
        return None, "the admission check does not exist"
    params = (check.get("spec") or {}).get("parameters") or {}
    if params.get("apiGroup") != CONFIG_GROUP or params.get("kind") != CONFIG_KIND:
        return None, f"the admission check's parameters must name a {CONFIG_KIND} of {CONFIG_GROUP}"
    raw = configs.get(str(params.get("name") or ""))
    if raw is None:
        return None, f"{CONFIG_KIND} {params.get('name')} not found"
    return config_of(raw), ""


def backoff_seconds(retry_count: int, *, base: int, cap: int) -> int:
    """Kueue's wait before the next attempt once ``retry_count`` retries were made: ``base * 2^retry_count``,
    capped (the ``(n-1)`` of ``base * 2^(n-1)`` with ``n = retryCount + 1``)."""
    return int(min(base * 2**retry_count, cap))


# -- pod sets -----------------------------------------------------------------------------------------------------


def _uses(pod_spec: Mapping[str, Any], resources: frozenset[str]) -> bool:
    for container in (*(pod_spec.get("initContainers") or ()), *(pod_spec.get("containers") or ())):
        res = container.get("resources") or {}
        if any(name in resources for name in (*(res.get("requests") or {}), *(res.get("limits") or {}))):
            return True
    return False


@dataclass(frozen=True, slots=True)
class RequestPodSet:
    name: str
    count: int
    template: Obj
    """The pod template of the pod set, with the assigned flavors' node labels added to its nodeSelector."""


def request_pod_sets(
    workload: Mapping[str, Any], config: Config, *, flavor_labels: Mapping[str, Mapping[str, str]]
) -> list[RequestPodSet]:
    """The pod sets the request asks capacity for: those with pods that use a managed resource (all resources when
    none is listed), with their admitted counts and the assigned flavors' node labels."""
    assignments = {
        str(a.get("name")): a
        for a in (((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ())
    }
    out: list[RequestPodSet] = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or ():
        name = str(pod_set.get("name"))
        template = pod_set.get("template") or {}
        if int(pod_set.get("count") or 0) <= 0:
            continue
        if config.managed_resources and not _uses(template.get("spec") or {}, config.managed_resources):
            continue
        assignment = assignments.get(name)
        if assignment is None:
            continue
        count = int(assignment.get("count", pod_set.get("count")) or 0)
        if count <= 0:
            continue
        labels: dict[str, str] = {}
        for flavor in (assignment.get("flavors") or {}).values():
            labels.update(flavor_labels.get(str(flavor)) or {})
        spec = dict(template.get("spec") or {})
        if labels:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **labels}
        out.append(RequestPodSet(name, count, {**template, "spec": spec}))
    return out


# -- the check's state --------------------------------------------------------------------------------------------


def _true(request: Mapping[str, Any] | None, condition_type: str) -> Mapping[str, Any] | None:
    found = find_condition(request or {}, condition_type)
    return found if found is not None and found.get("status") == "True" else None


def _message(request: Mapping[str, Any], condition_type: str) -> str:
    return str((find_condition(request, condition_type) or {}).get("message") or "")


def latest_request(
    requests: Iterable[Mapping[str, Any]], *, workload: str, check: str, config: Config
) -> Mapping[str, Any] | None:
    """The owned request of the highest attempt that matches the config's class and parameters (Kueue's
    ``activeOrLastPRForChecks``); a request made for another class or other parameters is stale."""
    best: tuple[int, Mapping[str, Any]] | None = None
    for request in requests:
        name = str((request.get("metadata") or {}).get("name", ""))
        attempt = attempt_of(name, workload=workload, check=check)
        if attempt is None or not synced_with_config(request, config):
            continue
        if best is None or attempt > best[0]:
            best = (attempt, request)
    return best[1] if best else None


def synced_with_config(request: Mapping[str, Any], config: Config) -> bool:
    spec = request.get("spec") or {}
    if spec.get("provisioningClassName") != config.class_name:
        return False
    params = spec.get("parameters") or {}
    return all(params.get(key) == value for key, value in config.parameters.items())


@dataclass(frozen=True, slots=True)
class CheckUpdate:
    state: Obj
    """The check's new ``status.admissionChecks[]`` entry."""
    changed: bool
    event: str | None = None
    """The AdmissionCheckUpdated Event's message when the state changed."""


def _pod_set_updates(workload: Mapping[str, Any], request: Mapping[str, Any], config: Config) -> list[Obj]:
    """What the pods must carry to land on the provisioned capacity (Kueue's podSetUpdates of a Ready check)."""
    name = str((request.get("metadata") or {}).get("name", ""))
    by_template = {
        template_name(name, str(ps.get("name"))): str(ps.get("name"))
        for ps in (workload.get("spec") or {}).get("podSets") or ()
    }
    details = (request.get("status") or {}).get("provisioningClassDetails") or {}
    class_name = str((request.get("spec") or {}).get("provisioningClassName") or "")
    updates: list[Obj] = []
    for item in (request.get("spec") or {}).get("podSets") or ():
        pod_set = by_template.get(str((item.get("podTemplateRef") or {}).get("name")))
        if pod_set is None:
            continue
        update: Obj = {"name": pod_set, "annotations": {CONSUME_ANNOTATION: name, CLASS_ANNOTATION: class_name}}
        if config.node_selector_updates:
            update["nodeSelector"] = {
                key: str(details[detail]) for key, detail in config.node_selector_updates if detail in details
            }
        updates.append(update)
    return updates


def check_update(
    workload: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    config: Config | None,
    config_problem: str = "",
    request: Mapping[str, Any] | None,
    needed: bool,
    now: dt.datetime,
) -> CheckUpdate:
    """The check's state for the request it has now (Kueue's ``syncCheckStates``).

    ``current``: the check's entry in the Workload's status; ``request``: :func:`latest_request`; ``needed``:
    whether any pod set needs capacity (:func:`request_pod_sets` is not empty)."""
    state = dict(current)
    old_state = str(current.get("state") or PENDING)
    meta = workload.get("metadata") or {}
    check = str(current.get("name"))
    admitted = _true(workload, "Admitted") is not None

    def put(new_state: str | None = None, message: str | None = None) -> None:
        if new_state is not None and state.get("state") != new_state:
            state["state"] = new_state
            state["lastTransitionTime"] = format_time(now)
        if message is not None:
            state["message"] = message[:32768]

    if config is None:
        put(PENDING, f"{CHECK_INACTIVE_MESSAGE}: {config_problem}" if config_problem else CHECK_INACTIVE_MESSAGE)
    elif not needed:
        if old_state != READY:
            put(READY, NO_REQUEST_NEEDED)
            state.pop("podSetUpdates", None)
    elif request is not None:
        name = str((request.get("metadata") or {}).get("name", ""))
        attempt = attempt_of(name, workload=str(meta.get("name", "")), check=check) or 1
        retries = int(current.get("retryCount") or 0)
        expired_before_admission = _true(request, BOOKING_EXPIRED) is not None and not admitted
        if _true(request, FAILED) is not None or expired_before_admission:
            kind = FAILED if _true(request, FAILED) is not None else BOOKING_EXPIRED
            reason = _message(request, kind)
            if attempt <= config.backoff_limit_count:
                put(message=f"Retrying after {'failure' if kind == FAILED else 'booking expired'}: {reason}")
                if attempt > retries:  # a Retry per attempt, never on an old request
                    put(RETRY)
                    state["requeueAfterSeconds"] = backoff_seconds(
                        retries, base=config.backoff_base_seconds, cap=config.backoff_max_seconds
                    )
            else:
                put(REJECTED, reason or f"ProvisioningRequest {name} {kind}")
        elif _true(request, CAPACITY_REVOKED) is not None:
            if (workload.get("spec") or {}).get("active", True) is not False and _true(workload, "Finished") is None:
                put(REJECTED, _message(request, CAPACITY_REVOKED))
        elif _true(request, BOOKING_EXPIRED) is not None:
            pass  # admitted: the pods consumed the booking; nothing to retry
        elif _true(request, PROVISIONED) is not None:
            if old_state != READY:
                put(READY, _message(request, PROVISIONED))
                state["podSetUpdates"] = _pod_set_updates(workload, request, config)
        elif _true(request, ACCEPTED) is not None:
            provisioned = find_condition(request, PROVISIONED)
            if provisioned is not None:
                put(PENDING, str(provisioned.get("message") or ""))
        else:
            put(PENDING, "")
    state.setdefault("message", "")
    state.setdefault("lastTransitionTime", format_time(now))
    changed = state != dict(current)
    event = None
    if changed and state.get("state") != old_state:
        event = f"Admission check {check} updated state from {old_state} to {state['state']}"
        if state.get("message"):
            event += f" with message: {state['message']}"
    return CheckUpdate(state, changed, event)


# -- requests to create and delete --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewRequest:
    name: str
    attempt: int
    class_name: str
    parameters: Mapping[str, str]
    pod_sets: tuple[tuple[str, RequestPodSet], ...]
    """(PodTemplate name, pod set) in the order of the request's ``spec.podSets``."""


def request_to_create(
    workload: Mapping[str, Any],
    state: Mapping[str, Any],
    *,
    config: Config,
    request: Mapping[str, Any] | None,
    pod_sets: Sequence[RequestPodSet],
) -> NewRequest | None:
    """The request to create for a check that is not Ready (Kueue's ``syncOwnedProvisionRequest``): the first when
    none exists, the next attempt once the last one Failed (or its booking expired before admission) and the check
    is back to Pending after its Retry; nothing while the check is Retry or Rejected."""
    if not pod_sets or state.get("state") == READY:
        return None
    meta = workload.get("metadata") or {}
    name, check = str(meta.get("name", "")), str(state.get("name"))
    attempt = int(state.get("retryCount") or 0) + 1
    if request is not None:
        expired = _true(request, BOOKING_EXPIRED) is not None and _true(workload, "Admitted") is None
        if not ((_true(request, FAILED) is not None or expired) and state.get("state") == PENDING):
            return None
        last = attempt_of(str((request.get("metadata") or {}).get("name", "")), workload=name, check=check) or 1
        attempt = max(attempt, last + 1)
    new_name = request_name(name, check, attempt)
    parameters = dict(config.parameters)
    for key, value in (meta.get("annotations") or {}).items():
        if str(key).startswith(PROVREQ_ANNOTATION_PREFIX):
            parameters[str(key)[len(PROVREQ_ANNOTATION_PREFIX) :]] = str(value)
    return NewRequest(
        new_name,
        attempt,
        config.class_name,
        parameters,
        tuple((template_name(new_name, ps.name), ps) for ps in pod_sets),
    )


def owner_reference(workload: Mapping[str, Any]) -> Obj:
    meta = workload.get("metadata") or {}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def request_objects(workload: Mapping[str, Any], new: NewRequest) -> tuple[list[Obj], Obj]:
    """The PodTemplates and the ProvisioningRequest for ``new``, all owned by the Workload (so they go with it)."""
    meta = workload.get("metadata") or {}
    namespace = meta.get("namespace")
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    owner = [owner_reference(workload)]
    templates = [
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": pt, "namespace": namespace, "labels": labels, "ownerReferences": owner},
            "template": ps.template,
        }
        for pt, ps in new.pod_sets
    ]
    spec: Obj = {
        "provisioningClassName": new.class_name,
        "podSets": [{"podTemplateRef": {"name": pt}, "count": ps.count} for pt, ps in new.pod_sets],
    }
    if new.parameters:
        spec["parameters"] = dict(new.parameters)
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": new.name, "namespace": namespace, "labels": labels, "ownerReferences": owner},
        "spec": spec,
    }
    return templates, request


def stale_requests(
    requests: Iterable[Mapping[str, Any]], *, keep: Iterable[str], finished: bool
) -> list[Mapping[str, Any]]:
    """Owned requests to delete: all of them once the workload finished, else every one but those kept."""
    kept = set() if finished else set(keep)
    return [r for r in requests if str((r.get("metadata") or {}).get("name")) not in kept]


def active_condition(check: Mapping[str, Any], configs: Mapping[str, Mapping[str, Any]]) -> Obj:
    """The ``Active`` condition of a check of this controller (Kueue's ``acReconciler``): True when its parameters
    name an existing ProvisioningRequestConfig, else False with reason ``BadParametersRef``."""
    config, problem = config_for_check(check, configs)
    if config is not None:
        return {"status": "True", "reason": "Active", "message": "The admission check is active"}
    return {"status": "False", "reason": "BadParametersRef", "message": problem}
