"""Names a call that kfed's own cluster refuses (403 Forbidden, 401 Unauthorized) where users look.

A refusal is a deployment fault, not a passing one: retrying does not fix it, a change to the ServiceAccount's
RBAC (or its credentials) does. Its caller keeps retrying with backoff, so that the work resumes by itself once the
permission is granted; this module makes the wait visible: an error log line and a Warning Event on the object the
call was for (reason ``Forbidden`` or ``Unauthorized``), once per object and refusal until a call for that object
succeeds again, so a retry loop neither hides the fault nor floods the object's Events.

Not every 403 is a missing permission: the cluster's admission (a policy or webhook, a ResourceQuota) may refuse the
object itself, and the message then says so instead of sending the reader to the chart's RBAC. A create refused
because its namespace is being deleted is no fault at all (the object kfed worked for goes with the namespace): it is
logged, with no Event (there is nowhere left to record one).

A worker cluster refusing kfed-manager's copies is handled elsewhere (``manager.remote_sync``): there the Job can
go to another worker instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from federation.kube.errors import Forbidden, Unauthorized
from federation.kube.recorder import EventSink

log = structlog.get_logger(__name__)

Lookup = Callable[[str], Mapping[str, Any] | None]
"""The object a key names, as the caller's cache holds it (None: not there)."""


def is_refusal(err: BaseException) -> bool:
    """The apiserver refused kfed's credentials or their permissions (not a conflict, an outage or bad input)."""
    return isinstance(err, (Forbidden, Unauthorized))


class RefusalReporter:
    """Reports refusals of calls made for objects with keys (``namespace/name``), once per key and refusal."""

    def __init__(self, *, events: EventSink, component: str, lookup: Lookup, action: str) -> None:
        """``component``: who was refused (``kfed-manager``); ``action``: the Event's action (``Sync``)."""
        self._events = events
        self._component = component
        self._lookup = lookup
        self._action = action
        self._reported: dict[str, str] = {}
        """key -> the refusal last reported for it (its message), until a call for the key succeeds."""

    def __len__(self) -> int:
        """Keys whose last call was refused."""
        return len(self._reported)

    def failed(self, key: str, err: BaseException, retry_in: float | None) -> None:
        """A call made for ``key`` failed with ``err``; reported only when it is a refusal not reported yet."""
        if not is_refusal(err):
            return
        if isinstance(err, Forbidden) and err.namespace_terminating:
            log.info("namespace being deleted", component=self._component, key=key, error=str(err)[:300])
            return
        self.refused(key, err, retry_in=retry_in, regarding=None)

    def refused(
        self, key: str, err: BaseException, *, retry_in: float | None, regarding: Mapping[str, Any] | None
    ) -> None:
        """``err`` (a refusal) answered a call made for ``key``; ``regarding``: the object, when the caller has it."""
        message = str(err)
        if self._reported.get(key) == message:
            return
        self._reported[key] = message
        then = f"; retrying in {retry_in:.1f}s" if retry_in is not None else "; retrying"
        reason = "Unauthorized" if isinstance(err, Unauthorized) else "Forbidden"
        if isinstance(err, Forbidden) and not err.permission_denied:
            hint = f"not a permission: {err.why()}"
            advice = f"Not a missing permission: {err.why()}."
        elif isinstance(err, Unauthorized):
            hint = "check the chart's ServiceAccount token"
            advice = "Its credentials were not accepted (an expired or revoked ServiceAccount token?)."
        else:
            hint = "grant the permission to the chart's ServiceAccount"
            advice = "Its ServiceAccount needs this permission (see the chart's RBAC)."
        log.error("request refused by this cluster", component=self._component, key=key, error=message[:500], hint=hint)
        obj = regarding if regarding is not None else self._lookup(key)
        if obj is None:
            return
        note = f"{self._component} was refused by this cluster's apiserver: {message[:700]}{then}. {advice}"
        self._events.emit(obj, reason=reason, note=note[:1000], action=self._action, event_type="Warning")

    def succeeded(self, key: str) -> None:
        """A call for ``key`` went through: a later refusal is reported again."""
        if self._reported:
            self._reported.pop(key, None)
