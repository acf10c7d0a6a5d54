"""Triton compile metadata (registers, spills, shared memory, warps, stages, resident programs per SM)
of the kernels a call launches."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any


def _jit_functions(module_prefixes: tuple[str, ...]) -> list[Any]:
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return []
    found = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(module_prefixes):
            continue
        found.extend(v for v in vars(module).values() if isinstance(v, JITFunction))
    return found


def _compiled(fn: Any) -> Iterator[Any]:
    for caches in getattr(fn, "device_caches", {}).values():
        kernel_cache = caches[0] if isinstance(caches, tuple) else caches
        yield from getattr(kernel_cache, "values", lambda: [])()


@contextmanager
def recording_launches() -> Iterator[set[int]]:
    """Collect the driver function handles of every Triton launch inside the block."""
    handles: set[int] = set()
    try:
        import triton.knobs as knobs
    except ImportError:
        yield handles
        return
    previous = knobs.runtime.launch_enter_hook

    def hook(metadata: Any) -> None:
        with suppress(Exception):  # a launch without metadata is simply not recorded
            handles.add(int(metadata.get()["function"]))
        if previous is not None:
            previous(metadata)

    knobs.runtime.launch_enter_hook = hook
    try:
        yield handles
    finally:
        knobs.runtime.launch_enter_hook = previous


def compile_metadata(call: Callable[[], None], module_prefixes: tuple[str, ...]) -> list[dict[str, Any]]:
    """Run ``call`` once and describe each compiled Triton kernel it launched (empty under the interpreter)."""
    with recording_launches() as handles:
        call()
    rows = []
    for fn in _jit_functions(module_prefixes):
        for kernel in _compiled(fn):
            if int(getattr(kernel, "function", 0) or 0) not in handles:
                continue
            meta = kernel.metadata
            rows.append(
                {
                    "kernel": kernel.name,
                    "num_warps": getattr(meta, "num_warps", None),
                    "num_stages": getattr(meta, "num_stages", None),
                    "shared_bytes": getattr(meta, "shared", None),
                    "registers": getattr(kernel, "n_regs", None),
                    "spills": getattr(kernel, "n_spills", None),
                    "programs_per_sm": programs_per_sm(kernel),
                }
            )
    return rows


MAX_BLOCKS_PER_SM = 32  # every NVIDIA architecture since Maxwell
REGISTER_ALLOCATION = 256  # registers are granted per warp in units of 256
RESERVED_SHARED_PER_BLOCK = 1024  # the CUDA runtime keeps 1 KiB of shared memory per resident block


def occupancy(
    num_warps: int, registers: int, shared_bytes: int, threads_per_sm: int, registers_per_sm: int, shared_per_sm: int
) -> int:
    """Resident blocks per SM by the CUDA occupancy rules: the least of the thread, register and
    shared-memory limits (a program needs all of its warps resident at once)."""
    by_threads = threads_per_sm // (32 * num_warps)
    per_warp = -(-registers * 32 // REGISTER_ALLOCATION) * REGISTER_ALLOCATION
    by_registers = (registers_per_sm // per_warp) // num_warps if per_warp else by_threads
    by_shared = shared_per_sm // (shared_bytes + RESERVED_SHARED_PER_BLOCK)
    return max(0, min(by_threads, by_registers, by_shared, MAX_BLOCKS_PER_SM))


def fits_shared_memory(kernel: Any) -> bool:
    """Whether a compiled Triton kernel's shared memory fits the current device (Triton refuses to
    launch it otherwise); True under the interpreter (None) and when the metadata cannot be read."""
    try:
        import torch
        import triton

        if kernel is None or not torch.cuda.is_available():
            return True
        limit = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())["max_shared_mem"]
        return int(kernel.metadata.shared) <= int(limit)
    except Exception:  # metadata of another Triton version: let the launch decide
        return True


def programs_per_sm(kernel: Any) -> int | None:
    """Resident programs per SM of a compiled Triton kernel on the current CUDA device; None under
    the interpreter and on ROCm, whose rules (wave64, VGPR granules) are not modelled here."""
    try:
        import torch
        import triton

        if torch.version.hip or not torch.cuda.is_available() or getattr(kernel, "n_regs", None) is None:
            return None
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        regs = triton.runtime.driver.active.utils.get_device_properties(index)["max_num_regs"]
        return occupancy(
            int(kernel.metadata.num_warps),
            int(kernel.n_regs),
            int(kernel.metadata.shared),
            int(props.max_threads_per_multi_processor),
            int(regs),
            int(props.shared_memory_per_multiprocessor),
        )
    except Exception:  # metadata of another Triton version: occupancy is simply not reported
        return None
