"""Write computed status patches (and finalizer lists) back, each at the resourceVersion it was computed from.

Status that kfed derives (queue counts, conditions) is computed from cached objects; writing it with their
resourceVersion means a stale computation is refused (Conflict) instead of overwriting newer state. The caller
recomputes and tries again on its next pass. Given the caller's :class:`~federation.kube.overlay.WriteOverlay` of
those objects, each write's answer is laid over the cache, so that a computation made before the watch shows the
write starts from the written resourceVersion instead of being refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from federation.kube.api import KubeApi
from federation.kube.errors import Conflict, KubeError, NotFound
from federation.kube.overlay import WriteOverlay
from federation.kube.resources import Resource

log = structlog.get_logger(__name__)


async def write_status_patches(
    api: KubeApi,
    resource: Resource,
    patches: Mapping[str, Mapping[str, Any]],
    *,
    current: Mapping[str, Mapping[str, Any]],
    field_manager: str,
    overlay: WriteOverlay | None = None,
) -> bool:
    """Merge ``patches[key]`` into the status of ``current[key]``; False if any write must be recomputed."""
    all_written = True
    for key, status in patches.items():
        meta = current[key]["metadata"]
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": dict(status)}
        try:
            written = await api.patch_status(
                resource, meta["name"], body, namespace=meta.get("namespace"), field_manager=field_manager
            )
        except (Conflict, NotFound):
            all_written = False
        except KubeError as err:
            all_written = False
            log.warning("status write failed", resource=resource.label, key=key, error=str(err)[:300])
        else:
            if overlay is not None:
                overlay.wrote(dict(current[key]), written)
    return all_written


async def write_finalizers(
    api: KubeApi,
    resource: Resource,
    finalizers: Mapping[str, list[str]],
    *,
    current: Mapping[str, Mapping[str, Any]],
    field_manager: str,
    overlay: WriteOverlay | None = None,
) -> tuple[bool, dict[str, dict[str, Any]]]:
    """Set ``metadata.finalizers`` of ``current[key]`` to ``finalizers[key]`` at the resourceVersion it was decided
    from (a finalizer list is replaced whole, so a stale decision must be refused).

    Returns whether every write was made (False: decide again) and the written objects by key, so that a status
    write computed from the same objects can follow at their new resourceVersion."""
    all_written = True
    written: dict[str, dict[str, Any]] = {}
    for key, value in finalizers.items():
        meta = current[key]["metadata"]
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": value or None}}
        try:
            written[key] = await api.patch(
                resource, meta["name"], body, namespace=meta.get("namespace"), field_manager=field_manager
            )
        except NotFound:
            continue
        except Conflict:
            all_written = False  # decided from a stale object: decided again on the next pass
            continue
        except KubeError as err:
            all_written = False
            log.warning("finalizer write failed", resource=resource.label, key=key, error=str(err)[:300])
            continue
        if overlay is not None:
            overlay.wrote(dict(current[key]), written[key])
        log.info("finalizers updated", resource=resource.label, key=key, finalizers=value)
    return all_written, written
