"""Quota reservations decided by the scheduler and held back briefly, so one Workload status write records both the
reservation and the worker's admission.

A dispatch to a kfed-agent worker used to write the manager Workload's status twice within a fraction of a second:
``QuotaReserved`` with the nominated worker, then ``Admitted`` with the worker's name once the agent admitted the
copy. When no other admission check has to see the reservation first, the scheduler now holds the reservation's
write for up to ``--reservation-hold`` seconds: the Workload is shown reserved to this process
(``WriteOverlay.show``), the remote sync sends the Workload copy at once, and the first status write of the
Workload that follows (normally the one marking it Admitted) carries the reservation too. A hold nobody took in time
is written on its own, as before.

What keeps this safe: only the Workload copy may be sent while a reservation is held, never the Job copy (the remote
sync writes the reservation before it starts the Job there), so a manager that stops meanwhile leaves at most a
copy without a running Job, which its successor adopts or deletes as a stray. A held write is based on the
Workload's resourceVersion when it was decided: if anything changed the Workload since, the write is refused
(409 Conflict) and the scheduler decides again, as for any refused write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from federation.kube.overlay import WriteOverlay

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class HeldReservation:
    status: Obj
    """The reservation's status patch."""
    before: Obj
    """The Workload the reservation was decided on."""
    shown: Obj
    """The Workload as the reservation makes it (shown by the Workloads' overlay while held)."""
    settle: Callable[[Obj | None, BaseException | None], None]
    """Told the answer of the write that carried the reservation: the written Workload, or the error."""


class ReservationHolds:
    """The reservations held now, by Workload key: the scheduler puts them, whoever writes the Workload next takes
    one (``take``) and settles it with the answer."""

    def __init__(self, *, seconds: float, workloads: WriteOverlay, on_hold: Callable[[str], None]) -> None:
        self.seconds = seconds
        """How long a reservation may be held (0: never held)."""
        self._workloads = workloads
        self._on_hold = on_hold
        self._held: dict[str, HeldReservation] = {}
        self._sending: set[str] = set()

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: object) -> bool:
        return key in self._held

    def hold(self, key: str, held: HeldReservation) -> None:
        self._held[key] = held
        self._workloads.show(held.before, held.shown)
        self._on_hold(key)

    def take(self, key: str) -> HeldReservation | None:
        """The reservation held for ``key``, now the caller's to write (with its own patch: :func:`carried`)."""
        return self._held.pop(key, None)

    def take_if(self, key: str, held: HeldReservation) -> bool:
        """Take ``held`` if it is still the one held for ``key`` (its hold ran out), to write it on its own: until
        :meth:`sent`, ``key`` is :meth:`sending`."""
        if self._held.get(key) is not held:
            return False
        del self._held[key]
        self._sending.add(key)
        return True

    def sending(self, key: str) -> bool:
        """The reservation of ``key`` is being written on its own: another write decided on the Workload as it
        shows it must wait for that answer (it would be based on the same resourceVersion)."""
        return key in self._sending

    def sent(self, key: str) -> None:
        self._sending.discard(key)


class ReservationNotWritten(RuntimeError):
    """The apiserver refused a write that carried a held reservation (a missing permission): the scheduler names the
    refusal and decides again; the writer's own pass stops without naming it a second time."""


def carried(held: HeldReservation | None, status: Obj) -> Obj:
    """``status`` (decided on the Workload as the held reservation shows it) with the reservation's own fields under
    it: what one merge patch must carry to record both."""
    return status if held is None else {**held.status, **status}
