"""Savepoints and restores: keeping a commit's files from the cleaner, and taking the table back to one.

:mod:`~hoodie.savepoint.savepoint` creates and deletes savepoints (Hudi's ``savepoint`` action);
:mod:`~hoodie.savepoint.restore` plans and runs a restore to a savepoint (Hudi's ``restore`` action). The
order its instants compare in is :mod:`~hoodie.savepoint.ordering`, :mod:`~hoodie.savepoint.rollback` rolls
each later instant back, and :mod:`~hoodie.savepoint.metadata_table` brings the metadata table along.
"""
