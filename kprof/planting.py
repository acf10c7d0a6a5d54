"""Planted delays: a spin of known length appended to a leg, to check that kprof recovers an effect
it was told about (``kprof calibrate``), and the same spin alone, to measure what was planted."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

PLANT = "plant_pct"  # leg param: the leg's work plus a spin of this percentage of the baseline time
SPIN = "spin_pct"  # leg param: that spin alone (measures the planted delay in the same rounds)
KPROF_PARAMS = (PLANT, SPIN)


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, float] | None]:
    """Workload parameters, and the planting instruction kprof handles itself (if any)."""
    workload = {k: v for k, v in params.items() if k not in KPROF_PARAMS}
    for key in KPROF_PARAMS:
        if key in params:
            return workload, (key, float(params[key]))
    return workload, None


def sm_clock_ghz(device: str) -> float:
    """Current SM clock (NVML) or the device's nominal clock; used to turn ns into spin cycles."""
    import torch

    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.device(device).index or 0)
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
