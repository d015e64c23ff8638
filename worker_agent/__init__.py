"""kfed-agent: local admission with topology-aware placement and node-failure repair on one worker cluster."""
