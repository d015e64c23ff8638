"""Fixtures for async integration tests: the anyio backend and a throwaway namespace on worker-1."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from e2e.integration.kube_support import WORKER, kubectl
from e2e.rig.federation import Federation


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def namespace(rig: Federation) -> AsyncIterator[str]:
    name = f"it-{uuid.uuid4().hex[:8]}"
    await kubectl(rig, WORKER, "create", "namespace", name)
    try:
        yield name
    finally:
        await kubectl(rig, WORKER, "delete", "namespace", name, "--wait=false")
