#!/usr/bin/env bash
# Fresh runs of one design, one after another, for between-run variance (docs/benchmarks.md,
# "Between runs"): each run a new kprof process (new workers, new allocations, a new seed). From
# the repository root on the GPU machine:
#   PYTHONPATH=$PWD bash benchmarks/between_runs.sh OUT_DIR NAME FIRST_SEED COUNT -- KPROF_RUN_ARGS…
# e.g. ... OUT paged 61 5 -- paged_decode --preset pr
# Run folders land in OUT_DIR/runs/NAME_SEED; OUT_DIR/between.tgz holds them and the log, rewritten
# after every run so that a call stopped by its time limit still returns the runs it finished.
# Analyse them on any machine: python benchmarks/between_runs.py OUT_DIR/runs/NAME_*
set -u
out=${1:?output folder}; name=${2:?name}; first=${3:?first seed}; count=${4:?count}
shift 4
[[ "${1:-}" == "--" ]] && shift
if ls .whl/*.whl > /dev/null 2>&1; then  # the device image lacks msgspec: see h200_evidence.sh
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kprof-site .whl/*.whl
  export PYTHONPATH="${PYTHONPATH:-}:/tmp/kprof-site"
fi
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1
for ((seed = first; seed < first + count; seed++)); do
  start=$(date +%s)
  python3 -m kprof run "$@" --seed "$seed" --out "$out/runs/${name}_$seed" --format json \
    > "$out/runs/${name}_$seed.json" 2> "$out/runs/${name}_$seed.err"
  echo "$name seed $seed rc=$? $(( $(date +%s) - start )) s" | tee -a "$out/log.txt"
  tar czf "$out/between.tgz" -C "$out" runs log.txt
done
