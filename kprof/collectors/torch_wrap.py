"""Run a Python script under the PyTorch profiler and write its Kineto trace.

    python -m kprof.collectors.torch_wrap TRACE.json.gz script.py [args…]

Used by whole-program legs (``kprof run --leg … -- python script.py``): the script runs unchanged
(``runpy``, as ``__main__``) with CPU and CUDA activities recorded.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    out, script, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    sys.argv = [script, *args]
    with profile(activities=activities) as prof:
        runpy.run_path(script, run_name="__main__")
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(out))


if __name__ == "__main__":
    main()
