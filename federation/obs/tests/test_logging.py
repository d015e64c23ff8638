from federation.obs.logging import drop_empty_values


def test_none_values_are_dropped_and_others_kept() -> None:
    event = {"event": "dispatched", "workload": "ns/wl", "cluster": None}
    assert drop_empty_values(None, "info", event) == {"event": "dispatched", "workload": "ns/wl"}
