"""What a call launches: every Triton kernel launch inside a block, with its grid and arguments.

Used by the correctness gate (a leg whose features change nothing in its launches is a silent
no-op: a mistyped feature name in a workload's ``launch`` looks exactly like that) and by tests.
Works for compiled kernels and under the interpreter (``TRITON_INTERPRET=1``): both launch through
``run(*args, grid=…, warmup=False, **kwargs)``, which is wrapped for the duration of the block; the
launch itself goes ahead unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_active: list[list[Launch]] = []
_dry: list[bool] = []
_patched: set[type] = set()


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: list[Any]
    signature: str  # JSON: scalar arguments as given, tensors as shape/stride/dtype/address

    def record(self) -> dict[str, Any]:
        """The launch as the launches table holds it (the grid as JSON text)."""
        return {"kernel": self.kernel, "grid": json.dumps(self.grid), "signature": self.signature}


def launch_rows(case: str, by_leg: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of the launches table (kprof.store.run_tables): each leg's recorded launches, numbered
    in the order they were made."""
    return [dict(x, case=case, leg=leg, index=i) for leg, xs in by_leg.items() for i, x in enumerate(xs)]


def _describe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "data_ptr"):
        return {
            "shape": list(shape),
            "stride": list(value.stride()),
            "dtype": str(value.dtype),
            "ptr": int(value.data_ptr()),
        }
    if isinstance(value, (tuple, list)):
        return [_describe(v) for v in value]
    return type(value).__name__


def _grid(grid: Any, kwargs: dict[str, Any]) -> list[Any]:
    if callable(grid):
        try:
            grid = grid(kwargs)
        except Exception:
            return ["callable"]
    return [int(g) if isinstance(g, int) else _describe(g) for g in (grid if isinstance(grid, tuple) else (grid,))]


def _wrap(cls: type) -> None:
    if cls in _patched:
        return
    original = cls.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if _active and not warmup:
            name = getattr(getattr(self, "fn", None), "__name__", None) or getattr(
                self, "__name__", type(self).__name__
            )
            signature = json.dumps(
                {"args": [_describe(a) for a in args], "kwargs": {k: _describe(v) for k, v in sorted(kwargs.items())}},
                sort_keys=True,
            )
            for recorder in _active:
                recorder.append(Launch(str(name), _grid(grid, kwargs), signature))
            if any(_dry):
                return None
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    cls.run = run
    _patched.add(cls)


def _kernel_classes() -> list[type]:
    classes = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:
        return []
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


@contextmanager
def recording(dry: bool = False) -> Iterator[list[Launch]]:
    """Collect every Triton launch made inside the block, in order. ``dry``: record without
    launching (what a call would launch, at any shape, in no time; outputs stay untouched)."""
    for cls in _kernel_classes():
        _wrap(cls)
    launches: list[Launch] = []
    _active.append(launches)
    _dry.append(dry)
    try:
        yield launches
    finally:
        _active.remove(launches)
        _dry.pop()
