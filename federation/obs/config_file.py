"""`--config FILE` for kfed-manager and kfed-agent: Kueue's configuration file sets the flags' defaults, flags given
explicitly still win, and what the file holds that kfed does not apply is logged at start (see
``federation.kueue_config``). Lives with the logging setup because both binaries call it before anything else.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import structlog

from federation.kueue_config import Component, ConfigError, read_configuration

CONFIG_HELP = (
    "Kueue's configuration file (kind Configuration, config.kueue.x-k8s.io/v1beta1 or v1beta2): sets these flags' "
    "defaults; a flag given explicitly wins; fields kfed does not apply are logged at start"
)


def parse_with_config(
    parser: argparse.ArgumentParser, argv: Sequence[str], *, component: Component
) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with the defaults of ``--config`` applied first; an unusable file stops here
    (exit 2) with a message naming the field and the value. ``args.config_warnings`` lists what was ignored."""
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
    return args


def log_config_warnings(args: argparse.Namespace) -> None:
    """One warning line per field of the configuration file that kfed does not apply (call after logging is set)."""
    log = structlog.get_logger("config")
    for warning in getattr(args, "config_warnings", ()):
        field, _, why = warning.partition(": ")
        log.warning("config.field_not_applied", field=field, reason=why, file=args.config)
