"""kfed's CRDs on a real apiserver: every example applies and reads back as sent (plus Kueue's defaults), unknown
fields are refused by name, and the CEL rules fire with the messages the models give locally."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from e2e.rig.federation import CRD_DIR, MANAGER, Federation
from federation.api import parse_object
from federation.api.crdgen import openapi_schema
from federation.api.kinds import model_for
from federation.api.schema import apply_defaults
from federation.api.tests.support import RULE_CASES, example_documents

pytestmark = pytest.mark.integration

CLUSTER = MANAGER
NAMESPACE = "kfed-api-test"
SUFFIX = "-apitest"
DOCS = example_documents()
EXAMPLES = dict(DOCS)


@pytest.fixture(scope="module")
def api(rig: Federation) -> Federation:
    """The rig with kfed's CRDs (re-)applied and a namespace for the namespaced examples."""
    rig.kubectl(CLUSTER, "apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    rig.kubectl(CLUSTER, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    rig.kubectl(CLUSTER, "apply", "-f", "-", input=json.dumps(namespace))
    return rig


def localise(doc: dict[str, Any], tag: str = "") -> dict[str, Any]:
    """A copy with a name of its own (so tests never collide) and the test namespace for namespaced kinds."""
    out = copy.deepcopy(doc)
    out["metadata"]["name"] = f"{doc['metadata']['name']}{tag}{SUFFIX}"
    if model_for(doc["apiVersion"], doc["kind"]).crd.namespaced:
        out["metadata"]["namespace"] = NAMESPACE
    return out


def resource_ref(doc: dict[str, Any]) -> list[str]:
    res = model_for(doc["apiVersion"], doc["kind"]).crd
    ref = [f"{res.plural}.{res.group}/{doc['metadata']['name']}"]
    if res.namespaced:
        ref.append(f"--namespace={doc['metadata']['namespace']}")
    return ref


def create(api: Federation, doc: dict[str, Any]) -> dict[str, Any]:
    """Create the object; write its status through the status subresource, as a controller would."""
    sent = {k: v for k, v in doc.items() if k != "status"}
    created: dict[str, Any] = json.loads(
        api.kubectl(CLUSTER, "create", "-o", "json", "-f", "-", input=json.dumps(sent)).stdout
    )
    if "status" in doc:
        patch = json.dumps({"status": doc["status"]})
        api.kubectl(CLUSTER, "patch", *resource_ref(doc), "--subresource=status", "--type=merge", "-p", patch)
        created = json.loads(api.kubectl(CLUSTER, "get", "-o", "json", *resource_ref(doc)).stdout)
    return created


def delete(api: Federation, doc: dict[str, Any]) -> None:
    api.kubectl(CLUSTER, "delete", "--ignore-not-found", "--wait=false", *resource_ref(doc), check=False)


def refused(api: Federation, doc: dict[str, Any]) -> str:
    """Try to create `doc`; it must be refused. Returns kubectl's error output."""
    result = api.kubectl(CLUSTER, "create", "-f", "-", input=json.dumps(doc), check=False)
    if result.returncode == 0:
        delete(api, doc)
        pytest.fail(f"the apiserver accepted {doc['kind']} {doc['metadata']['name']}")
    return result.stderr


@pytest.mark.parametrize("doc", [d for _, d in DOCS], ids=[i for i, _ in DOCS])
def test_example_applies_and_round_trips(api: Federation, doc: dict[str, Any]) -> None:
    sent = localise(doc)
    try:
        stored = create(api, sent)
        # What the server keeps is what we sent plus the CRD defaults (Kueue's), nothing pruned or changed.
        expected = apply_defaults(openapi_schema(model_for(doc["apiVersion"], doc["kind"])), sent)
        for key in set(expected) | set(stored):
            if key != "metadata":
                assert stored.get(key) == expected.get(key), key
        # The server's form (full metadata included) survives model -> dump unchanged.
        model = parse_object(stored)
        assert model.model_dump(by_alias=True, exclude_none=True, mode="json") == stored
    finally:
        delete(api, sent)


def test_kubectl_apply_accepts_every_example_file(api: Federation) -> None:
    docs = [localise(d, "-apply") for _, d in DOCS]
    manifest = yaml.safe_dump_all([{k: v for k, v in d.items() if k != "status"} for d in docs])
    try:
        api.kubectl(CLUSTER, "apply", "-f", "-", input=manifest)
        api.kubectl(CLUSTER, "apply", "-f", "-", input=manifest)  # idempotent
    finally:
        for doc in docs:
            delete(api, doc)


def test_misspelled_field_is_refused_naming_it(api: Federation) -> None:
    doc = localise(EXAMPLES["clusterqueue.yaml#0"], "-typo")
    doc["spec"]["cohortNmae"] = doc["spec"].pop("cohortName")
    assert 'unknown field "spec.cohortNmae"' in refused(api, doc)


def test_unsupported_kueue_field_is_refused_not_dropped(api: Federation) -> None:
    doc = localise(EXAMPLES["clusterqueue.yaml#1"], "-unsupported")
    doc["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert 'unknown field "spec.admissionScope"' in refused(api, doc)


def test_borrowing_limit_without_cohort_is_refused(api: Federation) -> None:
    doc = localise(EXAMPLES["clusterqueue.yaml#0"], "-nocohort")
    del doc["spec"]["cohortName"]
    assert "borrowingLimit must be nil when cohort is empty" in refused(api, doc)


@pytest.mark.parametrize(("doc_id", "mutate", "message"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_cel_rule_fires_with_the_models_message(api: Federation, doc_id: str, mutate: Any, message: str) -> None:
    doc = localise(EXAMPLES[doc_id], "-cel")
    mutate(doc)
    if "status" in doc:
        # Status rules only run on the status subresource: create a valid object, then write the bad status.
        good = localise(EXAMPLES[doc_id], "-cel")
        create(api, {k: v for k, v in good.items() if k != "status"})
        try:
            result = api.kubectl(
                CLUSTER,
                "patch",
                *resource_ref(doc),
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps({"status": doc["status"]}),
                check=False,
            )
            assert result.returncode != 0
            assert message in result.stderr
        finally:
            delete(api, good)
        return
    assert message in refused(api, doc)


@pytest.mark.parametrize(
    ("doc_id", "patch"),
    [
        ("localqueue.yaml#0", {"spec": {"clusterQueue": "other"}}),
        ("resourceflavor.yaml#2", {"spec": {"topologyName": "other-topology"}}),
        ("admissioncheck.yaml#0", {"spec": {"controllerName": "example.com/other"}}),
    ],
)
def test_immutable_fields(api: Federation, doc_id: str, patch: dict[str, Any]) -> None:
    doc = localise(EXAMPLES[doc_id], "-immutable")
    create(api, doc)
    try:
        result = api.kubectl(CLUSTER, "patch", *resource_ref(doc), "--type=merge", "-p", json.dumps(patch), check=False)
        assert result.returncode != 0
        assert "immutable" in result.stderr
    finally:
        delete(api, doc)


@pytest.mark.parametrize(
    ("doc_id", "patch"),
    [
        ("topology.yaml#0", {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
        ("resourceflavor.yaml#2", {"spec": {"nodeLabels": {"cloud.provider.com/node-group": "gpu-h100"}}}),
        ("resourceflavor.yaml#2", {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}),
    ],
)
def test_what_kueue_v0_20_made_mutable(api: Federation, doc_id: str, patch: dict[str, Any]) -> None:
    doc = localise(EXAMPLES[doc_id], "-mutable")
    create(api, doc)
    try:
        result = api.kubectl(CLUSTER, "patch", *resource_ref(doc), "--type=merge", "-p", json.dumps(patch), check=False)
        assert result.returncode == 0, result.stderr
    finally:
        delete(api, doc)


def test_a_pod_set_min_count_of_zero_is_accepted_as_in_kueue_v0_20(api: Federation) -> None:
    doc = localise(EXAMPLES["workload.yaml#0"], "-mincount")
    with_min = [ps for ps in doc["spec"]["podSets"] if "minCount" in ps]
    assert with_min, "the example needs a pod set with minCount"
    with_min[0]["minCount"] = 0
    doc.pop("status", None)
    try:
        created = create(api, doc)
        assert next(ps.get("minCount") for ps in created["spec"]["podSets"] if "minCount" in ps) == 0
    finally:
        delete(api, doc)


def test_short_names_category_and_printer_columns(api: Federation) -> None:
    cq = localise(EXAMPLES["clusterqueue.yaml#0"], "-columns")
    wl = localise(EXAMPLES["workload.yaml#0"], "-columns")
    lq = localise(EXAMPLES["localqueue.yaml#0"], "-columns")
    for doc in (cq, wl, lq):
        create(api, doc)
    try:
        cq_out = api.kubectl(CLUSTER, "get", "cq", cq["metadata"]["name"]).stdout
        # as in Kueue, the admitted count and the strategy show with -o wide
        assert cq_out.split("\n")[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"]
        wide = api.kubectl(CLUSTER, "get", "cq", cq["metadata"]["name"], "-o", "wide").stdout
        assert wide.split("\n")[0].split() == [
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING",
            "WORKLOADS",
            "ADMITTED",
            "WORKLOADS",
        ]
        assert "team-a" in cq_out
        wl_out = api.kubectl(CLUSTER, "get", "kwl", "-n", NAMESPACE, wl["metadata"]["name"]).stdout
        assert wl_out.split("\n")[0].split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
        lq_out = api.kubectl(CLUSTER, "get", "lq", "-n", NAMESPACE, lq["metadata"]["name"]).stdout
        assert lq_out.split("\n")[0].split() == [
            "NAME",
            "CLUSTERQUEUE",
            "PENDING",
            "WORKLOADS",
            "ADMITTED",
            "WORKLOADS",
        ]
        for short in ("rf", "flavor", "cq", "lq", "queue", "kwl", "wpc", "ccap", "ac", "co", "mkc", "mkconf", "topo"):
            api.kubectl(CLUSTER, "get", short, "-A")
        everything = api.kubectl(CLUSTER, "get", "kueue", "-A", "-o", "name").stdout
        assert f"clusterqueue.kueue.x-k8s.io/{cq['metadata']['name']}" in everything
    finally:
        for doc in (cq, wl, lq):
            delete(api, doc)
