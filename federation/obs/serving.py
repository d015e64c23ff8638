"""Process plumbing both kfed binaries share: the health and metrics listeners, and shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import signal

import anyio
import anyio.abc
import structlog

from federation.obs.health import HealthEndpoints
from federation.obs.metrics import Metrics

log = structlog.get_logger(__name__)


async def _serve(
    endpoints: HealthEndpoints,
    host: str,
    port: int,
    *,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    await endpoints.serve(host=host, port=port, task_status=task_status)


async def start_listeners(
    tg: anyio.abc.TaskGroup,
    health: HealthEndpoints,
    *,
    metrics: Metrics,
    bind_address: str,
    health_port: int,
    metrics_port: int,
) -> tuple[int, int]:
    """Serve /healthz /readyz /metrics on ``health_port`` and /metrics alone on ``metrics_port`` (-1: none).

    Port 0 picks a free port; the bound ports are returned (health, metrics).
    """
    bound_health = int(await tg.start(_serve, health, bind_address, health_port))
    if metrics_port < 0 or metrics_port == health_port:
        return bound_health, bound_health
    bound_metrics = int(await tg.start(_serve, HealthEndpoints(metrics=metrics.exposition), bind_address, metrics_port))
    return bound_health, bound_metrics


async def cancel_on_signal(scope: anyio.CancelScope, *, component: str) -> None:
    """Cancel ``scope`` (a graceful shutdown) at the first SIGTERM or SIGINT."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("shutting down", component=component, signal=signal.Signals(signum).name)
            scope.cancel()
            return
