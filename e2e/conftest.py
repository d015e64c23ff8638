"""Session-scoped fixtures: one local federation shared by every integration test, stopped at the end."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.rig.federation import Federation, FederationSpec, running
from e2e.toolchain import ensure_built


@pytest.fixture(scope="session")
def rig() -> Iterator[Federation]:
    """1 manager + 2 workers of real Kubernetes binaries, kwok nodes, kfed CRDs; no kfed controllers."""
    bins = ensure_built()
    with tempfile.TemporaryDirectory(prefix="kfed-rig-") as tmp, running(Path(tmp), bins, FederationSpec()) as fed:
        yield fed
