"""Reading a kfed process's ``/metrics`` (and its other HTTP endpoints) in the rig's scenarios."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from e2e.rig.federation import Federation

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get_url(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def port_of(fed: Federation, process: str, key: str) -> int:
    release = next(r for r in fed.releases if r.process == process)
    return int(release.values[key])


def scrape(fed: Federation, process: str = "kfed-manager") -> Series:
    status, text = get_url(f"http://127.0.0.1:{port_of(fed, process, 'metricsPort')}/metrics")
    assert status == 200, text
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return series


def value(series: Series, name: str, /, **labels: str) -> float:
    """The sum of ``name`` over the series whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in series.items() if n == name and wanted <= ls)


def has(series: Series, name: str, /, **labels: str) -> bool:
    wanted = set(labels.items())
    return any(n == name and wanted <= ls for (n, ls) in series)


def changes(before: Series, after: Series) -> Callable[..., float]:
    """``changes(before, after)(name, **labels)``: how much :func:`value` moved between the two scrapes."""
    return lambda metric, /, **labels: value(after, metric, **labels) - value(before, metric, **labels)
