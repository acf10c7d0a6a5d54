"""Collectors: ways of recording device time other than the event timer (torch profiler, rocprofv3)."""
