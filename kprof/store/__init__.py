"""Storage: run folders (meta.json and parquet parts written round by round) and saved trace tables.

Every parquet table has a declared pyarrow schema (``run_tables`` for runs, ``kprof.schema`` for
traces), and every file is written atomically (a ``.partial`` file renamed into place), so an
interrupted run never leaves a half-written part behind.
"""
