"""The clock readers against stand-in modules with the libraries' documented Python APIs."""

from __future__ import annotations

import sys
import types
from enum import IntEnum

from kprof.timer.clocks import AmdSmi, Nvml, clock_reader


def _fake_amdsmi() -> types.ModuleType:
    smi = types.ModuleType("amdsmi")
    smi.AmdSmiInitFlags = IntEnum("AmdSmiInitFlags", "INIT_AMD_GPUS")
    smi.AmdSmiClkType = IntEnum("AmdSmiClkType", "GFX MEM")
    smi.AmdSmiTemperatureType = IntEnum("AmdSmiTemperatureType", "EDGE")
    smi.AmdSmiTemperatureMetric = IntEnum("AmdSmiTemperatureMetric", "CURRENT")
    smi.amdsmi_init = lambda flags: None
    smi.amdsmi_get_processor_handles = lambda: ["gpu0", "gpu1"]
    smi.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100 if kind == smi.AmdSmiClkType.GFX else 1300}
    smi.amdsmi_get_temp_metric = lambda h, sensor, metric: 41
    smi.amdsmi_get_power_info = lambda h: {"current_socket_power": 512}

    def metrics(h):
        raise RuntimeError("not supported on this guest")

    smi.amdsmi_get_gpu_metrics_info = metrics
    return smi


def test_amdsmi_reader_maps_the_documented_calls(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", _fake_amdsmi())
    reader = clock_reader(1, hip=True)
    assert isinstance(reader, AmdSmi) and reader.handle == "gpu1"
    # An unsupported query leaves its key out instead of failing the round.
    assert reader.read() == {"sm_clock_mhz": 2100, "mem_clock_mhz": 1300, "temperature_c": 41, "power_w": 512}


def test_missing_libraries_record_nothing(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert AmdSmi(0).read() == {} and Nvml(0).read() == {}
