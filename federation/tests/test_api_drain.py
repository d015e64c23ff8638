from federation.admission.api_drain import drain
from federation.admission.decisions import Admit, Wait
from federation.tests.api_builders import cluster_queue, flavor, local_queue, state, workload


def _state(*workloads: dict[str, object], strategy: str = "BestEffortFIFO"):  # type: ignore[no-untyped-def]
    return state(
        flavors=[flavor("default")],
        queues=[cluster_queue("cq", {"default": {"cpu": "4"}}, queueingStrategy=strategy)],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=list(workloads),
    )


def test_a_vetoed_admission_waits_with_the_veto_message_and_leaves_quota_to_others() -> None:
    quota = _state(
        workload("a", cpu="3", created="2026-01-01T00:00:00Z"),
        workload("b", cpu="3", created="2026-01-01T00:00:01Z"),
    )
    decisions = drain(
        quota, now_seconds=0, veto=lambda admit: "no worker has room" if admit.workload.key == "ns/a" else None
    )
    by_key = {d.workload.key: d for d in decisions}
    assert isinstance(by_key["ns/a"], Wait)
    assert by_key["ns/a"].message == "no worker has room"
    assert isinstance(by_key["ns/b"], Admit), "the vetoed workload's quota must stay free for the next one"


def test_a_vetoed_strict_fifo_head_blocks_its_queue() -> None:
    quota = _state(
        workload("a", cpu="1", created="2026-01-01T00:00:00Z"),
        workload("b", cpu="1", created="2026-01-01T00:00:01Z"),
        strategy="StrictFIFO",
    )
    decisions = drain(quota, now_seconds=0, veto=lambda admit: "no worker" if admit.workload.key == "ns/a" else None)
    assert [d.workload.key for d in decisions if isinstance(d, Admit)] == []
