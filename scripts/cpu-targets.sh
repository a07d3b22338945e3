#!/usr/bin/env bash
# The CPU issue's target measurements: hetla beside faer's llt and OpenBLAS dpotrf, timed in
# the same process (one warm-up, best and median of 3), for both backends and both cluster
# shapes of a 2-core machine. Needs the openblas feature for the OpenBLAS peer:
#   cargo build --release --features openblas && bash scripts/cpu-targets.sh
# Prints one line per run: n, backend, clusters, tile, hetla Gflop/s (best, median), each
# peer's best Gflop/s, and the ratios the targets name. Models go to a fresh directory
# unless HETLA_PERFMODEL_DIR is set, so the first run of each shape chooses its tile cold.
set -eu
hetla=${HETLA:-target/release/hetla}
export HETLA_PERFMODEL_DIR=${HETLA_PERFMODEL_DIR:-$(mktemp -d)}
for n in ${SIZES:-2048 4096 8192}; do
  for backend in faer openblas; do
    for clusters in ${CLUSTERS:-1x2 2x1}; do
      "$hetla" cholesky --n "$n" --backend "$backend" --clusters "$clusters" --repeat 3 --compare --json |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
p = {x["name"]: x["gflops"] for x in d["peers"]}
g, llt, potrf = d["gflops"], p["faer-llt"], p["openblas-dpotrf"]
median = g * d["seconds"] / d["median_seconds"]
spec = d["clusters"]["spec"]
print("n=%d %-8s %s tile=%-5d hetla=%.1f (median %.1f) faer-llt=%.1f dpotrf=%.1f x_llt=%.3f x_dpotrf=%.3f eff=%.3f residual=%.2e"
      % (d["n"], d["backend"], spec, d["tile"], g, median, llt, potrf, g / llt, g / potrf, d["efficiency"], d["residual"]))
'
    done
  done
done
