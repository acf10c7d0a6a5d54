"""Triton compile metadata (registers, spills, shared memory, warps, stages) of the kernels a call launches."""

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
                }
            )
    return rows
