"""Benchmarks (`make bench`): measured, printed, never asserted."""
