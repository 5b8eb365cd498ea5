"""Log compaction: merge a file slice's log blocks into a few new ones, leaving its base file alone
(configuration and trigger, planning, the log-only merge, execution)."""
