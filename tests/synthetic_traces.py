"""The synthetic trace writers of benchmarks/ingest_memory.py (tiny kernels in every format kprof
reads), for tests: one generator of these files, not two."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

_NAME = "kprof_bench_ingest_memory"
_SPEC = importlib.util.spec_from_file_location(_NAME, Path(__file__).parents[1] / "benchmarks" / "ingest_memory.py")
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
sys.modules[_NAME] = _MODULE
_SPEC.loader.exec_module(_MODULE)

#: format name -> writer(path stem, kernel count) -> the file written
WRITERS: dict[str, Callable[[Path, int], Path]] = _MODULE.WRITERS
