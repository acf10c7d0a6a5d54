"""Run a Python script under the PyTorch profiler and write its Kineto trace.

    python PATH/TO/kprof/collectors/torch_wrap.py TRACE.json.gz script.py [args…]

Used by whole-program legs (``kprof run --leg … -- python script.py``): the script runs unchanged
(``runpy``, as ``__main__``) with CPU and CUDA activities recorded, its own folder first on the
import path as ``python script.py`` would have it — unless PYTHONSAFEPATH is set, as a revision run
sets it: then PYTHONPATH (the revision's tree first) comes first. It is started by its file path,
not with ``-m``, so a revision's tree that holds a ``kprof`` folder of its own (this repository's
history) cannot replace the running one.
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
    if not getattr(sys.flags, "safe_path", False):  # in a revision's tree kprof sets PYTHONSAFEPATH
        sys.path[0] = str(Path(script).resolve().parent)
    with profile(activities=activities) as prof:
        runpy.run_path(script, run_name="__main__")
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(out))


if __name__ == "__main__":
    main()
