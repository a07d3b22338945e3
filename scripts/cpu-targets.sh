#!/usr/bin/env bash
# The CPU issue's target measurements: hetla beside faer's llt and OpenBLAS ?potrf, timed in the
# same process (one warm-up, best and median of 3), for both backends and both cluster shapes of a
# 2-core machine: f64 at n = 2048, 4096, 8192, then f32 (s) and complex f64 (z) at n = 4096. Needs
# the openblas feature for the OpenBLAS peer:
#   cargo build --release --features openblas && bash scripts/cpu-targets.sh
# Prints one line per run: precision, n, backend, clusters, storage, tile, hetla Gflop/s (best,
# median), each peer's best Gflop/s, and the ratios the targets name. Models go to a fresh
# directory unless HETLA_PERFMODEL_DIR is set, so the first run of each shape chooses its tile
# cold. HETLA picks the binary, SIZES the f64 orders, PRECISIONS the other precisions (at n =
# PRECISION_N, 4096), CLUSTERS the shapes, EXTRA more options (say "--storage in-place").
set -eu
hetla=${HETLA:-target/release/hetla}
[ -x "$hetla" ] || { echo "no $hetla: cargo build --release --features openblas (or HETLA=path)" >&2; exit 1; }
export HETLA_PERFMODEL_DIR=${HETLA_PERFMODEL_DIR:-$(mktemp -d)}
# The backends this binary has: without the openblas feature the faer rows run alone, and the
# OpenBLAS peer's columns say n/a (said once here).
backends=$("$hetla" info --json | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)["backends"]))')
case " $backends " in
  *" openblas "*) ;;
  *) echo "note: $hetla has no OpenBLAS (built without --features openblas): faer rows only, OpenBLAS columns n/a" >&2 ;;
esac
run() {
  local precision=$1 n=$2 backend=$3 clusters=$4
  # shellcheck disable=SC2086
  "$hetla" cholesky --n "$n" --precision "$precision" --backend "$backend" --clusters "$clusters" \
    --repeat 3 --compare cpu --json ${EXTRA:-} |
    python3 -c '
import json, sys
d = json.load(sys.stdin)
p = {x["name"]: x["gflops"] for x in d["peers"]}
potrf = "openblas-%spotrf" % d["precision"]
g, llt, lapack = d["gflops"], p["faer-llt"], p.get(potrf)
median = g * d["seconds"] / d["median_seconds"]
peer = "%s=n/a x_potrf=n/a" % potrf if lapack is None else "%s=%.1f x_potrf=%.3f" % (potrf, lapack, g / lapack)
print("%s n=%d %-8s %s %-10s tile=%-5d hetla=%.1f (median %.1f) faer-llt=%.1f x_llt=%.3f %s eff=%.3f residual=%.2e"
      % (d["precision"], d["n"], d["backend"], d["clusters"]["spec"], d.get("storage", "in-place"), d["tile"], g, median,
         llt, g / llt, peer, d["efficiency"], d["residual"]))
'
}
for n in ${SIZES:-2048 4096 8192}; do
  for backend in $backends; do
    for clusters in ${CLUSTERS:-1x2 2x1}; do
      run d "$n" "$backend" "$clusters"
    done
  done
done
for precision in ${PRECISIONS:-s z}; do
  for backend in $backends; do
    for clusters in ${CLUSTERS:-1x2 2x1}; do
      run "$precision" "${PRECISION_N:-4096}" "$backend" "$clusters"
    done
  done
done
