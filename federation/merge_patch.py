"""JSON merge patch (RFC 7386) applied in memory (pure): what the apiserver makes of a merge patch.

Used to show a write in flight as it will land (the scheduler's view of its own status patches) and to build an
object as another writer's patch would leave it (a Job copy created already started, ``manager.decisions``).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def apply_merge_patch(target: Obj, patch: Obj) -> Obj:
    """``target`` as a JSON merge patch (RFC 7386) leaves it: ``None`` removes a key, objects merge key by key,
    anything else (lists too) replaces. Shows a write in flight as the apiserver will make it."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            before = out.get(key)
            out[key] = apply_merge_patch(before if isinstance(before, dict) else {}, value)
        else:
            out[key] = value
    return out
