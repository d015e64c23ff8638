"""Kueue's quota semantics as a pure library: flavors, cohorts, borrowing, preemption, fair sharing (pure)."""
