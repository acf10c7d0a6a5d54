"""An independent timer for benchmarks/liger_ce.py, sharing no code with kprof: each revision of a
Liger-Kernel repository checked out with ``git worktree``, its kernel timed in a process of its own
with CUDA events around plain (eager) calls, the revisions' processes taken in a forward, then a
reversed order, ``--passes`` times; each commit's effect is its parent's median time over its own.

    python benchmarks/liger_ce_timer.py REPO REV1 REV2 … [--passes 2] [--calls 100]

Prints one JSON line per revision (median µs per call) and the effects, positive = faster.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import statistics, sys, torch, triton
sys.path.insert(0, sys.argv[1])
from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel as k
n, v, calls = 8192, 32000, int(sys.argv[2])
g = torch.Generator().manual_seed(0)
x0 = torch.randn(n, v, generator=g).to("cuda", torch.bfloat16)
x, y = torch.empty_like(x0), torch.randint(0, v, (n,), generator=g).cuda()
loss = torch.empty(n, device="cuda")
def call():
    x.copy_(x0)
    k[(n,)](X_ptr=x, X_stride=x.stride(-2), Y_ptr=y, Y_stride=1, weight_ptr=x, loss_ptr=loss, z_loss_ptr=loss,
            loss_stride=1, token_accuracy_ptr=loss, token_accuracy_stride=0, predicted_tokens_ptr=loss,
            predicted_tokens_stride=0, n_cols=v, n_non_ignore=n, sum_non_ignore_weight=n, weight_sum=0.0,
            ignore_index=-100, lse_square_scale=0.0, label_smoothing=0.0, reduction="mean", softcap=None,
            RETURN_Z_LOSS=False, RETURN_TOKEN_ACCURACY=False, RETURN_PREDICTED_TOKENS=False,
            BLOCK_SIZE=min(32768, triton.next_power_of_2(v)), HAS_WEIGHT=False, HAS_SOFTCAPPING=False,
            HAS_GRADIENTS=True, num_warps=32)
for _ in range(10):
    call()
torch.cuda.synchronize()
times = []
for _ in range(calls):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); call(); b.record(); b.synchronize()
    times.append(a.elapsed_time(b) * 1e3)
print(statistics.median(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo")
    parser.add_argument("revs", nargs="+")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="liger-timer-"))
    trees = {}
    for rev in args.revs:
        trees[rev] = work / rev
        subprocess.run(["git", "-C", args.repo, "worktree", "add", "-q", "--detach", str(trees[rev]), rev], check=True)
    times: dict[str, list[float]] = {rev: [] for rev in args.revs}
    for p in range(args.passes):
        for rev in args.revs if p % 2 == 0 else args.revs[::-1]:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(trees[rev] / "src"), str(args.calls)], capture_output=True, text=True
            )
            if done.returncode == 0:
                times[rev].append(float(done.stdout.split()[-1]))
            else:
                print(json.dumps({"rev": rev, "failed": done.stderr.strip().splitlines()[-1:]}))
    medians = {rev: statistics.median(t) for rev, t in times.items() if t}
    for rev in args.revs:
        print(json.dumps({"rev": rev, "us": medians.get(rev), "passes": times[rev]}))
    timed = [rev for rev in args.revs if rev in medians]
    for before, after in zip(timed, timed[1:]):
        effect = 100 * (medians[before] / medians[after] - 1)
        print(json.dumps({"commit": after, "against": before, "effect_pct": round(effect, 2)}))


if __name__ == "__main__":
    main()
