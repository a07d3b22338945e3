#!/usr/bin/env bash
# Drives `hetla` as a careless or hostile user would: every option of every subcommand with
# values that are empty, zero, negative, fractional, huge, malformed or contradictory, bad
# platform and model files, outputs that cannot be written. Classifies each invocation:
#   ok           exit 0
#   clear error  exit 1, 2 or 3 (a failed residual check) with an "error:" message and no panic
#   panic        a Rust panic (exit 101 or "panicked" on stderr)
#   abort        killed by a signal (other than SIGPIPE into a closed pipe)
#   hang         still running after the time limit
# and prints the counts, then every invocation that was not ok or a clear error.
#
#   cargo build --release && bash scripts/hostile.sh [path/to/hetla] [seconds per call]
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/hetla}
limit=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HETLA_PERFMODEL_DIR="$work/models"
mkdir -p "$work/ro"
echo x >"$work/a-file"

# Platform files: sirocco with one field made wrong, and models with wrong values.
preset=$(printf 'name = "p"\n[cpu]\npackages = 2\ncores_per_package = 12\n[[cpu.kernels]]\nop = "gemm"\ntile = 960\ncore_gflops = 36.46\nspeedups = [{ cores = 10, speedup = 7.77 }]\n[[cpu.kernels]]\nop = "potrf"\ntile = 960\ncore_gflops = 20.0\n[[cpu.kernels]]\nop = "trsm"\ntile = 960\ncore_gflops = 30.0\n[[cpu.kernels]]\nop = "syrk"\ntile = 960\ncore_gflops = 30.0\n[gpu]\nmodel = "K40m"\ncount = 4\nmemory_gb = 12.0\nlink.h2d = { latency_us = 10.0, gb_per_s = 6.0 }\nlink.d2h = { latency_us = 10.0, gb_per_s = 6.0 }\n[[gpu.kernels]]\nop = "gemm"\ntile = 960\ngflops = 1050.0\n')
echo "$preset" >"$work/good.toml"
i=0
platform_variant() { # name, sed expression
  echo "$preset" | sed -e "$2" >"$work/$1.toml"
}
platform_variant packages-huge 's/^packages = 2/packages = 100000/'
platform_variant packages-1e8 's/^packages = 2/packages = 100000000/'
platform_variant packages-zero 's/^packages = 2/packages = 0/'
platform_variant packages-neg 's/^packages = 2/packages = -2/'
platform_variant packages-float 's/^packages = 2/packages = 1e8/'
platform_variant cores-huge 's/^cores_per_package = 12/cores_per_package = 18446744073709551615/'
platform_variant gflops-neg 's/core_gflops = 36.46/core_gflops = -1.0/'
platform_variant gflops-nan 's/core_gflops = 36.46/core_gflops = nan/'
platform_variant gflops-inf 's/core_gflops = 36.46/core_gflops = inf/'
platform_variant speedup-big 's/speedup = 7.77/speedup = 77.7/'
platform_variant speedup-cores 's/cores = 10, speedup/cores = 1000, speedup/'
platform_variant memory-tiny 's/memory_gb = 12.0/memory_gb = 0.000001/'
platform_variant memory-zero 's/memory_gb = 12.0/memory_gb = 0.0/'
platform_variant gpus-huge 's/^count = 4/count = 100000/'
platform_variant bandwidth-zero 's/gb_per_s = 6.0/gb_per_s = 0.0/g'
platform_variant tile-zero 's/^tile = 960/tile = 0/'
platform_variant op-unknown 's/op = "gemm"/op = "gemv"/'
platform_variant unknown-field 's/^packages = 2/packages = 2\nsockets = 2/'
echo "$preset" | head -c 200 >"$work/truncated.toml"
printf '\x00\xff\xfe garbage' >"$work/garbage.toml"
{ echo "$preset"; echo '[[cpu.kernels]]'; echo 'op = "gemm"'; echo 'tile = 960'; echo 'core_gflops = 1.0'; } >"$work/dup-kernel.toml"

invocations=()
add() { invocations+=("$(printf '%q ' "$@")"); }

