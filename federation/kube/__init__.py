"""The only package that talks to Kubernetes: clients from kubeconfigs, list+watch caches, retries, leases.

Public API (manager/ and worker_agent/ import from here; nothing else may import kubernetes_asyncio/aiohttp):

- :class:`KubeApi` — one per cluster; every call (get/list/create/replace/patch/apply/delete/watch/events)
  goes through it, with typed errors, retries of ``Unavailable``, QPS/burst limiting and call counting.
- ``federation.kube.clients``: ``connect_kubeconfig_text`` / ``connect_kubeconfig_file`` / ``connect_in_cluster``
  and ``ClusterClients`` build and close real clients (kept out of this namespace so importing the pure parts
  does not load kubernetes_asyncio); :func:`validate_kubeconfig_text` checks Secret kubeconfigs.
- :class:`WatchCache` — list+watch informer with a :class:`Store`, handlers and channels.
- :class:`LeaderElector` / :class:`LeaderElectionConfig` — Lease-based leader election.
- ``resources`` — :class:`Resource` descriptors (``JOBS``, ``WORKLOADS``, ...).

Integration tests (``e2e/integration/test_kube_*.py``) exercise all of it against a real kube-apiserver; the unit
tests here cover only the pure parts (errors, paths, store diffs, events, lease records, rate limits, backoff).
"""

from federation.kube import resources
from federation.kube.api import (
    FieldValidation,
    KubeApi,
    Obj,
    ObjectList,
    PatchType,
    Propagation,
    RetryPolicy,
    WatchEvent,
    object_key,
)
from federation.kube.cache import Backoff, Handler, WatchCache
from federation.kube.counters import ApiCallCounter
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
)
from federation.kube.kubeconfig import KubeconfigError, validate_kubeconfig, validate_kubeconfig_text
from federation.kube.leader import LeaderElectionConfig, LeaderElector
from federation.kube.ratelimit import RateLimiter, TokenBucket
from federation.kube.resources import Resource
from federation.kube.store import ADDED, DELETED, MODIFIED, Change, Store

__all__ = [
    "ADDED",
    "DELETED",
    "MODIFIED",
    "AlreadyExists",
    "ApiCallCounter",
    "Backoff",
    "Change",
    "Conflict",
    "FieldValidation",
    "Forbidden",
    "Gone",
    "Handler",
    "Invalid",
    "KubeApi",
    "KubeError",
    "KubeconfigError",
    "LeaderElectionConfig",
    "LeaderElector",
    "NotFound",
    "Obj",
    "ObjectList",
    "PatchType",
    "Propagation",
    "RateLimiter",
    "Resource",
    "RetryPolicy",
    "Store",
    "TokenBucket",
    "Unauthorized",
    "Unavailable",
    "WatchCache",
    "WatchEvent",
    "object_key",
    "resources",
    "validate_kubeconfig",
    "validate_kubeconfig_text",
]
