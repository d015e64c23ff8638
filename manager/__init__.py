"""kfed-manager: global Kueue queues on the manager cluster, capacity-probed dispatch, Job status sync."""
