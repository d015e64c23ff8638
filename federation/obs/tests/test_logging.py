import json
import logging

import pytest
import structlog

from federation.obs.logging import configure_logging, drop_empty_values


def test_none_values_are_dropped_and_others_kept() -> None:
    event = {"event": "dispatched", "workload": "ns/wl", "cluster": None}
    assert drop_empty_values(None, "info", event) == {"event": "dispatched", "workload": "ns/wl"}


def test_library_records_come_out_as_the_same_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", fmt="json", component="kfed-test")
    try:
        logging.getLogger("kubernetes_asyncio.rest").warning("retrying %s", "GET /version")
        line = capsys.readouterr().err.strip().splitlines()[-1]
        record = json.loads(line)
        assert record["event"] == "retrying GET /version"
        assert record["level"] == "warning"
        assert record["logger"] == "kubernetes_asyncio.rest"
        assert record["component"] == "kfed-test"
        assert "ts" in record
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
        logging.getLogger().handlers.clear()
