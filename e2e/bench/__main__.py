"""`python -m e2e.bench [NAME ...]`: run the named benchmarks (all by default) and print their figures."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "admission": "e2e.bench.admission_bench",
    "topology": "e2e.bench.topology_bench",
    "dispatch": "e2e.bench.dispatch_bench",
    "workqueue": "e2e.bench.workqueue_bench",
    "outage": "e2e.bench.outage_bench",
    "compare": "e2e.bench.compare_bench",
    "soak": "e2e.bench.soak_bench",
    "schedpass": "e2e.bench.schedpass_bench",
    "node-failures": "e2e.bench.node_failure_bench",
    "agent-tas": "e2e.bench.agent_tas_bench",
    "handover": "e2e.bench.handover_bench",
    "requests": "e2e.bench.requests_bench",
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"=== {name} ===", flush=True)
        importlib.import_module(BENCHMARKS[name]).main()
    return 0


sys.exit(main(sys.argv[1:]))
