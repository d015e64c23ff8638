"""Observability: structlog setup, Prometheus metrics and the /healthz and /readyz endpoints."""
