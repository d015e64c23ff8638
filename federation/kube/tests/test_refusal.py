"""A call kfed's own cluster refuses is named once per object and refusal, and again after a success."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.kube.errors import Conflict, Forbidden, Unauthorized
from federation.kube.refusal import RefusalReporter

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"namespace": "team", "name": "a", "uid": "u"}}
DENIED = Forbidden(
    'workloads.kueue.x-k8s.io "a" is forbidden: User "system:serviceaccount:kfed-system:kfed-manager" cannot patch '
    'resource "workloads/status" in API group "kueue.x-k8s.io" in the namespace "team"',
    status=403,
    reason="Forbidden",
)
OVER_QUOTA = Forbidden(
    'jobs.batch "a" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, '
    "limited: count/jobs.batch=0",
    status=403,
    reason="Forbidden",
)
TERMINATING = Forbidden(
    'workloads.kueue.x-k8s.io "a" is forbidden: unable to create new content in namespace team because it is being '
    "terminated",
    status=403,
    reason="Forbidden",
    details={"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
)


class _Events:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def emit(
        self, regarding: Mapping[str, Any], *, reason: str, note: str, action: str, event_type: str = "Normal"
    ) -> None:
        self.sent.append({"regarding": regarding, "reason": reason, "note": note, "type": event_type})


def _reporter(events: _Events) -> RefusalReporter:
    return RefusalReporter(events=events, component="kfed-manager", lookup={"team/a": JOB}.get, action="Reconcile")


def test_a_refusal_is_a_warning_event_on_the_object_once_until_a_call_succeeds() -> None:
    events = _Events()
    reporter = _reporter(events)
    reporter.failed("team/a", DENIED, 0.4)
    reporter.failed("team/a", DENIED, 0.8)  # the queue's retry, refused the same way
    assert len(events.sent) == 1
    sent = events.sent[0]
    assert (sent["regarding"], sent["reason"], sent["type"]) == (JOB, "Forbidden", "Warning")
    assert "is forbidden" in sent["note"]
    assert "retrying in 0.4s" in sent["note"]
    assert "RBAC" in sent["note"]
    assert len(reporter) == 1
    reporter.succeeded("team/a")
    assert len(reporter) == 0
    reporter.failed("team/a", DENIED, 5.0)
    assert len(events.sent) == 2, "refused again after a success: reported again"
    assert "retrying in 5.0s" in events.sent[1]["note"]


def test_only_refusals_are_reported_and_a_new_refusal_is_reported_again() -> None:
    events = _Events()
    reporter = _reporter(events)
    reporter.failed("team/a", Conflict("stale", status=409), 0.1)
    reporter.failed("team/a", RuntimeError("a bug"), 0.1)
    assert events.sent == []
    reporter.failed("team/a", DENIED, 0.1)
    reporter.failed("team/a", Unauthorized("token expired", status=401), 0.2)
    assert [e["reason"] for e in events.sent] == ["Forbidden", "Unauthorized"]


def test_an_object_the_cache_does_not_hold_gets_only_the_log_line() -> None:
    events = _Events()
    reporter = _reporter(events)
    reporter.failed("team/gone", DENIED, 1.0)
    assert events.sent == []
    assert len(reporter) == 1
    reporter.refused("team/gone", DENIED, retry_in=None, regarding=JOB)
    assert events.sent == [], "the same refusal is not reported twice, with or without the object"


def test_a_403_that_is_not_a_permission_says_so_instead_of_blaming_rbac() -> None:
    events = _Events()
    reporter = _reporter(events)
    assert DENIED.permission_denied
    assert not OVER_QUOTA.permission_denied
    reporter.failed("team/a", OVER_QUOTA, 1.0)
    [sent] = events.sent
    assert sent["reason"] == "Forbidden"
    assert "exceeded quota" in sent["note"]
    assert "Not a missing permission: the cluster's admission refused it" in sent["note"]
    assert "RBAC" not in sent["note"]


def test_a_create_in_a_namespace_being_deleted_is_no_fault() -> None:
    events = _Events()
    reporter = _reporter(events)
    assert TERMINATING.namespace_terminating
    assert not TERMINATING.permission_denied
    reporter.failed("team/a", TERMINATING, 1.0)
    assert events.sent == []
    assert len(reporter) == 0, "nothing is waiting on a permission"
    assert TERMINATING.why() == "the namespace is being deleted"
