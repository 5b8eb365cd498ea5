"""hoodied: the table-services daemon for Apache Hudi, built on :mod:`hoodie`."""
