#!/usr/bin/env bash
# The engine on the GPU after a change to it, in one device call: the GPU tests, one workload run
# with a known effect (mla_decode h12-c16, all levers against none: +226% on the H200, see
# docs/benchmarks.md), what the run folder holds (subject, compile metadata, launches, checks), and
# a whole-program run under the torch collector. From the repository root on the GPU machine, with
# OUT set to the folder whose files come back:
#   bash benchmarks/engine_gpu_check.sh [tests|runs]
# (one stage per device call where both would pass the call's ten minutes; both by default).
# The device image lacks msgspec: carry its wheel in .whl/ (see benchmarks/h200_evidence.sh).
set -u
: "${OUT:?set OUT to the output folder}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/env.txt
python3 -c "import torch, triton, sys, pandas, numpy, pyarrow; print('torch', torch.__version__, 'triton', triton.__version__, 'pandas', pandas.__version__, 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__, sys.version)" >> $OUT/env.txt
git log -1 --format=%H >> $OUT/env.txt 2>&1
STAGE=${1:-all}
if [ "$STAGE" != runs ]; then
timeout 360 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_mla_decode.py tests/test_paged_decode.py tests/test_collectors.py tests/test_progress.py tests/test_run_model.py > $OUT/tests.txt 2>&1; echo "tests exit $?" >> $OUT/tests.txt
# a Kineto trace recorded on this GPU, through kprof's reader and tables
python3 - > $OUT/gpu_trace.txt 2>&1 <<'PY'
import os, torch
from torch.profiler import ProfilerActivity, profile, record_function
x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for step in range(3):
        with record_function(f"ProfilerStep#{step}"):
            y = (x @ x).relu_()
            z = y.sum()
    torch.cuda.synchronize()
prof.export_chrome_trace(os.environ["OUT"] + "/gpu_trace.json")
PY
python3 -m kprof trace $OUT/gpu_trace.json --format json > $OUT/gpu_trace_tables.json 2>> $OUT/gpu_trace.txt; echo "trace exit $?" >> $OUT/gpu_trace.txt
fi
if [ "$STAGE" != tests ]; then
timeout 150 python3 -m kprof run mla_decode --case h12-c16 --design endpoints --format json --out $OUT/mla_end > $OUT/mla_end.json 2> $OUT/mla_end.err; echo "mla exit $?" >> $OUT/env.txt
python3 -m kprof report $OUT/mla_end --format md > $OUT/mla_end.md 2>&1
python3 - >> $OUT/env.txt 2>&1 <<'PY'
import os
from kprof.store.run_folder import RunFolder
f = RunFolder(os.environ["OUT"] + "/mla_end")
run = f.read_run()
print("subject", run.subject, "revisions", run.revisions)
for t in ("compile", "launches", "checks"):
    print(t, len(f.read(t)))
PY
cat > /tmp/bench.py <<'PY'
import os, torch
x = torch.randn(4096, 4096, device="cuda")
for _ in range(10):
    y = x @ x
    if os.environ.get("X"):
        y = y @ x
torch.cuda.synchronize()
PY
timeout 240 python3 -m kprof run --leg a --leg b:X=1 --collector torch --rounds 6 --format json --out $OUT/prog -- python3 /tmp/bench.py > $OUT/prog.json 2> $OUT/prog.err; echo "prog exit $?" >> $OUT/env.txt
fi
tail -3 $OUT/tests.txt 2>/dev/null; tail -2 $OUT/gpu_trace.txt 2>/dev/null; cat $OUT/env.txt; tail -5 $OUT/mla_end.err; tail -5 $OUT/prog.err
