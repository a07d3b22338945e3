#!/usr/bin/env bash
# The full JSON of a fixed set of simulations (Cholesky under every scheduler, GEMM under
# every strategy, a100x8 placements, bound, sweep), without wall-clock fields and output
# paths: what a refactoring of the runtime must leave bit-identical. The Cholesky runs
# write tiles back at the end of the run (--write-back end, the policy the first lines
# were recorded with); the two lines after them are hetla's default, write-back when final,
# and the last is a distributed run on four nodes.
#
#   bash scripts/sim-snapshot.sh BIN            # print the snapshot
#   bash scripts/sim-snapshot.sh BIN --check    # compare with scripts/sim-snapshot.expected
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
strip() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
command = sys.argv[1]
# "seconds" is the wall time of simulate, bound and sweep; in gemm it is the simulated time.
wall = {"simulation_seconds", "out", "files"} | ({"seconds"} if command != "gemm" else set())
print(json.dumps({k: v for k, v in d.items() if k not in wall}, sort_keys=True))' "$1"
}
snapshot() {
  for s in mct dmda eager ws; do
    "$bin" simulate --platform sirocco --clusters 2x10 --gpus 4 --n 38400 --tile 960 --scheduler "$s" --write-back end --json | strip simulate
  done
  "$bin" simulate --platform sirocco --clusters 20x1 --gpus 2 --n 19200 --tile 1920 --write-back end --json | strip simulate
  "$bin" simulate --platform knl --clusters 4x16 --n 34560 --tile 2880 --write-back end --json | strip simulate
  "$bin" simulate --platform sirocco --clusters 2x10 --gpus 1 --n 9600 --tile 960 --noise 0.2 --seed 7 --write-back end --json | strip simulate
  for st in dmda peri-sum:rounded:steal peri-sum:precise:static grid max-reuse; do
    "$bin" gemm --platform sirocco --strategy "$st" --m 15360 --n 15360 --k 15360 --json | strip gemm
  done
  "$bin" gemm --platform a100x8 --m 16384 --n 16384 --k 16384 --json | strip gemm
  "$bin" gemm --platform a100x8 --placement gpu0,gpu0,gpu0 --m 32768 --n 32768 --k 32768 --json | strip gemm
  "$bin" bound --platform sirocco --clusters 2x10 --gpus 4 --n 38400 --tile 960 --json | strip bound
  "$bin" sweep --platform sirocco --clusters 20x1,2x10 --gpus 0,1 --n 4800:9600:4800 --tile 960 --out "$out/sweep" --write-back end --json | strip sweep
  for s in mct dmda; do
    "$bin" simulate --platform sirocco --clusters 2x10 --gpus 4 --n 38400 --tile 960 --scheduler "$s" --json | strip simulate
  done
  # A distributed run: four sirocco nodes on a 2x2 grid over a 100 Gb/s network.
  "$bin" simulate --platform sirocco --clusters 2x10 --gpus 4 --n 38400 --tile 960 --grid 2x2 --network 1.5us,100Gb/s --json | strip simulate
}
if [ "${2:-}" = "--check" ]; then
  if diff <(snapshot) "$here/sim-snapshot.expected" > "$out/diff"; then
    echo "simulations identical to scripts/sim-snapshot.expected"
  else
    echo "simulations differ from scripts/sim-snapshot.expected:"; cat "$out/diff"; exit 1
  fi
else
  snapshot
fi
