from typing import Any

from worker_agent.decisions.foreign_admission import admitted_elsewhere_message, newly_admitted_by

ADMISSION = {"clusterQueue": "cq", "podSetAssignments": []}


def workload(*, admitted: bool, manager: str | None = None) -> dict[str, Any]:
    fields = []
    if manager is not None:
        fields.append(
            {
                "manager": manager,
                "operation": "Apply",
                "subresource": "status",
                "fieldsV1": {"f:status": {"f:admission": {".": {}}, "f:conditions": {}}},
            }
        )
    fields.append({"manager": "kfed-manager", "operation": "Update", "fieldsV1": {"f:spec": {}}})
    return {
        "metadata": {"name": "w", "namespace": "ns", "managedFields": fields},
        "status": {"admission": ADMISSION} if admitted else {},
    }


def test_an_admission_another_field_manager_just_wrote_names_it() -> None:
    assert newly_admitted_by(workload(admitted=False), workload(admitted=True, manager="kueue-admission")) == (
        "kueue-admission"
    )


def test_kfed_agents_own_admissions_and_old_or_unknown_ones_are_not_news() -> None:
    assert newly_admitted_by(workload(admitted=False), workload(admitted=True, manager="kfed-agent")) is None
    # admitted before kfed-agent watched (a list, no old), or admitted already before this change
    assert newly_admitted_by(None, workload(admitted=True, manager="kueue-admission")) is None
    assert (
        newly_admitted_by(
            workload(admitted=True, manager="kueue-admission"), workload(admitted=True, manager="kueue-admission")
        )
        is None
    )
    # not admitted, or admitted with no manager owning the field (nothing to name)
    assert newly_admitted_by(workload(admitted=False), workload(admitted=False, manager="kueue-admission")) is None
    assert newly_admitted_by(workload(admitted=False), workload(admitted=True)) is None


def test_the_message_names_the_manager_and_the_way_out() -> None:
    message = admitted_elsewhere_message("kueue-admission", "ns/w")
    assert "ns/w" in message
    assert "kueue-admission" in message
    assert "uninstall it" in message
