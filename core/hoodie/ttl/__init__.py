"""Partition TTL: delete partitions whose newest data is older than ``days.retain`` days, as Hudi's
``KEEP_BY_TIME`` (and ``KEEP_BY_CREATION_TIME``) strategies decide, with a ``replacecommit`` of operation
``DELETE_PARTITION`` (planning, execution, the table service)."""
