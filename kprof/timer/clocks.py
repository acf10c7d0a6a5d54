"""Clock, temperature, power and throttle readings per round: NVML on NVIDIA, amdsmi on AMD.

Both return the same keys (``sm_clock_mhz``, ``mem_clock_mhz``, ``temperature_c``, ``power_w``,
``throttle_reasons``), each only when the library answers; a missing library records nothing.
The amdsmi reader follows the library's documented Python API and has not run on AMD hardware.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def _read_all(calls: list[tuple[str, Callable[[], Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, call in calls:
        try:
            out[key] = call()
        except Exception:  # an unsupported query (a VM guest, an old driver) leaves its key out
            continue
    return out


class Nvml:
    """nvidia-ml-py (pynvml)."""

    def __init__(self, index: int) -> None:
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.lib = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            self.handle = None

    def read(self) -> dict[str, Any]:
        if self.handle is None:
            return {}
        nv, h = self.lib, self.handle
        return _read_all(
            [
                ("sm_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                ("mem_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                ("temperature_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
                ("throttle_reasons", lambda: int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))),
            ]
        )


class AmdSmi:
    """amdsmi (ROCm): GFX and memory clocks, edge temperature, socket power, throttle status."""

    def __init__(self, index: int) -> None:
        self.handle = None
        try:
            import amdsmi

            amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
            self.lib = amdsmi
            self.handle = amdsmi.amdsmi_get_processor_handles()[index]
        except Exception:
            self.handle = None

    def read(self) -> dict[str, Any]:
        if self.handle is None:
            return {}
        smi, h = self.lib, self.handle
        return _read_all(
            [
                ("sm_clock_mhz", lambda: smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["clk"]),
                ("mem_clock_mhz", lambda: smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)["clk"]),
                (
                    "temperature_c",
                    lambda: smi.amdsmi_get_temp_metric(
                        h, smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureMetric.CURRENT
                    ),
                ),
                ("power_w", lambda: smi.amdsmi_get_power_info(h)["current_socket_power"]),
                ("throttle_reasons", lambda: int(smi.amdsmi_get_gpu_metrics_info(h)["throttle_status"])),
            ]
        )


GPU_ENV = "KPROF_GPU"  # a worker pinned to one GPU (kprof.engine.gpus) is told its host index here


def host_gpu_index(local_index: int) -> int:
    """The host index of this process's GPU ``local_index``: NVML and amdsmi number every GPU of the
    host and ignore CUDA_VISIBLE_DEVICES, so a pinned worker's cuda:0 is GPU ``$KPROF_GPU`` to them."""
    pinned = os.environ.get(GPU_ENV)
    return int(pinned) if pinned is not None and pinned.isdigit() and local_index == 0 else local_index


def clock_reader(index: int, hip: bool) -> Nvml | AmdSmi:
    host = host_gpu_index(index)
    return AmdSmi(host) if hip else Nvml(host)
