"""Compaction: merge log files into new base files (planning, strategies, triggers, execution)."""
