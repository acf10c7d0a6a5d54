"""One module per trace format; each defines ``FORMAT`` (see kprof.ingest.registry)."""
