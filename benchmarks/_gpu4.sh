python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "kernel_time or event_timer" 2>&1 | tail -2
timeout 150 python3 benchmarks/small_kernel_timers.py $OUT/legs4_copyspin_busy.json --mib 8 --runs 4 --legs 4 --work copy+spin --timers cupti-1 2>&1 | grep "{"
STEP_TIMEOUT=100 STEPS=small SMALL_TIMERS=auto timeout 300 bash benchmarks/h200_evidence.sh $OUT/ev > /dev/null 2>&1
for s in 0 1; do
  timeout 100 python3 -m kprof run copy --case 8MiB --aa-copies 3 --seed $s --out $OUT/ev/runs/run_copy_$s --format json > $OUT/run_copy_$s.json 2> $OUT/run_copy_$s.err; echo run $s rc $?
done
timeout 100 python3 -m kprof calibrate gdn_decode --case step-b1 --seed 0 --out $OUT/ev/runs/cal_gdn_step_b1 --format json > $OUT/cal_gdn.json 2> $OUT/cal_gdn.err; echo gdn rc $?
grep "===" $OUT/ev/log.txt | grep exit
cd $OUT/ev && tar czf ../runs.tgz runs && cd .. && rm -rf ev/runs ev/evidence.tgz
