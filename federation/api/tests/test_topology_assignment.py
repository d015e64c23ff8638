"""The compressed v1beta2 topology-assignment encoding decodes to the domains it was built from."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from federation.api.workload import TopologyAssignment

VALUE = st.text(alphabet="abc-123", min_size=1, max_size=8)


def test_decodes_prefix_roots_and_universal_values() -> None:
    assignment = TopologyAssignment.model_validate(
        {
            "levels": ["block", "rack"],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [{"universalValue": "b1"}, {"prefix": "rack-", "roots": ["1", "2"]}],
                    "podCounts": [4, 2],
                },
                {
                    "domainCount": 1,
                    "valuesPerLevel": [{"roots": ["b2"]}, {"roots": ["r9"], "suffix": "-x"}],
                    "universalPodCount": 3,
                },
            ],
        }
    )
    assert assignment.domains() == [(("b1", "rack-1"), 4), (("b1", "rack-2"), 2), (("b2", "r9-x"), 3)]


@given(
    st.integers(min_value=1, max_value=3).flatmap(
        lambda n: st.lists(
            st.tuples(st.tuples(*[VALUE] * n), st.integers(min_value=1, max_value=50)), min_size=1, max_size=20
        )
    )
)
def test_from_domains_round_trips(domains: list[tuple[tuple[str, ...], int]]) -> None:
    levels = [f"level-{i}" for i in range(len(domains[0][0]))]
    encoded = TopologyAssignment.from_domains(levels, domains)
    again = TopologyAssignment.model_validate(encoded.model_dump(mode="json"))
    assert again.domains() == domains
