"""Kineto events for the traces tests write by hand, as the PyTorch profiler writes them: ranges on a
CPU thread, runtime launches, and kernels on a device's stream (pid = device, tid = stream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def event(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def step(number: int, ts: float, dur: float, pid: int = 1, tid: int = 1) -> dict:
    return event("user_annotation", f"ProfilerStep#{number}", ts, dur, pid, tid)


def launch(ts: float, corr: int, pid: int = 1, tid: int = 1, dur: float = 1, name: str = "cudaLaunchKernel") -> dict:
    return event("cuda_runtime", name, ts, dur, pid, tid, correlation=corr)


def kernel(
    name: str, ts: float, dur: float, corr: int, device: int = 0, stream: int = 7, pid: int | None = None
) -> dict:
    return event(
        "kernel", name, ts, dur, device if pid is None else pid, stream, device=device, stream=stream, correlation=corr
    )


def write_trace(path: Path, events: list[dict], **top: Any) -> Path:
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path
