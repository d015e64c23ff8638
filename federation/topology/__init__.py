"""Topology-aware placement, failed-node replacement and capacity summaries (pure)."""
