"""kprof: GPU kernel profiling with honest statistics."""

__version__ = "0.2.0"
