"""Cases sharded over a host's GPUs (``kprof run --gpus``): which GPUs, how a worker is pinned to
one, and which part of the run's timer measurements is its own.

Every leg of a case runs in one worker on one GPU, so no ratio ever mixes two GPUs. A worker is
pinned with CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and told its host index in ``KPROF_GPU``:
NVML and amdsmi number every GPU of the host and ignore the visibility variables. Each GPU measures
its own copy bandwidth and self-checks (``timer_info["gpus"][index]``) in the first case it runs.
On a CPU, ``--gpus N`` runs N workers at once: a stand-in that tests the sharding, no GPU involved.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from kprof.errors import KprofInputError
from kprof.run_model import Run
from kprof.store.run_folder import RunFolder
from kprof.timer.clocks import GPU_ENV
from kprof.timer.kernel_time import run_timer_label


def parse_gpus(spec: str | None, device: str) -> list[int]:
    """``all`` | ``N`` (the first N GPUs) | ``0,2`` (these) → host indices; [] for one device as before."""
    if spec is None:
        return []
    spec = spec.strip()
    if device == "cpu":
        if not spec.isdigit() or int(spec) < 1:
            raise KprofInputError("--gpus", "there is no GPU here: on a CPU, --gpus N runs N workers at once (a test)")
        return list(range(int(spec)))
    import torch

    count = torch.cuda.device_count()
    if spec == "all":
        return list(range(count))
    if spec.isdigit():
        if not 1 <= int(spec) <= count:
            raise KprofInputError("--gpus", f"asks for {spec} GPUs; this host has {count}")
        return list(range(int(spec)))
    if not re.fullmatch(r"\d+(,\d+)*", spec):
        raise KprofInputError("--gpus", f"expected all, a count or a list like 0,1; got {spec!r}")
    indices = [int(x) for x in spec.split(",")]
    if len(set(indices)) != len(indices):
        raise KprofInputError("--gpus", f"names a GPU twice: {spec}")
    missing = [i for i in indices if i >= count]
    if missing:
        raise KprofInputError("--gpus", f"GPU {missing[0]} does not exist ({count} here)")
    return indices


def pinned_env(env: dict[str, str], gpu: int | None, device: str) -> dict[str, str]:
    """The environment of a worker that runs on host GPU ``gpu`` only (None: unchanged)."""
    if gpu is None:
        return env
    out = dict(env, **{GPU_ENV: str(gpu)})
    if device != "cpu":
        out["CUDA_VISIBLE_DEVICES"] = out["HIP_VISIBLE_DEVICES"] = str(gpu)
    return out


def own_gpu() -> str | None:
    """This worker's GPU as a key of ``timer_info["gpus"]``; None when the run is not sharded."""
    return os.environ.get(GPU_ENV)


def gpu_timer_info(timer_info: dict[str, Any], gpu: str | None) -> dict[str, Any]:
    """The measurements of host GPU ``gpu`` (the run's own when not sharded)."""
    return timer_info if gpu is None else (timer_info.get("gpus") or {}).get(gpu, {})


def own_timer_info(timer_info: dict[str, Any]) -> dict[str, Any]:
    """The measurements of this worker's GPU."""
    return gpu_timer_info(timer_info, own_gpu())


def record_device(
    folder: RunFolder, case: str, gpu: str | None, describe: Callable[[bool], tuple[str, dict[str, Any]]]
) -> tuple[Run, str]:
    """The timer's description for ``case`` and, once per GPU (in the first case to run on it), that
    GPU's copy bandwidth and self-checks: ``describe(measure)`` gives the timer's label and its
    description, with the measurements when asked. Measured outside the folder's lock (seconds of GPU
    work), stored under it: other GPUs' cases write the same meta.json. Returns the run and the label."""
    run = folder.read_run()
    measure = "measured_in_case" not in gpu_timer_info(run.timer_info, gpu)
    label, info = describe(measure)
    if measure:
        measured = {**info, "measured_in_case": case}
        run = folder.record_measurements(measured, gpu, lambda i: run_timer_label(run.protocol.timer_mode, label, i))
    folder.update_case(case, device_name=info.get("device_name"), device_uuid=info.get("device_uuid"), gpu=gpu)
    return run, label