# Sizes and counts.
for v in 0 -1 1.5 x "" 18446744073709551616 1000000000 40000; do
  add cholesky --n "$v"
  add simulate --platform sirocco --n "$v" --tile 960
  add bound --platform sirocco --n "$v" --tile 960
  add gemm --m "$v" --n 64 --k 64
  add gemm --platform sirocco --m "$v" --n 9600 --k 9600
  add batch --count "$v" --n 16
  add batch --count 10 --n "$v"
  add batch --count 10 --n 8 --nrhs "$v"
  add lu --n "$v"
  add simulate --platform sirocco --n "$v" --tile 960 --factorization lu
  add qr --m "$v" --n 64
  add qr --m 64 --n "$v"
  add simulate --platform sirocco --n "$v" --tile 960 --factorization qr
done
# LU's and QR's own options.
for v in "" x cholesky householder LU QR; do
  add simulate --platform sirocco --n 9600 --tile 960 --factorization "$v"
  add bound --platform sirocco --n 9600 --tile 960 --factorization "$v"
done
for v in 0 -1 x nan inf 0.5 1e400; do
  add lu --n 64 --cond "$v"
done
for v in 0 -1 x 1000000000; do
  add qr --m 300 --n 100 --inner "$v"
  add qr --m 300 --n 100 --tile "$v"
  add qr --m 300 --n 100 --lstsq "$v"
done
for v in "" x greedy FLAT; do
  add qr --m 300 --n 100 --tree "$v"
done
add qr --m 100 --n 300 --lstsq 2
add qr --m 100 --n 300 --cholqr
add qr --m 300 --n 100 --tile 7 --inner 3 --tree binary --compare --lstsq 3 --cholqr --repeat 1
add qr --m 1 --n 1 --compare --lstsq 1 --cholqr
add qr --m 2000 --n 2000 --tile 1 --tree binary
add simulate --platform sirocco --n 9600 --tile 960 --factorization qr --nodes 4
for v in 0 -1 x 200000 18446744073709551616; do
  add simulate --platform sirocco --m "$v" --n 960 --tile 960 --factorization qr
  add bound --platform sirocco --m "$v" --n 960 --tile 960
done
add sweep --platform sirocco --n 9600 --tile 960 --factorization qr --nodes 2 --out "$work/qr-sweep"
add lu --n 64 --precision s --mixed
add lu --n 64 --tile 0
add lu --n 64 --tile 1000000000
add lu --n 300 --clusters 1x1 --compare --precision ds --repeat 1
for v in tf32 bf16 fp16 ""; do
  add lu --n 64 --precision ds --tensor-math "$v"
  add cholesky --n 64 --precision ds --gpus emulated:1 --tensor-math "$v"
  add simulate --platform sirocco --gpus 1 --n 9600 --tile 960 --precision s --tensor-math "$v"
done
add simulate --platform sirocco --n 9600 --tile 960 --factorization lu --nodes 4
add sweep --platform sirocco --n 9600 --tile 960 --factorization lu --nodes 2 --out "$work/lu-sweep"
add sweep --n 2000 --tile 500 --factorization lu --out "$work/lu-real-sweep"
for v in 0 -1 x 8 1000000000 18446744073709551615; do
  add cholesky --n 3000 --tile "$v"
  add simulate --platform sirocco --n 9600 --tile "$v"
  add bound --platform sirocco --n 9600 --tile "$v"
  add gemm --m 64 --n 64 --k 64 --tile "$v"
  add calibrate --tile "$v" --samples 1 --clusters 1x1
done
add simulate --platform sirocco --n 100000000 --tile 960
add bound --platform sirocco --n 100000000 --tile 960
add gemm --platform sirocco --m 10000000 --n 10000000 --k 10000000 --tile 960
add gemm --platform a100x8 --m 100000 --n 100000 --k 100000 --tile 64
for v in 0 -1 x 1001 1000000; do
  add cholesky --n 200 --repeat "$v"
  add batch --count 10 --n 8 --repeat "$v"
  add calibrate --tile 64 --samples "$v" --clusters 1x1
