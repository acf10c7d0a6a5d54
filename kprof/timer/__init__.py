"""Timers: device time from CUDA/HIP events over captured graphs, or the host clock on a CPU.

A timer prepares each (leg, buffer set) — once, or afresh every round — then times whole rounds:
every sample of every leg in the round's order is enqueued, and the round is synchronised once. It
reports what clock it used, so no host-clock number is ever mistaken for device time.
"""

from __future__ import annotations

from kprof.timer.protocol import CAPTURE_MODES, Item, Timer

__all__ = ["CAPTURE_MODES", "Item", "Timer", "make_timer"]


def make_timer(device: str, graphs: bool = True) -> Timer:
    """CUDA/HIP events on a GPU, over captured graphs or (``graphs`` False) eager calls; the host
    clock on a CPU (labelled as such everywhere)."""
    if device == "cpu":
        from kprof.timer.host import HostTimer

        return HostTimer()
    from kprof.timer.cuda import CudaEventTimer

    return CudaEventTimer(device, graphs)
