"""Planted delays: a spin of known length appended to a leg, to check that kprof recovers an effect
it was told about (``kprof calibrate``), and the same spin alone, to measure what was planted."""

from __future__ import annotations

import time
from collections.abc import Callable

from kprof.timer.clocks import host_gpu_index


def sm_clock_ghz(device: str) -> float:
    """Current SM clock (NVML) or the device's nominal clock; used to turn ns into spin cycles."""
    import torch

    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(host_gpu_index(torch.device(device).index or 0))
        return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) / 1000.0
    except Exception:
        return torch.cuda.get_device_properties(device).clock_rate / 1e6


def spin(device: str, ns: float) -> Callable[[], None]:
    """A callable that keeps the device (or, on a CPU, the host) busy for about ``ns`` nanoseconds."""
    if device == "cpu":

        def host_spin() -> None:
            end = time.perf_counter_ns() + ns
            while time.perf_counter_ns() < end:
                pass

        return host_spin
    import torch

    cycles = max(1, int(ns * sm_clock_ghz(device)))
    return lambda: torch.cuda._sleep(cycles)


def with_spin(work: Callable[[], None], delay: Callable[[], None]) -> Callable[[], None]:
    """The leg's work followed by the planted delay, as one callable (captured as one graph)."""

    def planted() -> None:
        work()
        delay()

    return planted
