"""kprof: GPU kernel profiling with honest statistics."""

__version__ = "0.1.0"
