#!/usr/bin/env bash
# Everything kprof reports from the H200, in one device call: GPU tests, the bundled workloads' pr
# runs, calibrations (kprof's shared-buffer protocol and the PR method's per-leg buffers), and a
# split-count sweep. From the repository root on the GPU machine:
#   PYTHONPATH=$PWD bash benchmarks/h200_evidence.sh OUT_DIR            # every group
#   STEPS="cal paged" PYTHONPATH=$PWD bash benchmarks/h200_evidence.sh OUT_DIR
set -u
out=${1:?output folder}
# The device image has torch and triton but not msgspec: install wheels carried in .whl/ if present
# (python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --platform
#  manylinux2014_x86_64 -d .whl msgspec==0.23.0, then carry .whl).
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kprof-site .whl/*.whl
  export PYTHONPATH="${PYTHONPATH:-}:/tmp/kprof-site"
fi
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1
steps=${STEPS:-"tests gdn paged mla cal sweep mla-sweep mla-mechanism gdn-tune mla-tune paged-torch"}
step() {  # name, then the command; a failing step is logged and the next one runs
  local name=$1; shift
  echo "=== $name: $*" | tee -a "$out/log.txt"
  timeout "${STEP_TIMEOUT:-300}" "$@" >> "$out/log.txt" 2>&1
  echo "=== $name exit $?" | tee -a "$out/log.txt"
  tar czf "$out/evidence.tgz" -C "$out" runs log.txt
}
wanted() { [[ " $steps " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> "$out/log.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$out/log.txt"
if wanted tests; then
  step gpu-tests python3 -m pytest -q ${TESTS:-tests/test_gpu.py tests/test_gdn_decode.py tests/test_paged_decode.py \
    tests/test_mla_decode.py tests/test_collectors.py}
fi
# GDN_CASE / MLA_CASE: only the pr cases whose name contains it (a run folder per filter).
if wanted gdn; then
  step gdn python3 -m kprof run gdn_decode --preset pr ${GDN_CASE:+--case "$GDN_CASE"} \
    --out "$out/runs/gdn_pr${GDN_CASE:+_$GDN_CASE}" --format md
fi
if wanted paged; then
  step paged python3 -m kprof run paged_decode --preset pr --out "$out/runs/paged_pr" --format md
fi
if wanted cal; then
  for c in "copy 8MiB" "copy 256MiB" "paged_decode b64-s2048" "paged_decode b8-s32768-w4096" \
           "gdn_decode recurrent-b128"; do
    set -- $c
    step "cal-$1-$2" python3 -m kprof calibrate "$1" --case "$2" --out "$out/runs/cal_$1_$2" --format md
    step "pr-$1-$2" python3 -m kprof calibrate "$1" --case "$2" --buffers per-leg --rounds 5 \
      --out "$out/runs/prm_$1_$2" --format md
  done
fi
if wanted mla; then
  step mla python3 -m kprof run mla_decode --preset pr ${MLA_CASE:+--case "$MLA_CASE"} --collector "${MLA_COLLECTOR:-torch}" \
    --out "$out/runs/mla_pr${MLA_CASE:+_$MLA_CASE}" --format md
fi
if wanted mla-sweep; then
  step mla-sweep python3 -m kprof run mla_decode --preset sweep --design endpoints \
    --sweep num_splits=2,4,8,16,32,64,128,256 --out "$out/runs/mla_sweep" --format md
fi
# The MLA PR's mechanism table: pipelined_loads alone, at every forced split count, against the
# baseline forced to the same count.
if wanted mla-mechanism; then
  step mla-mechanism python3 -m kprof run mla_decode --preset sweep --design endpoints --target pipelined_loads \
    --sweep num_splits=2,4,8,16,32,64,128,256 --sweep-baseline --no-torch-leg --out "$out/runs/mla_mechanism" --format md
fi
# Tuning knobs at the shapes below the 80%-of-copy target: one sweep per knob, the target leg
# (every lever on) at each forced value, against the same run's baseline and A/A.
# GDN_TUNE_TARGET: the target leg's levers (default: all of them).
if wanted gdn-tune; then
  for knob in ${GDN_TUNE:-block_v=8,16,32,64 recurrent_warps=1,2,4,8}; do
    step "gdn-tune-${knob%%=*}" python3 -m kprof run gdn_decode --case recurrent-b32 --design endpoints \
      ${GDN_TUNE_TARGET:+--target "$GDN_TUNE_TARGET"} --no-torch-leg --sweep "$knob" \
      --out "$out/runs/gdn_tune_${knob%%=*}${GDN_TUNE_TARGET:+_$GDN_TUNE_TARGET}" --format md
  done
fi
if wanted paged-torch; then
  step paged-torch python3 -m kprof run paged_decode --preset pr --design endpoints \
    --out "$out/runs/paged_endpoints" --format md
fi
if wanted mla-tune; then
  for c in h12-c24 h12-c48; do
    for knob in block_n=16,32,64 stage1_warps=2,4,8; do
      step "mla-tune-$c-${knob%%=*}" python3 -m kprof run mla_decode --case "$c" --design endpoints \
        --no-torch-leg --sweep "$knob" --out "$out/runs/mla_tune_${c}_${knob%%=*}" --format md
    done
  done
fi
if wanted sweep; then
  step sweep python3 -m kprof run paged_decode --case b8-s8192 --design endpoints \
    --sweep num_splits=1,2,4,8,16,32 --out "$out/runs/paged_sweep" --format md
fi
# Small kernels (5–20 µs): A/A copies and planted delays per timer. Each seed is an independent run
# (fresh process, fresh captures); SMALL_SEEDS / SMALL_TIMERS narrow it.
if wanted small; then
  for timer in ${SMALL_TIMERS:-auto events}; do
    for seed in ${SMALL_SEEDS:-0 1 2 3}; do
      step "small-copy-$timer-$seed" python3 -m kprof calibrate copy --case 8MiB --timer "$timer" --seed "$seed" \
        --out "$out/runs/small_copy_${timer}_$seed" --format json
    done
  done
fi
