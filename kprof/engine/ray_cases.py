"""Cases as Ray tasks (``kprof run --ray auto|ADDRESS``): the same per-case worker, on any node.

Each unfinished case becomes one task that asks for one GPU (``num_gpus=1``; none on a CPU run).
The task runs the case exactly as the local parent does — a worker process, restarted without a
leg that kills it — in a private copy of the run folder on its node, seeded with the case's files
so far (a resumed case continues from its last round), and returns the case's files, status and
timer measurements. The driver writes them into the run folder: no shared filesystem is needed,
and a finished case is never submitted again. Each task measures its own device (copy bandwidth,
self-checks) under ``timer_info["gpus"]["NODE/GPU"]``. A workload given as a .py file must exist
at the same path on every node; bundled workloads come with kprof.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kprof.errors import KprofInputError
from kprof.events import Event
from kprof.store.atomic import write_bytes
from kprof.store.layout import META
from kprof.store.run_folder import RunFolder
from kprof.timer.clocks import GPU_ENV


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise KprofInputError("--ray", "needs Ray: pip install 'kprof[ray]'") from None
    return ray


def case_files(root: Path, index: int) -> dict[str, bytes]:
    """Every file of case ``index`` under a run folder (its parquet parts and traces), by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob(f"*/c{index:03d}[-.]*")) if p.is_file()}


def run_case_in_copy(meta_json: str, index: int, files: dict[str, bytes]) -> dict[str, Any]:
    """On a Ray worker: the case in a private copy of the run folder; its files, status and the
    device's measurements back to the driver."""
    import ray

    from kprof.engine.lifeline import Workers
    from kprof.engine.workers import run_case_workers, worker_env

    with tempfile.TemporaryDirectory(prefix="kprof-ray-") as tmp:
        root = Path(tmp)
        (root / META).write_text(meta_json, encoding="utf-8")
        for rel, data in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        folder = RunFolder(root)
        run = folder.read_run()
        env = worker_env(run.placement.device)
        env.pop(GPU_ENV, None)  # Ray sets CUDA_VISIBLE_DEVICES; the NVML index is the GPU id it gave
        gpu_ids = ray.get_gpu_ids()
        if gpu_ids:
            env[GPU_ENV] = str(int(gpu_ids[0]))
        events: list[Event] = []
        run_case_workers(folder, run, index, env, events.append, Workers())
        done = folder.read_run()  # with the device measurements the case made
        node = ray.get_runtime_context().get_node_id()[:8]
        gpu = f"{node}/{gpu_ids[0] if gpu_ids else 'cpu'}"
        measured = (done.timer_info.get("gpus") or {}).get(env.get(GPU_ENV, ""), done.timer_info)
        return {
            "files": case_files(root, index),
            "status": folder.status(done.case_names[index]).record(),
            "measured": measured,
            "gpu": gpu,
            "events": events,
        }


def _unmeasured(folder: RunFolder) -> str:
    """meta.json as a task receives it: no device measurements, so each task measures its own."""
    run = folder.read_run()
    return run.updated(timer_info={}).to_json()


def store_result(folder: RunFolder, index: int, result: dict[str, Any], label: Callable[[dict], str]) -> None:
    for rel, data in result["files"].items():
        write_bytes(data, folder.root / rel)
    folder.update_case(folder.case_names[index], **{**result["status"], "gpu": result["gpu"]})
    if result["measured"]:
        folder.record_measurements(result["measured"], result["gpu"], label)


def execute_ray(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Every unfinished case as a Ray task; results stored as they come back."""
    from kprof.timer.kernel_time import run_timer_label

    ray = ray_module()
    run = folder.read_run()
    if not ray.is_initialized():
        try:
            ray.init(address=run.placement.ray, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise KprofInputError("--ray", f"cannot reach a Ray cluster at {run.placement.ray!r}: {e}") from None
    task = ray.remote(num_cpus=1, num_gpus=0 if run.placement.device == "cpu" else 1, max_retries=0)(run_case_in_copy)
    meta = _unmeasured(folder)
    pending = {task.remote(meta, i, case_files(folder.root, i)): i for i in folder.unfinished_cases(run)}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready[0])
            result = ray.get(ready[0])
            store_result(
                folder, index, result, lambda info: run_timer_label(run.protocol.timer_mode, _events_label(run), info)
            )
            for event in result["events"]:
                on_event(event)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


def _events_label(run: Any) -> str:
    from kprof.timer.cuda import CUDA_LABEL
    from kprof.timer.host import HOST_LABEL

    return HOST_LABEL if run.placement.device == "cpu" else CUDA_LABEL
