import json

import pytest

from federation.api.labels import HOSTNAME_LABEL
from federation.topology import Placement, TopologyAssignment, decode_assignment, encode_placement, expand_ranks, place
from federation.topology.encoding import encode_domains
from federation.topology.tests.helpers import BLOCK, RACK, grid, request, snapshot_of


def test_kueue_example_shape_with_prefix_and_universal() -> None:
    assignment = encode_domains([BLOCK, RACK], [(("block-1", "rack-1"), 4), (("block-1", "rack-2"), 2)])
    assert assignment.to_dict() == {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universalValue": "block-1"},
                    {"prefix": "rack-", "roots": ["1", "2"]},
                ],
                "podCounts": [4, 2],
            }
        ],
    }


def test_suffix_and_universal_pod_count() -> None:
    assignment = encode_domains([HOSTNAME_LABEL], [(("n-a.example",), 1), (("n-b.example",), 1)])
    encoded = assignment.to_dict()["slices"][0]
    assert encoded["valuesPerLevel"][0] == {"prefix": "n-", "suffix": ".example", "roots": ["a", "b"]}
    assert encoded["universalPodCount"] == 1
    assert "podCounts" not in encoded


def test_json_is_what_the_workload_crd_accepts() -> None:
    """The JSON validates against kfed's Workload model (Kueue's v1beta2 TopologyAssignment) and reads back."""
    from federation.api.workload import TopologyAssignment as ApiAssignment

    assignment = encode_domains(
        [BLOCK, RACK], [(("block-1", "rack-1"), 4), (("block-1", "rack-2"), 2), (("block-2", "x"), 2)]
    )
    data = assignment.to_dict()
    model = ApiAssignment.model_validate(data)
    assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == data
    assert TopologyAssignment.from_dict(data) == assignment


def test_overlapping_prefix_and_suffix_do_not_overlap() -> None:
    domains = [(("ababa",), 1), (("aba",), 2)]
    assert decode_assignment(encode_domains([HOSTNAME_LABEL], domains)) == domains


def test_hostname_lowest_keeps_only_hostname_and_ranks_follow_order() -> None:
    snapshot = snapshot_of(grid(1, 2, 2))
    result = place(snapshot, request(20, required=BLOCK))
    assert isinstance(result, Placement)
    assignment = encode_placement(result)
    assert assignment.levels == (HOSTNAME_LABEL,)
    ranks = expand_ranks(assignment)
    expected = [(entry.values[-1],) for entry in result.node_pods for _ in range(entry.count)]
    assert ranks == expected


def test_expand_with_pinned_ranks_fills_the_rest_in_order() -> None:
    assignment = encode_domains([HOSTNAME_LABEL], [(("a",), 2), (("b",), 2)])
    assert expand_ranks(assignment, pinned={0: ("b",)}) == [("b",), ("a",), ("a",), ("b",)]
    with pytest.raises(ValueError, match="no slot"):
        expand_ranks(assignment, pinned={0: ("c",)})


@pytest.mark.parametrize(
    "bad",
    [
        {"levels": [], "slices": []},
        {"levels": ["x"], "slices": [{"domainCount": 1, "valuesPerLevel": [], "universalPodCount": 1}]},
        {
            "levels": ["x"],
            "slices": [{"domainCount": 2, "valuesPerLevel": [{"universalValue": "a"}], "podCounts": [1]}],
        },
        {
            "levels": ["x"],
            "slices": [
                {
                    "domainCount": 1,
                    "valuesPerLevel": [{"universalValue": "a", "roots": ["a"]}],
                    "universalPodCount": 1,
                }
            ],
        },
    ],
)
def test_invalid_assignments_are_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TopologyAssignment.from_dict(bad)


def test_forty_thousand_pods_encode_small() -> None:
    domains = [((f"node-b{b:02d}-r{r:02d}-h{h:02d}",), 1) for b in range(40) for r in range(25) for h in range(40)]
    assignment = encode_domains([HOSTNAME_LABEL], domains)
    encoded = json.dumps(assignment.to_dict(), separators=(",", ":"))
    assert len(encoded) < 1_500_000 // 3
    assert len(assignment.slices) <= 1000
    assert decode_assignment(TopologyAssignment.from_dict(json.loads(encoded))) == domains
