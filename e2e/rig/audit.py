"""Count API writes from the apiservers' audit logs, by client (user agent) and verb.

The rig's audit policy records every create/update/patch/delete at Metadata level, so counting lines is exact:
no client-side counter can forget a retried request.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def client_of(user_agent: str) -> str:
    """``kfed-manager/0.1.0 ...`` → ``kfed-manager``; kube components keep their binary name."""
    return user_agent.split("/", 1)[0].split(" ", 1)[0] or "unknown"


def count_writes(lines: Iterable[str]) -> Counter[tuple[str, str, str]]:
    """(client, verb, resource) → number of completed write requests."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        counts[(client_of(event.get("userAgent", "")), event["verb"], resource)] += 1
    return counts


def writes_in(path: Path) -> Counter[tuple[str, str, str]]:
    if not path.exists():
        return Counter()
    with path.open(encoding="utf-8", errors="replace") as handle:
        return count_writes(handle)


def created_names(path: Path, *, resource: str, client: str) -> list[str]:
    """``namespace/name`` of every object of ``resource`` that ``client`` created successfully."""
    names: list[str] = []
    if not path.exists():
        return names
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            ref = event.get("objectRef") or {}
            code = (event.get("responseStatus") or {}).get("code", 0)
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") == "create"
                and ref.get("resource") == resource
                and not ref.get("subresource")
                and client_of(event.get("userAgent", "")) == client
                and 200 <= code < 300
            ):
                names.append(f"{ref.get('namespace', '')}/{ref.get('name', '')}")
    return names