done
# Cluster specs.
for v in "" x 0x1 1x0 99x99 2x x2 0-1 0-100000000000/1 "0/0" "0,0" 1-0 package numa l3 l2 core auto none "1x1,1x1" " " -1 18446744073709551615x1; do
  add cholesky --n 300 --clusters "$v"
  add info --clusters "$v"
  add simulate --platform sirocco --clusters "$v" --n 9600 --tile 960
  add bound --platform sirocco --clusters "$v" --n 9600 --tile 960
done
# GPU selections and budgets.
for v in "" x emulated:0 emulated:-1 emulated:100000 emulated:x 99 0-99999999999 -1 "0,0" emulated:65; do
  add cholesky --n 200 --gpus "$v"
  add info --gpus "$v"
done
for v in 0 0.5 -1 x 1XB 1e30 99999999999999999999G "" 1 1KiB; do
  add cholesky --n 200 --gpus emulated:1 --gpu-memory "$v"
  add gemm --platform a100x8 --m 4096 --n 4096 --k 4096 --gpu-memory "$v"
done
for v in -1 100 x 9; do
  add simulate --platform sirocco --gpus "$v" --n 9600 --tile 960
  add bound --platform sirocco --gpus "$v" --n 9600 --tile 960
  add gemm --platform sirocco --gpus "$v" --m 9600 --n 9600 --k 9600
done
add simulate --platform sirocco --clusters none --gpus 0 --n 9600 --tile 960
add bound --platform sirocco --clusters none --gpus 0 --n 9600 --tile 960
add cholesky --n 200 --clusters none --gpus none
# Strategies, placements, scalars, schedulers, backends.
for v in "" x peri-sum:rounded:static:steal peri-sum:precise:precise peri-sum:x grid:x "peri-sum:" ":::" max-reuse dmda; do
  add gemm --m 64 --n 64 --k 64 --strategy "$v"
done
for v in "" host gpu0,gpu0 host,host,gpu9 host,host,host,host gpu,host,host "gpu-1,host,host" "gpu99999999999999999999,host,host"; do
  add gemm --m 64 --n 64 --k 64 --placement "$v"
done
for v in nan inf -inf x 1e400; do
  add gemm --m 64 --n 64 --k 64 --alpha "$v"
  add gemm --m 64 --n 64 --k 64 --beta "$v"
done
for v in "" x MCT dmda; do
  add cholesky --n 200 --scheduler "$v"
  add simulate --platform sirocco --scheduler "$v" --n 9600 --tile 960
done
for v in "" x blas openblas; do
  add cholesky --n 200 --backend "$v"
done
for v in -1 nan inf 2 1e300 x; do
  add simulate --platform sirocco --noise "$v" --n 9600 --tile 960
