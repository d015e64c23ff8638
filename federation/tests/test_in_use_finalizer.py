"""Kueue's resource-in-use finalizer on Workloads: when kfed lifts it (``federation.admission.in_use_finalizer``)."""

from __future__ import annotations

from typing import Any

from federation.admission.in_use_finalizer import RESOURCE_IN_USE_FINALIZER, in_use_finalizer_due
from federation.tests.api_builders import admitted_status, workload


def _with(finalizers: list[str], **meta: Any) -> dict[str, Any]:
    wl = workload("w", status=admitted_status("cq", "rf", "1"))
    wl["metadata"] = {**wl["metadata"], "finalizers": finalizers, **meta}
    return wl


def _finished(wl: dict[str, Any]) -> dict[str, Any]:
    conditions = [*wl["status"]["conditions"], {"type": "Finished", "status": "True", "reason": "Succeeded"}]
    return {**wl, "status": {**wl["status"], "conditions": conditions}}


def test_kueues_finalizer_is_lifted_once_the_workload_finished_or_is_being_deleted() -> None:
    running = _with([RESOURCE_IN_USE_FINALIZER])
    assert not in_use_finalizer_due(running), "a running Workload keeps it, as in Kueue"
    assert in_use_finalizer_due(_finished(running))
    assert in_use_finalizer_due(_with([RESOURCE_IN_USE_FINALIZER], deletionTimestamp="2026-01-01T00:00:00Z"))


def test_a_workload_without_kueues_finalizer_needs_nothing() -> None:
    assert not in_use_finalizer_due(_finished(_with([])))
    assert not in_use_finalizer_due(_finished(_with(["example.com/other"], deletionTimestamp="2026-01-01T00:00:00Z")))
