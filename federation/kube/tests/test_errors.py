from __future__ import annotations

import json

import pytest

from federation.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Unauthorized,
    Unavailable,
    error_from_response,
    error_from_status,
)


def status(code: int, reason: str, message: str = "msg", **extra: object) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    body.update(message=message, **extra)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("code", "reason", "kind"),
    [
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (410, "Gone", Gone),
        (422, "Invalid", Invalid),
        (400, "BadRequest", Invalid),
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (429, "TooManyRequests", Unavailable),
        (500, "InternalError", Unavailable),
        (503, "ServiceUnavailable", Unavailable),
        (504, "Timeout", Unavailable),
        (405, "MethodNotAllowed", KubeError),
    ],
)
def test_status_codes_map_to_types(code: int, reason: str, kind: type[KubeError]) -> None:
    err = error_from_response(code, status(code, reason, "the message"))
    assert type(err) is kind
    assert err.status == code
    assert err.reason == reason
    assert err.message == "the message"


def test_already_exists_is_not_a_conflict() -> None:
    assert not isinstance(error_from_response(409, status(409, "AlreadyExists")), Conflict)


def test_invalid_keeps_apiserver_message_and_details() -> None:
    msg = 'Workload.kueue.x-k8s.io "w" is invalid: spec.podSets[0].count: Invalid value: 0'
    err = error_from_response(422, status(422, "Invalid", msg, details={"name": "w", "causes": [{"field": "x"}]}))
    assert isinstance(err, Invalid)
    assert err.message == msg
    assert err.details["name"] == "w"
    assert msg in str(err)


def test_retry_after_header_and_details() -> None:
    err = error_from_response(429, status(429, "TooManyRequests"), retry_after="3")
    assert isinstance(err, Unavailable)
    assert err.retry_after == 3.0
    err = error_from_response(503, status(503, "ServiceUnavailable", details={"retryAfterSeconds": 2}))
    assert isinstance(err, Unavailable)
    assert err.retry_after == 2.0
    err = error_from_response(503, b"", retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    assert isinstance(err, Unavailable)
    assert err.retry_after is None


def test_non_json_body() -> None:
    err = error_from_response(502, b"<html>Bad Gateway</html>")
    assert isinstance(err, Unavailable)
    assert err.message == "<html>Bad Gateway</html>"
    err = error_from_response(404, b"")
    assert isinstance(err, NotFound)
    assert err.message == "HTTP 404"


def test_a_path_no_api_serves_says_so_and_names_its_code_once() -> None:
    err = error_from_response(404, b"404 page not found\n")
    assert isinstance(err, NotFound)
    assert str(err) == "404 page not found (the server does not serve this resource type; is its CRD installed?)"
    assert str(error_from_response(404, b"")) == "404 HTTP 404"


def test_watch_error_event_410_is_gone() -> None:
    obj: dict[str, object] = {"kind": "Status", "message": "too old resource version: 1 (5)", "reason": "Expired"}
    obj["code"] = 410
    err = error_from_status(obj)
    assert isinstance(err, Gone)
    assert "too old" in err.message


def test_watch_error_event_without_code_uses_reason() -> None:
    assert isinstance(error_from_status({"reason": "Expired", "message": "x"}), Gone)
    assert isinstance(error_from_status({"code": 500, "message": "etcd"}), Unavailable)


@pytest.mark.parametrize(
    ("message", "details", "permission", "terminating"),
    [
        (
            'jobs.batch is forbidden: User "system:serviceaccount:kfed-system:kfed" cannot create resource "jobs" in '
            'API group "batch" in the namespace "team"',
            {"group": "batch", "kind": "jobs"},
            True,
            False,
        ),
        ('jobs.batch "a" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1', {}, False, False),
        ('admission webhook "policy.example" denied the request: no GPUs on Sundays', {}, False, False),
        (
            'workloads.kueue.x-k8s.io "w" is forbidden: unable to create new content in namespace team because it is '
            "being terminated",
            {"causes": [{"reason": "NamespaceTerminating", "message": "namespace team is being terminated"}]},
            False,
            True,
        ),
    ],
)
def test_a_403_says_whether_a_permission_is_missing(
    message: str, details: dict[str, object], permission: bool, terminating: bool
) -> None:
    err = error_from_response(403, status(403, "Forbidden", message, details=details))
    assert isinstance(err, Forbidden)
    assert err.permission_denied is permission
    assert err.namespace_terminating is terminating
    assert ("permission" in err.why()) is permission
