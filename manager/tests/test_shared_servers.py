from __future__ import annotations

from manager.decisions.shared_servers import (
    duplicate_message,
    manager_cluster_message,
    names_reaching,
    same_object,
    used_name,
)

ADDRESSES = {"worker-1": "https://10.0.0.1:6443", "twin": "https://10.0.0.1:6443", "worker-2": "https://10.0.0.2:6443"}


def test_the_names_reaching_a_server_are_those_whose_kubeconfig_names_its_address() -> None:
    assert names_reaching("worker-1", ADDRESSES) == {"worker-1", "twin"}
    assert names_reaching("twin", ADDRESSES) == {"worker-1", "twin"}
    assert names_reaching("worker-2", ADDRESSES) == {"worker-2"}
    assert names_reaching("broken", ADDRESSES) == {"broken"}  # no usable kubeconfig: only itself


def test_the_oldest_cluster_is_used_then_the_first_by_name_and_one_not_listed_yet_counts_as_newest() -> None:
    created = {"worker-1": "2026-12-01T10:00:00Z", "twin": "2026-12-06T20:00:00Z"}
    assert used_name(frozenset({"worker-1", "twin"}), created) == "worker-1"
    assert used_name(frozenset({"b", "a"}), {"a": "2026-12-01T10:00:00Z", "b": "2026-12-01T10:00:00Z"}) == "a"
    assert used_name(frozenset({"worker-1", "new"}), {"worker-1": "2026-12-01T10:00:00Z"}) == "worker-1"


def test_the_cluster_connected_to_the_server_already_is_used_whatever_its_age() -> None:
    # worker-1's kubeconfig edited to reach worker-2's server: worker-2, connected there, goes on; worker-1 is refused
    created = {"worker-1": "2026-12-01T10:00:00Z", "worker-2": "2026-12-02T10:00:00Z"}
    assert used_name(frozenset({"worker-1", "worker-2"}), created, in_use=frozenset({"worker-2"})) == "worker-2"


def test_the_message_names_the_server_and_the_cluster_used_for_it() -> None:
    message = duplicate_message(address="https://10.0.0.1:6443", used="worker-1")
    assert "https://10.0.0.1:6443" in message
    assert "'worker-1'" in message


def test_a_cluster_reaching_the_manager_says_which_of_the_managers_objects_it_found_and_what_brings_it_back() -> None:
    message = manager_cluster_message(kind="Workload", namespace="team-a", name="job-train-1a2b3")
    assert "reaches the manager cluster itself" in message
    assert "Workload team-a/job-train-1a2b3 there is the manager's own" in message
    assert message.endswith("not used until its kubeconfig changes")


def test_one_object_seen_through_two_names_has_one_uid_and_the_message_names_both_spellings() -> None:
    seen = {"metadata": {"namespace": "default", "name": "train", "uid": "u-1"}}
    assert same_object(seen, {"metadata": {"namespace": "default", "name": "train", "uid": "u-1"}})
    assert not same_object(seen, {"metadata": {"namespace": "default", "name": "train", "uid": "u-2"}})
    assert not same_object(seen, None)
    assert not same_object({"metadata": {}}, {"metadata": {}}), "no uid: nothing to tell by"
    message = duplicate_message(
        address="https://localhost:6443", used="worker-1", used_address="https://127.0.0.1:6443"
    )
    assert message.startswith(
        "its kubeconfig reaches https://localhost:6443 (the server at https://127.0.0.1:6443: the same objects are "
        "seen through both), the API server MultiKueueCluster 'worker-1' reaches"
    )
