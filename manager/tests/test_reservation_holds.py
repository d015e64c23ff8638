from __future__ import annotations

from typing import Any

from federation.kube.overlay import WriteOverlay
from federation.kube.store import Store
from manager.reservation_holds import HeldReservation, ReservationHolds, carried


def workload(rv: str, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "wl", "namespace": "ns", "resourceVersion": rv}, "status": status}


RESERVATION = {
    "conditions": [{"type": "QuotaReserved", "status": "True"}],
    "admission": {"clusterQueue": "cq"},
    "nominatedClusterNames": ["worker-1"],
}


def holds_with(store: Store) -> tuple[ReservationHolds, WriteOverlay, list[str], list[tuple[Any, Any]]]:
    view = WriteOverlay(store)
    woken: list[str] = []
    holds = ReservationHolds(seconds=2.0, workloads=view, on_hold=woken.append)
    return holds, view, woken, []


def held_for(before: dict[str, Any], settled: list[tuple[Any, Any]]) -> HeldReservation:
    return HeldReservation(
        status=RESERVATION,
        before=before,
        shown={**before, "status": RESERVATION},
        settle=lambda written, err: settled.append((written, err)),
    )


def test_a_held_reservation_is_shown_and_wakes_the_remote_sync() -> None:
    store = Store()
    before = workload("1", {})
    store.upsert(before)
    holds, view, woken, settled = holds_with(store)
    held = held_for(before, settled)
    holds.hold("ns/wl", held)
    assert woken == ["ns/wl"]
    assert "ns/wl" in holds
    assert view.get("ns/wl") == held.shown  # the remote sync sees it reserved and sends the copy
    assert holds.take("ns/wl") is held
    assert holds.take("ns/wl") is None  # one writer carries it
    assert len(holds) == 0


def test_a_hold_that_ran_out_is_being_sent_until_answered() -> None:
    store = Store()
    before = workload("1", {})
    store.upsert(before)
    holds, _view, _woken, settled = holds_with(store)
    held = held_for(before, settled)
    holds.hold("ns/wl", held)
    other = held_for(before, settled)
    assert not holds.take_if("ns/wl", other)  # not the one held: left alone
    assert holds.take_if("ns/wl", held)
    assert "ns/wl" not in holds
    assert holds.sending("ns/wl")  # a write decided on the shown Workload must wait for this one's answer
    holds.sent("ns/wl")
    assert not holds.sending("ns/wl")


def test_a_refused_carrier_shows_the_cached_workload_again() -> None:
    store = Store()
    before = workload("1", {})
    store.upsert(before)
    holds, view, _woken, settled = holds_with(store)
    held = held_for(before, settled)
    holds.hold("ns/wl", held)
    taken = holds.take("ns/wl")
    assert taken is not None
    view.unshow(taken.shown)  # what the scheduler does when it is told the carrier was refused
    assert view.get("ns/wl") == before


def test_the_carrying_patch_keeps_the_reservation_under_its_own_fields() -> None:
    before = workload("1", {})
    held = held_for(before, [])
    admitted = {
        "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
        "clusterName": "worker-1",
        "nominatedClusterNames": None,
    }
    patch = carried(held, admitted)
    assert patch["admission"] == {"clusterQueue": "cq"}  # only the reservation had it
    assert patch["conditions"] == admitted["conditions"]  # decided on the shown Workload: it already has both
    assert patch["nominatedClusterNames"] is None  # Kueue: clusterName replaces the nomination
    assert carried(None, admitted) is admitted
