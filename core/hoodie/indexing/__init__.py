"""Indexing: building metadata-table partitions (column stats, bloom filters, record index, ...) of an
existing table, as a table service (Hudi's ``indexing`` action)."""
