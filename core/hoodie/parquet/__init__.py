"""Parquet below pyarrow's API: the footer's Thrift encoding, and a writer encoding columns in parallel."""
