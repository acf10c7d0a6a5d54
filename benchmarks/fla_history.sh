#!/usr/bin/env bash
# kprof over a third-party repository's history on a GPU machine: flash-linear-attention's Gated
# DeltaNet decode, the benchmark kept outside fla's repository (benchmarks/fla_gdn_decode.py and
# benchmarks/fla_decode_steps.py). From the kprof repository's root:
#   FLA=PATH/TO/flash-linear-attention PYTHONPATH=$PWD bash benchmarks/fla_history.sh OUT_DIR [STEP…]
# STEP: loo (leave-one-out over the commits of 7d3cbcf6..8bcc1057 that touch fla/ops/gated_delta_rule),
# program (a whole program with decode_step markers at the last two commits of main: per-step busy
# against the per-kernel rows), bisect (8bcc1057..bc3b101d kept to the commits that touch fla/ops).
# Every step's wall time goes to OUT_DIR/log.txt; run folders and reports to OUT_DIR/runs.
set -u
out=${1:?output folder}
shift
steps=${*:-"loo program bisect"}
fla=${FLA:?FLA must name a clone of flash-linear-attention with its history}
# The device image has torch and triton but not msgspec: wheels carried in .whl/ are installed if present.
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kprof-site .whl/*.whl
  export PYTHONPATH="${PYTHONPATH:-}:/tmp/kprof-site"
fi
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1 KPROF_CACHE=${KPROF_CACHE:-/tmp/kprof-cache}
kprof=(python3 -m kprof)
step() {  # name, then the command; its wall time and exit code are logged, the next step runs anyway
  local name=$1; shift
  echo "=== $name: $*" | tee -a "$out/log.txt"
  local t0=$(date +%s)
  timeout "${STEP_TIMEOUT:-560}" "$@" >> "$out/log.txt" 2>&1
  local code=$?
  echo "=== $name exit $code, wall $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
}
wanted() { [[ " $steps " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> "$out/log.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$out/log.txt"
git -C "$fla" log --oneline -1 >> "$out/log.txt"
bench=benchmarks/fla_gdn_decode.py
if wanted loo; then
  step loo "${kprof[@]}" run $bench --revisions 7d3cbcf6..8bcc1057 --repo "$fla" --paths fla/ops/gated_delta_rule \
    --design leave-one-out --case b32 --out "$out/runs/fla_loo" --format json
  "${kprof[@]}" report "$out/runs/fla_loo" --format md > "$out/runs/fla_loo.report.md" 2>> "$out/log.txt"
  "${kprof[@]}" attribute "$out/runs/fla_loo" --format md > "$out/runs/fla_loo.attribute.md" 2>> "$out/log.txt"
fi
if wanted program; then
  step program "${kprof[@]}" run --rev bc3b101d~1 --rev bc3b101d --repo "$fla" --collector torch --steps decode_step \
    --rounds ${PROGRAM_ROUNDS:-6} --out "$out/runs/fla_program" --format json -- python3 benchmarks/fla_decode_steps.py
  "${kprof[@]}" report "$out/runs/fla_program" --format md > "$out/runs/fla_program.report.md" 2>> "$out/log.txt"
  rm -rf "$out/runs/fla_program/traces"  # one Kineto trace per process: kept out of what comes back
fi
if wanted bisect; then
  step bisect "${kprof[@]}" run $bench --revisions 8bcc1057..bc3b101d --repo "$fla" --paths fla/ops --design bisect \
    --case b32 --rounds ${BISECT_ROUNDS:-16} --out "$out/runs/fla_bisect" --format json
  "${kprof[@]}" report "$out/runs/fla_bisect" --format md > "$out/runs/fla_bisect.report.md" 2>> "$out/log.txt"
fi
tar czf "$out/runs.tgz" -C "$out" runs
