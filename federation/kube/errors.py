"""Typed errors for Kubernetes API calls.

Controllers branch on *what* went wrong (the object is gone, someone else wrote first, the apiserver is
restarting), never on HTTP codes or client-library exception types. This module is the single place where an
apiserver answer (status code + ``Status`` body) or a watch ``ERROR`` event becomes one of a few exceptions.
It is pure: no I/O, no client library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any


class KubeError(Exception):
    """Any failed Kubernetes API call. ``reason`` is the apiserver's ``Status.reason`` when it sent one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.details: Mapping[str, Any] = details or {}

    def __str__(self) -> str:
        # A plain-text body often starts with the code itself ("404 page not found"): say it once.
        code = f"{self.status} " if self.status is not None and not self.message.startswith(str(self.status)) else ""
        reason = f"{self.reason}: " if self.reason else ""
        return f"{code}{reason}{self.message}"


class NotFound(KubeError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class Conflict(KubeError):
    """409 Conflict: resourceVersion or uid precondition failed; re-read and decide again. Never retried."""


class AlreadyExists(KubeError):
    """409 AlreadyExists: a create hit an existing name; adopt it only if it is ours."""


class Gone(KubeError):
    """410: the requested resourceVersion (or list continue token) is compacted; re-list."""


class Invalid(KubeError):
    """400/422: the apiserver rejected the request body; ``message`` carries its field errors. Never retried."""


class Unauthorized(KubeError):
    """401: the credentials were rejected."""


_PERMISSION_DENIAL = re.compile(r'User "[^"]*" cannot ')
"""The authorizer's wording of a 403 (``<resource> is forbidden: User "<name>" cannot <verb> resource …``)."""


class Forbidden(KubeError):
    """403: the authorizer (RBAC) denied the call, or admission did: a policy or webhook, a ResourceQuota, a
    namespace being deleted. Only the first is fixed by granting a permission, so callers say which it was."""

    @property
    def permission_denied(self) -> bool:
        """The authorizer refused the caller's identity this verb on this resource (a missing RBAC rule)."""
        return _PERMISSION_DENIAL.search(self.message) is not None

    @property
    def namespace_terminating(self) -> bool:
        """The object's namespace is being deleted: nothing can be created in it any more."""
        causes = self.details.get("causes") or ()  # a StatusCause's type is its "reason" field in JSON
        return any(isinstance(c, Mapping) and c.get("reason") == "NamespaceTerminating" for c in causes)

    def why(self) -> str:
        """In a few words, what refused it: for a message that names the fix."""
        if self.permission_denied:
            return "a permission is missing"
        if self.namespace_terminating:
            return "the namespace is being deleted"
        return "the cluster's admission refused it (a policy or webhook, or a ResourceQuota)"


class Unavailable(KubeError):
    """The apiserver could not answer: connection refused/reset, timeout, 5xx or 429. Safe to retry later."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, reason=reason, details=details)
        self.retry_after = retry_after


def _parse_status_body(body: bytes | str) -> Mapping[str, Any]:
    if not body:
        return {}
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _short_text(body: bytes | str, limit: int = 300) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (only the delta-seconds form the apiserver sends)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def error_from_status(status: Mapping[str, Any], *, http_status: int | None = None) -> KubeError:
    """Map a ``metav1.Status`` object (response body or watch ERROR event object) to a typed error."""
    raw_code = status.get("code")
    code = raw_code if isinstance(raw_code, int) and raw_code > 0 else http_status
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or reason or (f"HTTP {code}" if code is not None else "unknown error"))
    raw_details = status.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    return _classify(code, reason, message, details, retry_after=None)


def error_from_response(
    http_status: int,
    body: bytes | str,
    *,
    retry_after: str | None = None,
) -> KubeError:
    """Map a non-2xx HTTP answer to a typed error, preferring the ``Status`` body the apiserver sends."""
    parsed = _parse_status_body(body)
    if parsed.get("kind") == "Status" or "reason" in parsed or "message" in parsed:
        reason = str(parsed.get("reason") or "")
        message = str(parsed.get("message") or reason or f"HTTP {http_status}")
        raw_details = parsed.get("details")
        details: Mapping[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    else:
        reason = ""
        message = _short_text(body) or f"HTTP {http_status}"
        if http_status == 404 and message == "404 page not found":  # Go's mux: no API serves this path
            message += " (the server does not serve this resource type; is its CRD installed?)"
        details = {}
    return _classify(http_status, reason, message, details, retry_after=parse_retry_after(retry_after))


def _classify(
    code: int | None,
    reason: str,
    message: str,
    details: Mapping[str, Any],
    *,
    retry_after: float | None,
) -> KubeError:
    kw: dict[str, Any] = {"status": code, "reason": reason, "details": details}
    if reason == "AlreadyExists":
        return AlreadyExists(message, **kw)
    if code == 404 or reason == "NotFound":
        return NotFound(message, **kw)
    if code == 409:
        return Conflict(message, **kw)
    if code == 410 or reason in ("Expired", "Gone"):
        return Gone(message, **kw)
    if code in (400, 422) or reason in ("Invalid", "BadRequest"):
        return Invalid(message, **kw)
    if code == 401:
        return Unauthorized(message, **kw)
    if code == 403:
        return Forbidden(message, **kw)
    if code == 429 or (code is not None and code >= 500):
        if retry_after is None:
            hint = details.get("retryAfterSeconds")
            retry_after = float(hint) if isinstance(hint, int | float) and hint > 0 else None
        return Unavailable(message, retry_after=retry_after, **kw)
    return KubeError(message, **kw)
