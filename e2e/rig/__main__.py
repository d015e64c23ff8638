"""`python -m e2e.rig up|down|status`: a local federation from a shell.

python -m e2e.rig up --workers 2 --dir /tmp/kfed-rig [--nodes-per-worker 8] [--no-controllers] [--from-charts]
python -m e2e.rig down --dir /tmp/kfed-rig
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from e2e.queues import apply_sample_queues, apply_tas_queues
from e2e.rig.cluster import RigError
from e2e.rig.federation import Federation, FederationSpec, read_state_records, stop_directory
from e2e.rig.nodes import NodeShape
from e2e.toolchain import ensure_built
from e2e.toolchain.build import ToolchainError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m e2e.rig", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start 1 manager + N worker clusters")
    up.add_argument("--dir", type=Path, required=True, help="where state, kubeconfigs and logs go")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--nodes-per-worker", type=int, default=NodeShape.count)
    up.add_argument("--job-seconds", type=float, default=5.0, help="how long Job pods run before Succeeded")
    up.add_argument("--no-controllers", action="store_true", help="do not start kfed-manager and kfed-agents")
    up.add_argument(
        "--from-charts",
        action="store_true",
        help="install kfed with its Helm charts and run each controller as its Deployment says, with only its "
        "ServiceAccount's token; join the workers with `kubectl kfed add-worker`",
    )
    up.add_argument(
        "--sample-queues",
        action="store_true",
        help=(
            "also create the demo's queues in namespace default on every cluster, sized to the workers: user-queue, "
            "and tas-queue over a Topology (block, rack, host) and a TAS ResourceFlavor"
        ),
    )
    down = sub.add_parser("down", help="stop everything a previous `up` started in DIR")
    down.add_argument("--dir", type=Path, required=True)
    status = sub.add_parser("status", help="list the rig's processes and whether they run")
    status.add_argument("--dir", type=Path, required=True)
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "down":
        left = stop_directory(args.dir)
        if left:
            print(f"still running after SIGKILL: {', '.join(left)}", file=sys.stderr)
            return 1
        print(f"rig in {args.dir} stopped")
        return 0
    if args.command == "status":
        for record in read_state_records(args.dir):
            print(f"{record.name:40} pid {record.pid:>7}  {'running' if record.alive() else 'stopped'}")
        return 0
    try:
        bins = ensure_built()
        spec = FederationSpec(
            workers=args.workers,
            default_shape=NodeShape(count=args.nodes_per_worker),
            job_seconds=args.job_seconds,
            controllers=not args.no_controllers,
            from_charts=args.from_charts,
        )
        fed = Federation(args.dir, bins, spec, die_with_parent=False)
        seconds = fed.up()
    except (RigError, ToolchainError) as err:
        print(f"rig: {err}", file=sys.stderr)
        return 1
    if args.sample_queues:
        apply_sample_queues(fed)
        apply_tas_queues(fed)
    print(f"rig up in {seconds:.1f}s: {args.dir}")
    for name in fed.clusters:
        print(f"  {name:10} {fed.clusters[name].server}  kubeconfig {fed.kubeconfig(name)}")
    print(f"  kubectl:   {bins / 'kubectl'}")
    print(f"  stop with: python -m e2e.rig down --dir {args.dir}")
    (args.dir / "summary.json").write_text(json.dumps({"up_seconds": round(seconds, 2)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
