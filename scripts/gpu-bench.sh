#!/usr/bin/env bash
# The GPU issue's measurements on a machine with a CUDA 13 GPU, for the device tool:
# build here with `cargo build --release`, copy target/release/hetla to an ignored folder
# (e.g. carry/hetla), carry it, and run `bash scripts/gpu-bench.sh carry/hetla` there.
# Writes one JSON line per run to $OUT/gpu-bench.jsonl (or ./gpu-bench.jsonl).
# Not yet run on a device: the first run checks the library paths and the GPU listing.
set -u
hetla=${1:-target/release/hetla}
out=${OUT:-.}/gpu-bench.jsonl
# cuBLAS and cuSOLVER are loaded at run time: find their folder.
for lib in libcublas.so.13 libcusolver.so.12 libcusolver.so.11; do
    dir=$(dirname "$(find / -name "$lib" 2>/dev/null | head -1)" 2>/dev/null)
    [ -n "$dir" ] && [ "$dir" != . ] && export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"
done
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi -L || true
"$hetla" info --json | tee "$OUT/info.json"
export HETLA_PERFMODEL_DIR=${OUT:-.}/perfmodels
"$hetla" calibrate --tile 1024 2048 4096 --clusters 1x15 3x5 --samples 5 --json
for n in 8192 16384 32768; do
    for b in 1024 2048 4096; do
        for clusters in none 1x15 3x5; do
            compare=""
            [ "$clusters" = none ] && compare="--compare"
            "$hetla" cholesky --n "$n" --tile "$b" --clusters "$clusters" --gpus all $compare --json \
                >> "$out" || echo "failed: n=$n b=$b clusters=$clusters" >&2
        done
    done
done
# The correctness sizes of the issue not in the table.
"$hetla" cholesky --n 4096 --tile 1024 --clusters none --gpus all --json >> "$out"
"$hetla" cholesky --n 4096 --tile 1024 --clusters 1x15 --gpus all --json >> "$out"
