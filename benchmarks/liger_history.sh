#!/usr/bin/env bash
# Liger-Kernel's cross-entropy PR series (six commits touching the kernel) on the GPU: kprof's sequence
# (every commit against its parent, one process per revision) and an independent timer on the same
# revisions. From kprof's root on the GPU machine, LIGER a clone of Liger-Kernel (its src/ layout is
# imported from each revision's tree), OUT the folder whose files come back:
#   LIGER=PATH bash benchmarks/liger_history.sh kprof|timer|loo|bisect
# The device image lacks msgspec: carry its wheel in .whl/.
set -u
: "${OUT:?set OUT}" "${LIGER:?set LIGER}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 KPROF_CACHE=/tmp/kprof-cache
RANGE=${RANGE:-8b4dccb..2319ca0}  # the replayed series (docs/benchmarks.md); upstream: 9c1ddb76..c5bda07f
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/env_$1.txt
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, sys.version)" >> $OUT/env_$1.txt
if [ "$1" = kprof ]; then
  timeout 560 python3 -m kprof run benchmarks/liger_ce.py --revisions $RANGE --repo $LIGER \
    --paths src/liger_kernel/ops/cross_entropy.py --rounds ${ROUNDS:-12} --format json --out $OUT/liger_seq \
    > $OUT/liger_seq.json 2> $OUT/liger_seq.err; echo "kprof exit $?" >> $OUT/env_$1.txt
  python3 -m kprof report $OUT/liger_seq --format md > $OUT/liger_seq.md 2>&1
  tail -25 $OUT/liger_seq.md; grep -v "round " $OUT/liger_seq.err | tail -12
elif [ "$1" = loo ] || [ "$1" = bisect ]; then
  design=leave-one-out; [ "$1" = bisect ] && design=bisect
  timeout ${LIMIT:-560} python3 -m kprof run benchmarks/liger_ce.py --revisions $RANGE --repo $LIGER \
    --paths src/liger_kernel/ops/cross_entropy.py --design $design --rounds ${ROUNDS:-12} ${EXTRA:-} --format json \
    --out $OUT/liger_$1 > $OUT/liger_$1.json 2> $OUT/liger_$1.err; echo "kprof $1 exit $?" >> $OUT/env_$1.txt
  [ "$1" = loo ] && python3 -m kprof attribute $OUT/liger_$1 --format md > $OUT/liger_$1.md 2>&1
  [ "$1" = bisect ] && python3 -m kprof report $OUT/liger_$1 --format md > $OUT/liger_$1.md 2>&1
  tail -40 $OUT/liger_$1.md; grep -v "round " $OUT/liger_$1.err | tail -12
else
  revs=$(git -C $LIGER rev-list --reverse ${RANGE%%..*}~0..${RANGE##*..} -- src/liger_kernel/ops/cross_entropy.py)
  timeout 560 python3 benchmarks/liger_ce_timer.py $LIGER ${RANGE%%..*} $revs --passes ${PASSES:-3} > $OUT/timer.jsonl 2>&1
  echo "timer exit $?" >> $OUT/env_$1.txt; cat $OUT/timer.jsonl
fi
cat $OUT/env_$1.txt
