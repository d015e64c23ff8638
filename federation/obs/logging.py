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
    # Libraries log through the standard library: render their records as the same lines (JSON with event, level,
    # ts, component, and the library's logger name), not as plain text inside the JSON stream.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
                drop_empty_values,
                structlog.processors.format_exc_info,
            ],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
