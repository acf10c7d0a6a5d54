set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/msgspec*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/log_s10a.txt
git log --oneline -1 >> $OUT/log_s10a.txt
for s in 41 42; do
  echo "=== paged-pr-$s" >> $OUT/log_s10a.txt
  start=$(date +%s)
  timeout 150 python3 -m kprof run paged_decode --preset pr --seed $s --out $OUT/r/s10a_paged_pr_seed$s --format json > $OUT/r/paged_$s.json 2>> $OUT/log_s10a.txt
  echo "=== exit $? in $(( $(date +%s) - start )) s" >> $OUT/log_s10a.txt
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv >> $OUT/log_s10a.txt
tar czf $OUT/s10a.tgz -C $OUT/r .
rm -rf $OUT/r
