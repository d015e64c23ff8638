"""Small builders for manager tests, in Kueue's test-builder style."""

from __future__ import annotations

import copy
from typing import Any


class JobBuilder:
    def __init__(self, name: str, namespace: str = "team-a") -> None:
        self._job: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": {}},
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "suspend": True,
                "managedBy": "kueue.x-k8s.io/multikueue",
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": f"uid-{name}"}},
                "template": {
                    "metadata": {
                        "labels": {"batch.kubernetes.io/controller-uid": f"uid-{name}", "job-name": name, "app": "x"}
                    },
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
                },
            },
        }

    def queue(self, name: str) -> JobBuilder:
        self._job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = name
        return self

    def label(self, key: str, value: str) -> JobBuilder:
        self._job["metadata"]["labels"][key] = value
        return self

    def priority_class(self, name: str) -> JobBuilder:
        self._job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = name
        return self

    def parallelism(self, parallelism: int, completions: int | None = None) -> JobBuilder:
        self._job["spec"]["parallelism"] = parallelism
        self._job["spec"]["completions"] = completions
        return self

    def request(self, resource: str, amount: str) -> JobBuilder:
        container = self._job["spec"]["template"]["spec"]["containers"][0]
        container.setdefault("resources", {}).setdefault("requests", {})[resource] = amount
        return self

    def toleration(self, key: str, value: str) -> JobBuilder:
        spec = self._job["spec"]["template"]["spec"]
        spec.setdefault("tolerations", []).append({"key": key, "operator": "Equal", "value": value})
        return self

    def suspended(self, suspend: bool) -> JobBuilder:
        self._job["spec"]["suspend"] = suspend
        return self

    def annotation(self, key: str, value: str) -> JobBuilder:
        self._job["metadata"].setdefault("annotations", {})[key] = value
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._job)


def make_job(name: str, namespace: str = "team-a") -> JobBuilder:
    return JobBuilder(name, namespace)
