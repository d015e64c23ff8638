"""`--config FILE` for kfed-manager and kfed-agent: Kueue's configuration file sets the flags' defaults, flags given
explicitly still win, and what the file holds that kfed does not apply is logged at start (see
``federation.kueue_config``). Lives with the logging setup because both binaries call it before anything else.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import structlog

from federation.admission.api_workloads import ResourceRules
from federation.admission.cycle import CycleConfig
from federation.admission.pods_ready import BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS, WaitForPodsReady
from federation.admission.preemption import FAIR_SHARING_STRATEGY_LISTS, fair_sharing_strategies
from federation.kueue_config import Component, ConfigError, read_configuration

CONFIG_HELP = (
    "Kueue's configuration file (kind Configuration, config.kueue.x-k8s.io/v1beta1 or v1beta2): sets these flags' "
    "defaults; a flag given explicitly wins; fields kfed does not apply are logged at start"
)


def parse_with_config(
    parser: argparse.ArgumentParser, argv: Sequence[str], *, component: Component
) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with the defaults of ``--config`` applied first; an unusable file stops here
    (exit 2) with a message naming the field and the value. ``args.config_warnings`` lists what was ignored;
    ``args.resource_rules`` holds the ``resources`` arguments (:func:`add_resources_arguments`) checked together."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(list(argv))
    warnings: list[str] = []
    if known.config:
        try:
            settings = read_configuration(Path(known.config).read_text(encoding="utf-8"), component=component)
        except (OSError, ConfigError) as err:
            parser.error(f"--config {known.config}: {err}")
        parser.set_defaults(**settings.defaults)
        warnings = settings.warnings
    args = parser.parse_args(list(argv))
    args.config_warnings = warnings
    if hasattr(args, "quota_check_strategy"):
        args.resource_rules = resource_rules(parser, args)
    return args


def log_config_warnings(args: argparse.Namespace) -> None:
    """One warning line per field of the configuration file that kfed does not apply (call after logging is set)."""
    log = structlog.get_logger("config")
    for warning in getattr(args, "config_warnings", ()):
        field, _, why = warning.partition(": ")
        log.warning("config.field_not_applied", field=field, reason=why, file=args.config)


def _prefixes(text: str) -> tuple[str, ...]:
    return tuple(prefix.strip() for prefix in text.split(",") if prefix.strip())


def add_resources_arguments(parser: argparse.ArgumentParser) -> None:
    """Kueue's ``resources`` configuration, the same on both binaries (both admit against quota)."""
    group = parser.add_argument_group("resources", "Kueue's resources configuration: which requests count for quota")
    group.add_argument(
        "--exclude-resource-prefixes",
        type=_prefixes,
        default="",
        help="comma-separated: requested resources whose names start with one of these are ignored for quota",
    )
    group.add_argument(
        "--quota-check-strategy",
        choices=("BlockUndeclared", "IgnoreUndeclared"),
        default="BlockUndeclared",
        help="BlockUndeclared: a request for a resource the ClusterQueue does not cover keeps the workload pending; "
        "IgnoreUndeclared: such requests are ignored",
    )


def _strategy_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    try:
        fair_sharing_strategies(names)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return names


def add_fair_sharing_arguments(parser: argparse.ArgumentParser) -> None:
    """Kueue's ``fairSharing`` (off by default), read by :func:`cycle_config`."""
    fair = parser.add_argument_group("fairSharing", "Kueue's fair sharing (off by default)")
    fair.add_argument(
        "--fair-sharing",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="order admission and pick preemption victims by the queues' weighted dominant-resource share",
    )
    fair.add_argument(
        "--fair-sharing-preemption-strategies",
        type=_strategy_names,
        default=",".join(FAIR_SHARING_STRATEGY_LISTS[-1]),
        help="Kueue's preemptionStrategies, comma-separated: "
        + " or ".join(",".join(names) for names in FAIR_SHARING_STRATEGY_LISTS),
    )


def cycle_config(args: argparse.Namespace) -> CycleConfig:
    """The admission core's scheduler-wide switches from :func:`add_fair_sharing_arguments`'s flags."""
    strategies = fair_sharing_strategies(args.fair_sharing_preemption_strategies)  # argparse parsed the names
    return CycleConfig(fair_sharing=args.fair_sharing, fair_sharing_strategies=strategies)


def add_pods_ready_arguments(parser: argparse.ArgumentParser) -> None:
    """Kueue's ``waitForPodsReady`` (``federation.admission.pods_ready``), ``blockAdmission`` included."""
    ready = parser.add_argument_group(
        "waitForPodsReady", "Kueue's waitForPodsReady (off unless --wait-for-pods-ready-timeout is given)"
    )
    ready.add_argument(
        "--wait-for-pods-ready-timeout",
        type=float,
        default=None,
        help="seconds an admitted workload's pods have to become ready before it is evicted (PodsReadyTimeout)",
    )
    ready.add_argument(
        "--wait-for-pods-ready-recovery-timeout",
        type=float,
        default=None,
        help="seconds a workload whose pods were ready has to become ready again (0 or unset: never evicted for that)",
    )
    ready.add_argument(
        "--wait-for-pods-ready-block-admission",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="admit nothing, in any ClusterQueue, while a workload holding quota is not PodsReady",
    )
    ready.add_argument(
        "--requeuing-backoff-limit-count", type=int, default=None, help="requeues before deactivation (default: none)"
    )
    ready.add_argument("--requeuing-backoff-base-seconds", type=float, default=BACKOFF_BASE_SECONDS)
    ready.add_argument("--requeuing-backoff-max-seconds", type=float, default=BACKOFF_MAX_SECONDS)


def pods_ready_policy(args: argparse.Namespace) -> WaitForPodsReady | None:
    """The :class:`WaitForPodsReady` the arguments of :func:`add_pods_ready_arguments` give; None when off."""
    if args.wait_for_pods_ready_timeout is None:
        return None
    return WaitForPodsReady(
        timeout=args.wait_for_pods_ready_timeout,
        recovery_timeout=args.wait_for_pods_ready_recovery_timeout or None,  # Kueue: 0s disables it
        block_admission=args.wait_for_pods_ready_block_admission,
        backoff_limit_count=args.requeuing_backoff_limit_count,
        backoff_base_seconds=args.requeuing_backoff_base_seconds,
        backoff_max_seconds=args.requeuing_backoff_max_seconds,
    )


def resource_rules(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ResourceRules:
    """The :class:`ResourceRules` of ``args``; Kueue's rule (no prefixes with IgnoreUndeclared) stops the start."""
    ignore = args.quota_check_strategy == "IgnoreUndeclared"
    if ignore and args.exclude_resource_prefixes:
        parser.error("--exclude-resource-prefixes is not allowed with --quota-check-strategy IgnoreUndeclared")
    return ResourceRules(exclude_prefixes=tuple(args.exclude_resource_prefixes), ignore_undeclared=ignore)
