from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from federation.kube.store import ADDED, DELETED, MODIFIED, Store, diff_relist


def obj(name: str, rv: str = "1", *, ns: str | None = "ns", uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": uid or f"uid-{name}"}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta}


def keyed(*objs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for o in objs:
        m = o["metadata"]
        out[f"{m['namespace']}/{m['name']}" if m.get("namespace") else m["name"]] = o
    return out


def test_diff_emits_deleted_added_modified() -> None:
    old = keyed(obj("a"), obj("b"), obj("c"))
    new = keyed(obj("b", "2"), obj("c"), obj("d"))
    changes = diff_relist(old, new)
    assert [(c.type, c.obj["metadata"]["name"]) for c in changes] == [
        (DELETED, "a"),
        (MODIFIED, "b"),
        (ADDED, "d"),
    ]
    modified = changes[1]
    assert modified.old is not None
    assert modified.old["metadata"]["resourceVersion"] == "1"


def test_diff_recreated_object_is_delete_then_add() -> None:
    old = keyed(obj("a", uid="u1"))
    new = keyed(obj("a", "5", uid="u2"))
    changes = diff_relist(old, new)
    assert [(c.type, c.obj["metadata"]["uid"]) for c in changes] == [(DELETED, "u1"), (ADDED, "u2")]


def test_diff_of_identical_is_empty() -> None:
    state = keyed(obj("a"), obj("b"))
    assert diff_relist(state, dict(state)) == []


def test_store_basics_and_namespace_index() -> None:
    store = Store()
    assert store.upsert(obj("a", ns="x")) is None
    assert store.upsert(obj("b", ns="y")) is None
    assert store.upsert(obj("n", ns=None)) is None
    previous = store.upsert(obj("a", "2", ns="x"))
    assert previous is not None
    assert previous["metadata"]["resourceVersion"] == "1"
    assert len(store) == 3
    assert "x/a" in store
    assert store.get_by_name("a", namespace="x") == obj("a", "2", ns="x")
    assert store.get_by_name("n") == obj("n", ns=None)
    assert [o["metadata"]["name"] for o in store.list(namespace="x")] == ["a"]
    assert sorted(store.namespaces()) == ["x", "y"]
    removed = store.delete("y/b")
    assert removed is not None
    assert store.namespaces() == ["x"]
    assert store.delete("y/b") is None
    assert store.delete(obj("a", ns="x")) is not None
    assert store.list(namespace="x") == []
    assert sorted(store.keys()) == ["n"]
    assert store.items() == [("n", obj("n", ns=None))]


def test_replace_all_returns_changes_and_rebuilds_index() -> None:
    store = Store()
    store.upsert(obj("a", ns="x"))
    store.upsert(obj("b", ns="x"))
    changes = store.replace_all([obj("b", "2", ns="x"), obj("c", ns="z")])
    assert [c.type for c in changes] == [DELETED, MODIFIED, ADDED]
    assert sorted(store.keys()) == ["x/b", "z/c"]
    assert sorted(store.namespaces()) == ["x", "z"]


names = st.sampled_from(["a", "b", "c", "d", "e"])
states = st.dictionaries(names, st.tuples(st.sampled_from(["1", "2"]), st.sampled_from(["u1", "u2"])), max_size=5)


@given(before=states, after=states)
def test_replaying_the_diff_reproduces_the_new_state(
    before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]
) -> None:
    old = {n: obj(n, rv, ns=None, uid=uid) for n, (rv, uid) in before.items()}
    new = {n: obj(n, rv, ns=None, uid=uid) for n, (rv, uid) in after.items()}
    replayed = dict(old)
    for change in diff_relist(old, new):
        name = change.obj["metadata"]["name"]
        if change.type == DELETED:
            assert replayed.pop(name)["metadata"]["uid"] == change.obj["metadata"]["uid"]
        else:
            assert (name in replayed) == (change.type == MODIFIED)
            replayed[name] = change.obj
    assert replayed == new


def test_version_changes_with_every_change_of_the_content_and_only_then() -> None:
    store = Store()
    seen = [store.version]
    store.upsert(obj("a"))
    seen.append(store.version)
    store.upsert(obj("a", "2"))  # replaced
    seen.append(store.version)
    assert store.delete("ns/missing") is None  # nothing removed: same content, same version
    assert store.version == seen[-1]
    store.delete("ns/a")
    seen.append(store.version)
    store.replace_all([obj("b")])
    seen.append(store.version)
    assert len(set(seen)) == len(seen)
    unchanged = store.version
    _ = store.get("ns/b"), store.items(), list(store)
    assert store.version == unchanged


def test_a_new_store_never_repeats_the_version_of_another() -> None:
    first = Store()
    first.upsert(obj("a"))
    second = Store()  # e.g. a cache reset after its watch stopped
    assert second.version not in (first.version, Store().version)
