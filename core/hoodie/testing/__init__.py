"""Writing Hudi tables for tests, benchmarks and the demo: :mod:`hoodie.testing.table_writer` (Hudi's upsert,
insert, bulk insert and delete, committed as Hudi's writers commit) and :mod:`hoodie.testing.generate`
(reproducible trip tables of any version and layout). Not used by the table services themselves."""
