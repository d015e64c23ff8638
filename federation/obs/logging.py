"""structlog configuration shared by kfed-manager and kfed-agent: JSON lines with stable keys.

Keys every controller uses the same way: ``workload`` (namespace/name), ``job``, ``cluster`` (worker name),
``queue`` (LocalQueue or ClusterQueue). ``event`` is the message; ``level`` and ``ts`` are added here.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal

import structlog

LogFormat = Literal["json", "console"]


def drop_empty_values(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Leave out keys whose value is None, so optional context does not print as null."""
    for key in [k for k, v in event_dict.items() if v is None]:
        del event_dict[key]
    return event_dict


def configure_logging(*, level: str = "info", fmt: LogFormat = "json", component: str) -> None:
    """Route structlog (and stdlib logging, e.g. from libraries) to stderr in ``fmt`` at ``level``."""
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use debug, info, warning or error")
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            drop_empty_values,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(component=component)
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, format="%(name)s %(message)s")


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
