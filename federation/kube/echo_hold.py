"""Events that come for a key while its pass runs: held to the pass's end, then dropped if they echo its writes.

A controller that skips the echoes of its own writes (``WriteOverlay.observe_echo``) cannot tell one that arrives
before the write's answer: on a busy apiserver the watch event and the answer travel on different connections, and
the event often wins. Taken as news, it marks the key to be reconciled again once the pass ends, for nothing. In a
300-Job burst, 2.5 such events per Job came back to kfed-manager's remote sync during the pass that wrote them.

:class:`EchoHold` keeps, for each key whose pass runs (:meth:`EchoHold.during`), what such an event would have done
(``deliver``). At the pass's end each is checked against the answers the pass's writes got
(``WriteOverlay.answered``): an echo of this writer's is dropped, anything else is delivered then (the key is still
being reconciled, so the work queue runs it again right after, as the event would have made it). An event for a key
with no pass running is delivered at once. Nothing is dropped but an event that names a version this writer's own
write answered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from federation.kube.overlay import WriteOverlay

Obj = dict[str, Any]


class EchoHold:
    """The events held for the running passes of one writer (a reconciler that names its writes ``writer``)."""

    def __init__(self, writer: str) -> None:
        self._writer = writer
        self._held: dict[str, list[tuple[WriteOverlay, Obj, Callable[[], None]]]] = {}

    @contextmanager
    def during(self, key: str) -> Iterator[None]:
        """One pass over ``key``: what comes for it meanwhile is delivered at the end (also when the pass fails),
        unless it is the echo of one of this writer's writes. A work queue never runs one key twice at once."""
        self._held[key] = []
        try:
            yield
        finally:
            for view, obj, deliver in self._held.pop(key):
                if view.answered(obj) != self._writer:
                    deliver()

    def deliver(self, key: str, view: WriteOverlay, obj: Obj, deliver: Callable[[], None]) -> None:
        """An event about ``obj`` (as ``view``'s cache got it) that concerns ``key``: ``deliver()`` now, or, while a
        pass over ``key`` runs, at its end if the event does not echo one of its writes."""
        held = self._held.get(key)
        if held is None:
            deliver()
        else:
            held.append((view, obj, deliver))

    def holding(self, key: str) -> int:
        """Events held for ``key``'s running pass (0 when none runs)."""
        return len(self._held.get(key, ()))
