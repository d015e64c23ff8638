"""Kueue's metrics as kfed sets them: names, labels and values, from the pure parts of federation.obs.metrics."""

from __future__ import annotations

import platform
import sys

from prometheus_client.parser import text_string_to_metric_families

from federation.obs.metrics import Metrics, build_info_labels
from federation.version import package_version


def _samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }


def test_build_info_labels_hold_only_what_is_true_of_a_python_process() -> None:
    assert build_info_labels(version="0.3.0", implementation="cpython", system="linux", machine="x86_64") == {
        "git_version": "0.3.0",
        "git_commit": "",
        "build_date": "",
        "go_version": "",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }
    assert build_info_labels(version="1", implementation="pypy", system="linux", machine="aarch64")["platform"] == (
        "linux/arm64"
    )


def test_build_info_is_exported_with_kueues_label_names_and_the_python_version_in_python_info() -> None:
    samples = _samples(Metrics())
    [(labels, value)] = [(dict(ls), v) for (n, ls), v in samples.items() if n == "kueue_build_info"]
    assert value == 1
    assert set(labels) == {"git_version", "git_commit", "build_date", "go_version", "compiler", "platform"}
    assert labels["go_version"] == ""
    assert labels["git_version"] == package_version()
    assert labels["compiler"] == sys.implementation.name
    [python] = [dict(ls) for (n, ls) in samples if n == "python_info"]
    assert python["version"] == platform.python_version()
