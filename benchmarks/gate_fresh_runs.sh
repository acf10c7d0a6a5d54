#!/usr/bin/env bash
# Issue 54's GPU check of compare's CI gate (docs/benchmarks.md, "The CI gate on the GPU"): fresh
# runs of bundled presets, each a new kprof process and seed, for every split into five base and
# five head runs through `kprof compare BASE HEAD --fail-on 'credibly-slower>1%'`; and a planted
# regression: five runs of copy whose 256MiB calls end with a spin sized to make them 2% slower
# (benchmarks/gate_plant.py), against five of the copy runs. From the repository root on the GPU
# machine:
#   PYTHONPATH=$PWD bash benchmarks/gate_fresh_runs.sh OUT_DIR PART
# PART: copy (ten runs of copy pr, then five planted), plant (the five planted runs alone), mla
# (ten runs of mla_decode pr, case h12-c1: about 40 s each on an H200), paged (ten runs of
# paged_decode pr, endpoints: about 180 s each, more than one session's device time) or all
# (copy, then mla). Ten copy runs take about nine minutes on an H200: give plant a call of its own.
# OUT_DIR/between.tgz (benchmarks/between_runs.sh) is rewritten after every run, so a call stopped
# by its time limit keeps the runs it finished. Analyse on any machine:
#   python benchmarks/gate_fresh_runs.py OUT_DIR/runs
set -u
out=${1:?output folder}; part=${2:?copy, plant, mla, paged or all}
between() { bash benchmarks/between_runs.sh "$out" "$@"; }
copy() { between copy 101 10 -- copy --preset pr; plant; }
plant() {
  cycles=$(python3 benchmarks/gate_plant.py size 256MiB 2 2>> "$out/log.txt")
  echo "planted cycles: $cycles" | tee -a "$out/log.txt"
  KPROF_PLANT_CASE=256MiB KPROF_PLANT_CYCLES=$cycles between plant2 301 5 -- benchmarks/gate_plant.py --preset pr
}
mla() { between mla 501 10 -- mla_decode --preset pr --case h12-c1; }
paged() { between paged 401 10 -- paged_decode --preset pr --design endpoints; }
case $part in
  copy) copy ;;
  plant) plant ;;
  mla) mla ;;
  paged) paged ;;
  all) copy; mla ;;
  *) echo "PART is copy, plant, mla, paged or all" >&2; exit 2 ;;
esac
