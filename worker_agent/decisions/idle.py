"""When one of the agent's passes can be skipped: nothing it reads changed since it last found nothing to do.

Why this module exists: the reconciler is level-triggered, so a change of any watched kind runs a whole pass. In a
burst most of those changes are a Job's status updates (the Job controller writes several per Job), which local
admission never reads; yet each pass classified every Workload again, charged every quota holder into a new
snapshot and looked at every Workload's admission checks, and nothing came of it. A pass that wrote nothing and
whose inputs (a stamp of versions, e.g. ``World.admission_stamp``) are unchanged would decide the same again, unless
a time it waits for (a requeue backoff ending) has come. Pure: stamps and times in, a verdict out.
"""

from __future__ import annotations

from collections.abc import Hashable


class IdleInputs:
    """The stamp of the inputs under which a pass last found nothing to do (None: it must run)."""

    def __init__(self) -> None:
        self._stamp: Hashable | None = None
        self.skipped = 0
        """Passes skipped so far."""

    def unchanged(self, stamp: Hashable | None, *, now: float, due: float | None = None) -> bool:
        """True when the pass can be skipped: ``stamp`` (None: cannot tell, run) is the stamp of its last idle run and
        ``due`` (epoch seconds of a timed wake-up it asked for, e.g. the end of a requeue backoff) has not come.
        When the pass is to run, the last stamp is forgotten until :meth:`ran` records how it went, so a pass that
        fails half-way is never taken for an idle one."""
        if stamp is not None and stamp == self._stamp and (due is None or now < due):
            self.skipped += 1
            return True
        self._stamp = None
        return False

    def ran(self, stamp: Hashable | None, *, acted: bool) -> None:
        """The pass ran on the inputs of ``stamp`` (taken before it read them); ``acted``: it wrote something or
        tried to (a write that fails pulls the trigger and must be decided again), so the next pass runs."""
        self._stamp = None if acted else stamp


__all__ = ["IdleInputs"]