done
# Platforms.
for f in "$work"/*.toml; do
  add simulate --platform "$f" --n 9600 --tile 960
  add bound --platform "$f" --gpus 1 --n 9600 --tile 960
done
for v in "" x "$work" "$work/a-file" /dev/null /nonexistent.toml; do
  add simulate --platform "$v" --n 9600 --tile 960
done
# Sweeps.
for v in 0 1:0:1 1:10:0 1:1000000000000:1 x "" "960,0" 9600:9600:1; do
  add sweep --platform sirocco --n "$v" --tile 960 --out "$work/sweep"
done
add sweep --platform sirocco --n 9600 --tile 960 --out "$work/a-file"
add sweep --platform sirocco --n 9600 --tile 960 --out "$work/a-file/sub"
add sweep --platform sirocco --n 9600 --tile 0 --out "$work/sweep"
add sweep --platform sirocco --n 9600 --tile 960 --gpus 99 --out "$work/sweep"
# Outputs.
for flag in --trace --gantt; do
  for v in /nonexistent/t.json "$work" "$work/a-file/x" ""; do
    add cholesky --n 200 "$flag" "$v"
    add simulate --platform sirocco --n 9600 --tile 960 "$flag" "$v"
    add gemm --m 64 --n 64 --k 64 "$flag" "$v"
  done
done
add cholesky --n 200 --inverse --precision ds
add cholesky --n 200 --inverse --grid 1x1
add cholesky --n 1000000000 --inverse
add cholesky --n 200 --trace "$work/same" --gantt "$work/same"
add cholesky --n 200 --trace "$work/models/perfmodels-faer.json"
add calibrate --tile 64 --samples 1 --output /nonexistent/p.toml
add cholesky --n 200 --perfmodel-dir "$work/a-file/models"
add cholesky --n 200 --perfmodel-dir /dev/null
# Model files with wrong contents (each run starts from the damaged file).
damaged_models=(
  '{not json'
  ''
  '{"format": 1, "backend": "faer", "models": [{"op": "gemm", "shapes": [[64,64],[64,64],[64,64]], "class": {"kind": "cpu_cluster", "cores": 1}, "samples": 3, "mean_s": -1e-9, "m2": 0, "deviation_s": 0}]}'
  '{"format": 1, "backend": "faer", "models": [{"op": "gemm", "shapes": [[64,64],[64,64],[64,64]], "class": {"kind": "cpu_cluster", "cores": 2}, "samples": 0, "mean_s": 0, "m2": -5, "deviation_s": 0}]}'
  '{"format": 7, "backend": "faer", "models": []}'
)
# Unknown subcommands and flags, help.
add
add frobnicate
add cholesky --frobnicate
add cholesky --n
add --version

count_ok=0 count_err=0 count_panic=0 count_abort=0 count_hang=0
problems=()
classify() { # rc, stderr file, label
  local rc=$1 err=$2 label=$3
  if grep -q "panicked" "$err" || [ "$rc" -eq 101 ]; then
    count_panic=$((count_panic + 1)); problems+=("panic  $label")
  elif [ "$rc" -eq 124 ]; then
    count_hang=$((count_hang + 1)); problems+=("hang   $label")
  elif [ "$rc" -gt 128 ]; then
    count_abort=$((count_abort + 1)); problems+=("abort($rc) $label")
  elif [ "$rc" -eq 0 ]; then
    count_ok=$((count_ok + 1)); [ -n "${SHOW_OK:-}" ] && echo "ok: $label"
  elif grep -q "^error" "$err"; then
    count_err=$((count_err + 1))
  else
    count_abort=$((count_abort + 1)); problems+=("unclear($rc) $label")
  fi
}
# The invocations run side by side, one per CPU (HOSTILE_JOBS to change it), each with its own
# output files; they are classified in order when all have ended.
jobs=${HOSTILE_JOBS:-$(nproc)}
for i in "${!invocations[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  (
    eval "timeout -k 5 \"\$limit\" \"\$bin\" ${invocations[$i]}" >"$work/out.$i" 2>"$work/err.$i" </dev/null
    echo $? >"$work/rc.$i"
  ) &
done
wait
for i in "${!invocations[@]}"; do
  classify "$(cat "$work/rc.$i")" "$work/err.$i" "hetla ${invocations[$i]}"
done
for contents in "${damaged_models[@]}"; do
  rm -rf "$work/models"; mkdir -p "$work/models"
  printf '%s' "$contents" >"$work/models/perfmodels-faer.json"
  timeout -k 5 "$limit" "$bin" cholesky --n 300 --tile 64 >"$work/out" 2>"$work/err"
  classify $? "$work/err" "hetla cholesky --n 300 --tile 64 with models: ${contents:0:40}"
done
# Output into a closed pipe.
for sub in info "cholesky --n 300" "bound --platform sirocco --n 9600 --tile 960 --json"; do
  # shellcheck disable=SC2086
  ( timeout -k 5 "$limit" "$bin" $sub 2>"$work/err"; echo $? >"$work/rc" ) | (exec 0<&-; sleep 0.1)
  rc=$(cat "$work/rc"); [ "$rc" -eq 141 ] && rc=0
  classify "$rc" "$work/err" "hetla $sub | (closed pipe)"
done
total=$((count_ok + count_err + count_panic + count_abort + count_hang))
echo "inputs tried: $total"
echo "ok: $count_ok  clear errors: $count_err  panics: $count_panic  aborts: $count_abort  hangs: $count_hang"
for p in "${problems[@]}"; do echo "  $p"; done
# A crash, an abort or a hang fails the script (CI runs it).
[ $((count_panic + count_abort + count_hang)) -eq 0 ]
