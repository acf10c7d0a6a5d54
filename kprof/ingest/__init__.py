"""Trace ingest: recognise a file's format by its content (kprof.ingest.registry), load it into the
normalized tables (kprof.schema), and assign each kernel its step and annotation
(kprof.ingest.load.load_trace). The package imports nothing itself, so that the Kineto decoder
(kprof.ingest.formats.kineto_stream) can run in a process that never imports pandas."""
