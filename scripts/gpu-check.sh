#!/usr/bin/env bash
# Part B of the GPU issue on a machine with a CUDA GPU, from binaries built elsewhere: this
# script builds nothing. Each part writes its JSON, tables and Gantt charts into one
# folder and packs it as $OUT/<part>.tar.gz beside a summary $OUT/<part>.md.
#
# Here (no GPU needed), in the repository's root:
#   cargo build --release -p hetla-cli
#   bash scripts/gpu-check.sh --stage carry      # copies hetla and the test binaries (16 MB)
#   (built with `--features openblas`, hetla takes this machine's OpenBLAS along, packed: 5 MB)
#   echo /carry/ >> .git/info/exclude
# On the GPU machine, with `carry` carried (e.g. the device tool's `carry: ["carry"]`):
#   bash scripts/gpu-check.sh carry probe libs tests rates gemm calibrate cholesky extra
# A lease is short (15 minutes of device time, starts included): every command runs under
# ROW_TIMEOUT seconds, and once DEADLINE seconds have passed since the script began the rows
# left are recorded as skipped instead of run, so that what ran always comes back.
#
# Parts:
#   libs       hetla info (text and JSON) with no LD_LIBRARY_PATH: the driver, cuBLAS and
#              cuSOLVER must be found by hetla itself.
#   tests      the device and GEMM test binaries: their real-GPU tests must run, not skip
#              (among them the first runs of the tensor-core products and of cuSOLVER's
#              refined solvers and least-squares peers).
#   rates      the targets: n = 32768 GPU only against cuSOLVER dpotrf on the
#              device-resident matrix, GPU + clusters against GPU only at n = 8192 and
#              16384; Gantt charts.
#   copies     GPU + the first cluster shape with the GPU packing its copies on 1 and 8
#              cores (HETLA_GPU_COPY_CORES), beside the rates part's default rule.
#   cholesky   residuals for n = 4096, 16000 (ragged), 16384, 32768 on the GPU only and
#              GPU + clusters 1x15 and 3x5, a forced-eviction budget, out of core (a factor
#              1.31x an 8 GiB budget beside the largest that fits); s, c and z against
#              cuSOLVER ?potrf, and the ds mixed solve.
#   extra      the inverse (GPU factor, CPU inverse kernels) and LU on this machine's cores,
#              beside their library peers, then LU with its updates and interchanges on the
#              GPU beside the last cluster shape (its panels there) against cuSOLVER's ?getrf
#              (resident, from pageable and from page-locked host memory), and on the GPU
#              alone (its panels by cuSOLVER's ?getrf); QR 32768 x 8192 in block columns with
#              its reflectors applied on the GPU against cuSOLVER's ?geqrf, and its least
#              squares, then resident on the GPU alone (its panels by cuSOLVER's ?geqrf); LDL^T
#              32768 on the cores alone and with its products on the GPU; the mixed solves with TF32 and BF16 single factors (LU against
#              cuSOLVER's refined DXgesv and DBgesv, Cholesky).
#   inverse    Cholesky's inverse with its steps on the GPU (factorisation included) at
#              INVERSE_NS (8192 16384), page-locked on the GPU alone beside cuSOLVER potrf +
#              potri (resident, from pageable and from page-locked host memory), staged beside 3x5 clusters, each with the h200
#              model's simulation of the inverse's graph.
#   gemm       n = 32768 from host memory and device-resident (gpu0) against cuBLAS dgemm
#              on resident matrices; a checked ragged product per strategy.
#   calibrate  the platform file of this machine with its GPU (kernels per tile, both link
#              directions, LU's and QR's kernels inside their runs on the GPU), then the same
#              Cholesky rows, LU and QR on the GPU alone simulated from it beside the real
#              makespans.
#   path       the data path issue's targets, each row beside the h200 model's prediction of
#              it (`simulate --platform h200`, "sim-" rows; docs/gpu-model.md): Cholesky at
#              PATH_NS (8192 16384 32768) on the GPU alone staged and page-locked (tile-major
#              and in place), page-locked beside 1x15 and 3x5, the largest against the three
#              cuSOLVER peers (resident, from pageable and from page-locked host memory);
#              GEMM at GEMM_N page-locked from the host and resident against the three cuBLAS
#              peers; Cholesky and GEMM with
#              their matrices resident on the GPU (--resident). Fits one call of 8 minutes
#              (DEADLINE=450) without the resident rows (lease 3: 380 s); about 9 with them.
#   streams    resident Cholesky on the GPU alone at STREAMS_NS (8192 16384) with 1, 2 and 4
#              compute streams (HETLA_GPU_STREAMS) in tiles of 1024 and the path's, each
#              against cuSOLVER's resident dpotrf, and beside it (the path's tile) the same
#              run simulated on the h200 model with as many streams ("sim-streams-" rows);
#              then (issue 72 item 2) with 4 streams the path's tile ending in a tail of half
#              its side over the last half of the matrix ("real-tail-", beside "sim-tail-"
#              where the h200 model has the tail's rates), and the library's own choice of
#              tile and tail with no --tile ("real-choice-": its predictions in the log).
#   resident   the resident rows of `path` alone (Cholesky at PATH_NS and GEMM at GEMM_N on
#              matrices in GPU memory), each against cuSOLVER's or cuBLAS's resident peer.
#   probe      first: the clusters' scaling probe (issue 70): `hetla calibrate --scaling` at
#              PROBE_TILES (512 1024 2048), PROBE_SAMPLES (3) samples, every cluster size
#              1, 2, 4, 8, 16 alone and all busy, beside one core (table, JSON and the CPU
#              platform file), then SWEEP_SHAPES at n = 16384 simulated from that file.
#   kernels    the CPU kernels' rates per cluster size (calibrate with KERNEL_SHAPES, default
#              1x16 ... 16x1, no GPU), a table of Gflop/s a core per operation, tile and size.
#   sweep      the CPU cluster shapes of this machine's cores (SWEEP_SHAPES, default 1x16 2x8 4x4
#              8x2 16x1) at SWEEP_NS (8192 16384) for Cholesky, LU and QR with no GPU
#              (Cholesky with `--gpus none`: with a GPU a core is kept for its host thread), each beside its
#              library peers (--compare).
set -u

if [ "${1:-}" = "--stage" ]; then
    dest=${2:?usage: gpu-check.sh --stage DIR}
    mkdir -p "$dest"
    cp target/release/hetla "$dest/hetla"
    # The root crate's test binaries (lab and cli have tests of the same names): cargo
    # names the executables it built.
    local_bins=$(cargo test --release --no-run -p hetla --test devices --test gemm 2>&1 |
        sed -n 's/.*Executable tests\/\([a-z]*\)\.rs (\(.*\))$/\1 \2/p')
    for test in devices gemm; do
        bin=$(echo "$local_bins" | awk -v t="$test" '$1 == t { print $2 }')
        [ -n "$bin" ] || { echo "no $test test binary: cargo test --release --no-run -p hetla failed" >&2; exit 1; }
        cp "$bin" "$dest/$test-test"
    done
    strip "$dest"/* 2>/dev/null || true
    # A hetla built with `--features openblas` (the CPU sweep's peers) takes this machine's
    # OpenBLAS along: the GPU machine has none. The libraries go to $dest/lib, found through
    # the binary's run path, so no LD_LIBRARY_PATH is needed (the libs part runs without one).
    if ldd "$dest/hetla" | grep -q libopenblas; then
        command -v patchelf > /dev/null || { echo "--stage needs patchelf for OpenBLAS's run path (apt-get install patchelf)" >&2; exit 1; }
        mkdir -p "$dest/lib"
        for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
            path=$(ldd "$dest/hetla" | awk -v l="$lib" '$1 == l { print $3 }')
            [ -n "$path" ] || { echo "$lib: not found by ldd" >&2; exit 1; }
            cp -L "$path" "$dest/lib/$lib"
        done
        patchelf --set-rpath '$ORIGIN/lib' "$dest/hetla"
        # Packed (39 MB -> 5 MB): the device tool carries 64 MiB at most. Unpacked there below.
        tar -cJf "$dest/lib.tar.xz" -C "$dest" lib && rm -rf "$dest/lib"
    fi
    ls -la "$dest" "$dest"/lib 2>/dev/null
    du -sh "$dest"
    exit 0
fi

bin=${1:?usage: gpu-check.sh BIN_DIR PART...}
shift
[ $# -gt 0 ] || set -- probe libs tests rates gemm calibrate cholesky extra
hetla="$bin/hetla"
# The OpenBLAS that --stage packed beside a hetla built with it.
if [ -f "$bin/lib.tar.xz" ] && [ ! -d "$bin/lib" ]; then
    tar -xJf "$bin/lib.tar.xz" -C "$bin" || echo "could not unpack $bin/lib.tar.xz" >&2
fi
out=${OUT:-gpu-check-out}
# The sizes of the issue; a smoke test here overrides them (GPUS=emulated:1 NS=600 ...).
gpus=${GPUS:-all}
ns=${NS:-4096 16000 16384 32768}
clusters_list=${CLUSTERS:-1x15 3x5}
rate_n=${RATE_N:-32768}
mixed_ns=${MIXED_NS:-8192 16384}
gemm_n=${GEMM_N:-32768}
small_n=${SMALL_N:-16384}
# The calibrate part's tiles: with --output it also factors 5 matrices of 8 x 8 tiles on
# every cluster size of the CPU (1, 2, 4, ... cores), which at 2048 (n = 16384 on one core)
# ran past a 75 s limit in the first lease; 1024 is an eighth of that.
tiles=${TILES:-1024}
repeat=${REPEAT:-3}
samples=${SAMPLES:-5}
# Extra options of the rate row against cuSOLVER ("--storage in-place").
rate_args=${RATE_ARGS:-}
row_timeout=${ROW_TIMEOUT:-240}
deadline=${DEADLINE:-100000}
mkdir -p "$out"
# Fresh performance models (no earlier ones are read); each part's archive holds a copy.
# The device tool returns at most 8 files: run at most 4 parts per call.
export HETLA_PERFMODEL_DIR=${HETLA_PERFMODEL_DIR:-$(mktemp -d)}

run_part() {
    local part=$1 dir="$out/$1"
    mkdir -p "$dir"
    echo "== [$SECONDS s] $part"
    "part_$part" "$dir" 2>&1 | tee "$dir/log.txt"
    # One summary file for every part: the device tool returns at most 8 files.
    { echo "# gpu-check $part ($SECONDS s)"; summarize "$dir"; echo; echo '```'; tail -n 40 "$dir/log.txt"; echo '```'; } >> "$out/summary.md"
    cp -r "$HETLA_PERFMODEL_DIR" "$dir/" 2>/dev/null
    tar -czf "$out/$part.tar.gz" -C "$out" "$part" && rm -rf "$dir"
}

# One JSON line per command in $dir/rows.jsonl, tagged with the part's label.
row() {
    local dir=$1 label=$2
    shift 2
    local line
    if [ "$SECONDS" -ge "$deadline" ]; then
        printf '{"label":"%s","args":"%s","error":"skipped: the deadline of %s s had passed"}\n' "$label" "$*" "$deadline" >> "$dir/rows.jsonl"
        echo "skipped (deadline): hetla $*" >&2
        return
    fi
    echo "[$SECONDS s] hetla $*"
    local rc=0
    line=$(timeout "$row_timeout" "$hetla" "$@" --json 2> "$dir/stderr.txt") || rc=$?
    if [ "$rc" = 0 ]; then
        printf '{"label":"%s","args":"%s","report":%s}\n' "$label" "$*" "$line" >> "$dir/rows.jsonl"
    elif [ "$rc" = 124 ]; then
        # Lease 4 lost two rows' worth of device time to this with an empty error.
        printf '{"label":"%s","args":"%s","error":"killed: still running after ROW_TIMEOUT = %s s"}\n' \
            "$label" "$*" "$row_timeout" >> "$dir/rows.jsonl"
        echo "killed after $row_timeout s: hetla $*" >&2
    else
        printf '{"label":"%s","args":"%s","error":%s}\n' "$label" "$*" \
            "$(python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))' < "$dir/stderr.txt")" >> "$dir/rows.jsonl"
        echo "failed: hetla $*" >&2
        tail -n 5 "$dir/stderr.txt" >&2
    fi
}

part_libs() {
    local dir=$1
    nvidia-smi -L || true
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv || true
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)" || true
    grep -o -w -E "avx2|avx512f" /proc/cpuinfo | sort | uniq -c || true
    env -u LD_LIBRARY_PATH "$hetla" info
    env -u LD_LIBRARY_PATH "$hetla" info --json > "$dir/info.json"
    python3 - "$dir/info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
libs = {l["name"]: l for l in info.get("cuda", [])}
for name in ("cuBLAS", "cuSOLVER", "NVRTC"):
    lib = libs.get(name, {})
    print(f"{name}: {'loaded from ' + str(lib.get('path')) if lib.get('loaded') else 'NOT loaded: ' + str(lib.get('error'))} {lib.get('version') or ''}")
EOF
}

part_tests() {
    local dir=$1 status=0
    for test in devices gemm; do
        timeout "$row_timeout" "$bin/$test-test" --test-threads 1 --nocapture > "$dir/$test.txt" 2>&1 || status=1
        grep -E "^test |test result|skipped" "$dir/$test.txt"
        if grep -q "GPU test skipped" "$dir/$test.txt"; then
            echo "FAILED: the $test real-GPU tests skipped on a GPU machine"
            status=1
        fi
    done
    return $status
}

part_rates() {
    local dir=$1
    # The rates: best of 3 after a warm-up.
    # shellcheck disable=SC2086
    row "$dir" cusolver cholesky --n "$rate_n" --clusters none --gpus "$gpus" --compare gpu --repeat "$repeat" \
        $rate_args --gantt "$dir/gantt-$rate_n-gpu.svg"
    for n in $mixed_ns; do
        for clusters in none $clusters_list; do
            row "$dir" "mixed-$n" cholesky --n "$n" --clusters "$clusters" --gpus "$gpus" --repeat "$repeat" \
                --gantt "$dir/gantt-$n-$clusters.svg"
        done
    done
}

part_copies() {
    local dir=$1 count n clusters=${clusters_list%% *}
    # The cores each GPU packs its copies on (runtime::platform::COPY_CORES_VAR): 1 is the
    # host core alone, the rule before the first GPU run; the default rule gives 4 here.
    for n in $mixed_ns; do
        for count in ${COPY_COUNTS:-1 8}; do
            HETLA_GPU_COPY_CORES=$count row "$dir" "copy-cores-$count-$n" cholesky --n "$n" \
                --clusters "$clusters" --gpus "$gpus" --repeat "$repeat"
        done
    done
}

part_cholesky() {
    local dir=$1
    for n in $ns; do
        for clusters in none $clusters_list; do
            row "$dir" residual cholesky --n "$n" --clusters "$clusters" --gpus "$gpus"
        done
    done
    # Room for 48 tiles of 1024 (a 16384 matrix has 136): eviction and write-back.
    row "$dir" eviction cholesky --n "$small_n" --tile 1024 --clusters none --gpus "$gpus" --gpu-memory 384MiB
    # Out of core (issue 74 item 4): on a budget of 8 GiB (256 tiles of 2048), the largest n
    # that fits (231 tiles) and a factor 1.31x the budget (left-looking, evicting by next use):
    # rate >= 70% of the first's, copies within 1.5x the bound (the `traffic` line). Predicted
    # on h200: 28.5 and 27.4 Tflop/s (0.96x).
    row "$dir" out-of-core-fits cholesky --n 43008 --tile 2048 --clusters none --gpus "$gpus" --gpu-memory 8GiB
    row "$dir" out-of-core cholesky --n 52000 --tile 2048 --clusters none --gpus "$gpus" --gpu-memory 8GiB
    # Both simulated on the h200 model beside them (issue 74 item 6).
    row "$dir" sim-out-of-core-fits simulate --platform h200 --n 43008 --tile 2048 --clusters none --gpus 1 \
        --gpu-memory 8GiB
    row "$dir" sim-out-of-core simulate --platform h200 --n 52000 --tile 2048 --clusters none --gpus 1 \
        --gpu-memory 8GiB
    # Every precision on the GPU alone against cuSOLVER ?potrf in that precision, and the
    # mixed solve (an f32 factor on the GPU, refined in f64).
    for p in s c z; do
        # The tile given: with no calibrated model the automatic one was 384-512 on an H100
        # (lease 3), far below the GPU's rate.
        row "$dir" "precision-$p" cholesky --n "$small_n" --tile 4096 --clusters none --gpus "$gpus" \
            --precision "$p" --compare gpu --repeat "$repeat"
    done
    row "$dir" precision-ds cholesky --n "$small_n" --clusters none --gpus "$gpus" --precision ds --repeat "$repeat"
}

part_extra() {
    local dir=$1
    local clusters=${clusters_list##* }
    row "$dir" inverse cholesky --n "$small_n" --clusters "$clusters" --gpus "$gpus" --inverse --compare cpu
    row "$dir" lu lu --n "$small_n" --compare --repeat "$repeat"
    # LU's updates and interchanges on the GPU, its panels on the clusters (issue 74 item 1),
    # beside the cores alone above.
    row "$dir" lu-gpu lu --n "$small_n" --clusters "$clusters" --gpus "$gpus" --compare gpu --repeat "$repeat"
    # Every task on the GPU, the panels by cuSOLVER's ?getrf on the panel (no cluster beside it),
    # resident peers timed in the row above.
    row "$dir" lu-gpu-alone lu --n "$small_n" --clusters none --gpus "$gpus" --repeat "$repeat"
    # LU of a matrix in the GPU's memory where it lies (Lu::factor_device; every task on the GPU,
    # the panels by cuSOLVER's ?getrf), timed as cuSOLVER's resident dgetrf (`--compare gpu`: its
    # resident, pageable and page-locked peers), 4 streams, block columns of 2048. Predicted on
    # h200 (the panel rated as POTRF of its flops, which a tall ?getrf does not reach: optimistic):
    # 126.5 ms at 16384 (23.2 Tflop/s), 532.2 ms at 32768 (44.1 Tflop/s; critical path 395 ms).
    # Target (32768): >= 0.8x cuSOLVER dgetrf resident, measured by the main run of the
    # `tensor-lu-resident` row below (the same resident f64 LU and peers at 32768, once).
    HETLA_GPU_STREAMS=4 row "$dir" lu-resident lu --n "$small_n" --tile 2048 --clusters none \
        --gpus "$gpus" --resident --compare gpu --repeat "$repeat"
    # LU out of core (issue 74 item 4): 16384 in block columns of 2048 (2 GiB) on a budget of
    # 1.5 GiB, left-looking with the interchanges of factored columns last; its `moved` lines
    # beside the 2 GiB each way a budget that holds it moves. Predicted on h200: 492.2 ms
    # (4.3 GB in, 3.5 GB out) against 301.3 ms in core.
    row "$dir" lu-out-of-core lu --n "$small_n" --tile 2048 --clusters none --gpus "$gpus" --gpu-memory 1536MiB
    row "$dir" sim-lu-out-of-core simulate --platform h200 --factorization lu --n "$small_n" --tile 2048 \
        --clusters none --gpus 1 --gpu-memory 1536MiB
    # QR in block columns, the applications of the panels' reflectors on the GPU (issue 74 item
    # 2), at the issue's shape, beside the clusters' panels; least squares with 16 right-hand sides.
    row "$dir" qr-gpu qr --m 32768 --n 8192 --clusters "$clusters" --gpus "$gpus" --lstsq 16 --compare gpu --repeat "$repeat"
    # The same QR of a matrix in the GPU's memory where it lies (Qr::factor_device, issue 74 item
    # 2): every task on the GPU, its panels by cuSOLVER's ?geqrf, their T's made on the host from
    # the Gram matrices and heads copied back; block columns of 2048, 4 streams, timed as
    # cuSOLVER's resident dgeqrf (`--compare gpu`: resident, pageable, page-locked), and least
    # squares with 16 right-hand sides from host memory on the GPU alone beside cuSOLVER's. Target:
    # >= 0.8x cuSOLVER dgeqrf resident, least squares >= 1.0x geqrf + ormqr + trsm. Predicted on
    # h200 (the panel rated as POTRF of its flops, about 3 Tflop/s on a 30720 x 2048 panel):
    # 364.3 ms resident (the critical path 335.1 ms, the four panels 307 ms of it; from host
    # 457.2 ms), against cuSOLVER's resident dgeqrf about 0.13 s: about 0.36x, predicted missed.
    HETLA_GPU_STREAMS=4 row "$dir" qr-resident qr --m 32768 --n 8192 --tile 2048 --clusters none \
        --gpus "$gpus" --resident --lstsq 16 --compare gpu --repeat "$repeat"
    # LDL^T's products and interchanges on the GPU (issue 74 item 3): Aasen's in block columns of
    # 512, the gather, T's diagonal blocks, the panels and the band steps on the clusters, against
    # the 16 cores alone (a cluster per core, the default block) at the target's order, and
    # cuSOLVER's Bunch-Kaufman dsytrf (resident, pageable, page-locked). Target: >=
    # 5x the cores alone. Predicted on h200 (its only LDL^T tiles are 2048 and 4096, its CPU rates
    # assumed): 8.57 s beside one 15-core cluster at tile 2048 against 26.9 s on the 16 cores
    # (3.1x), the host's panels, diagonal blocks and band steps 6.6 s of it: predicted missed.
    row "$dir" ldlt-cores ldlt --n 32768
    row "$dir" ldlt-gpu ldlt --n 32768 --tile 512 --clusters "$clusters" --gpus "$gpus" --compare gpu
    # Tensor cores (issue 74 item 5): the mixed solve's single LU with its trailing updates in
    # TF32 (BF16), made where A rounded was written (factor_device) and refined there (its `where`
    # line), beside cuSOLVER's refined solver of the same math (DXgesv, DBgesv) and dgetrf.
    # Predicted on h200 (1 stream): the single factor 97.0 ms TF32 resident (the `factor` line
    # includes writing A rounded, 37 ms), against 301.3 ms for the f64 LU from host (staged); the
    # whole mixed solve about 0.23 s (A written 74 ms, 4 steps of about 5 ms on the GPU): 0.76x the
    # f64 LU's time.
    row "$dir" tensor-lu lu --n "$small_n" --clusters none --gpus "$gpus" --precision ds --tensor-math tf32 \
        --compare gpu --repeat "$repeat"
    # The single TF32 LU simulated on the h200 model beside it (issue 74 item 6: its factor; the
    # refinement's steps are not in the graph).
    row "$dir" sim-tensor-lu simulate --platform h200 --factorization lu --n "$small_n" --tile 2048 \
        --clusters none --gpus 1 --precision s --tensor-math tf32
    row "$dir" tensor-lu-bf16 lu --n "$small_n" --clusters none --gpus "$gpus" --precision ds --tensor-math bf16 \
        --compare gpu --repeat "$repeat"
    # The general target row (issue 74 item 5) and LU's resident target at 32768 (issue 74 item
    # 1): its main run is hetla's f64 LU of the matrix in the GPU's memory (Lu::factor_device,
    # predicted 532.2 ms) beside cuSOLVER's dgetrf (resident, pageable, page-locked); its mixed
    # section A and b in the GPU's memory (Lu::solve_refined_device), TF32, beside hetla's f64
    # factor_device + solve_device and cuSOLVER's DXgesv. Predicted on h200: mixed about 0.42 s
    # (the single LU 375.7 ms), mixed / cusolver-dgetrf resident about 0.85 (target <= 0.5:
    # predicted missed). 4 streams. One warm-up (NVRTC compiles hetla's kernels once a process,
    # outside the timed run) and one timed run: its checks (L U on the host, the backward errors)
    # take about a minute.
    HETLA_GPU_STREAMS=4 row "$dir" tensor-lu-resident lu --n 32768 --tile 2048 --clusters none \
        --gpus "$gpus" --precision ds --tensor-math tf32 --resident --compare gpu --repeat 1
    # The SPD kind, factored and refined on the GPU (its `where` line): the single Cholesky 40.7 ms
    # TF32 predicted (resident, 1 stream) against 101.8 ms for the f64 one (staged); the whole mixed
    # solve about 0.13 s (A written in 74 ms at the packing rate, 4 steps of about 2 ms).
    row "$dir" tensor-cholesky cholesky --n "$small_n" --clusters none --gpus "$gpus" --precision ds \
        --tensor-math tf32 --repeat "$repeat"
    # The target row (issue 74 item 5): A and b in the GPU's memory (solve_refined_device), 4
    # streams, n = 32768, beside hetla's f64 factor_device + solve_device and cuSOLVER's dpotrf
    # (its factor alone). Predicted on h200: mixed about 0.10 s (60.3 ms factor, 8 ms preparation,
    # 4 steps of about 7 ms: a cuBLAS GEMV over A and two single-column TRSMs with L), f64 about
    # 0.23 s, mixed / cusolver-dpotrf resident 0.42 (target <= 0.5).
    HETLA_GPU_STREAMS=4 row "$dir" tensor-cholesky-resident cholesky --n 32768 --clusters none \
        --gpus "$gpus" --precision ds --tensor-math tf32 --resident --compare gpu --repeat "$repeat"
}

part_inverse() {
    local dir=$1 n t
    # The inverse with every step on the GPU (cuSOLVER TRTRI, LAUUM from cuBLAS TRMM, cuBLAS
    # TRSM/SYRK/TRMM), factorisation included, beside cuSOLVER potrf + potri (resident and from
    # host memory) and the inverse's graph simulated on the h200 model ("sim-" rows: the
    # inverse's run alone, the factor's is the path part's row of the same n).
    for n in ${INVERSE_NS:-8192 16384}; do
        t=$(path_tile "$n")
        row "$dir" "inverse-$n-locked" cholesky --n "$n" --tile "$t" --clusters none --gpus "$gpus" \
            --storage tile-major --host-memory page-locked --inverse --compare gpu --repeat "$repeat"
        row "$dir" "sim-inverse-$n-locked" simulate --platform h200 --factorization inverse --n "$n" \
            --tile "$t" --clusters none --gpus 1 --host-memory page-locked
        row "$dir" "inverse-$n-staged-3x5" cholesky --n "$n" --tile "$t" --clusters 3x5 --gpus "$gpus" \
            --inverse --repeat "$repeat"
        row "$dir" "sim-inverse-$n-staged-3x5" simulate --platform h200 --factorization inverse \
            --n "$n" --tile "$t" --clusters 3x5 --gpus 1
    done
}

part_gemm() {
    local dir=$1 n=$gemm_n
    row "$dir" gemm-host gemm --m "$n" --n "$n" --k "$n" --clusters none --gpus "$gpus" --no-check \
        --compare gpu --repeat "$repeat" --gantt "$dir/gantt-gemm-host.svg"
    row "$dir" gemm-resident gemm --m "$n" --n "$n" --k "$n" --clusters none --gpus "$gpus" --no-check \
        --placement gpu0,gpu0,gpu0 --compare gpu --repeat "$repeat"
    local m=$((n * 9 / 32 + 1)) k=$((n * 7 / 32 + 3))
    for strategy in dmda grid max-reuse peri-sum auto; do
        row "$dir" "gemm-$strategy" gemm --m "$m" --n "$((n / 4 + 5))" --k "$k" --tile "$((n / 16))" \
            --transa --beta 0.5 --clusters none --gpus "$gpus" --strategy "$strategy"
    done
}

# The tile the h200 model has rates for at order n: 2048 below 16384, else 4096.
path_tile() {
    if [ "$1" -lt 16384 ]; then echo 2048; else echo 4096; fi
}

part_path() {
    local dir=$1 n t clusters
    local path_ns=${PATH_NS:-8192 16384 32768}
    local largest=${path_ns##* }
    for n in $path_ns; do
        t=$(path_tile "$n")
        # The GPU alone: as the leases ran (staged), then page-locked both ways.
        row "$dir" "real-$n-staged" cholesky --n "$n" --tile "$t" --clusters none --gpus "$gpus" \
            --storage tile-major --host-memory staged --repeat "$repeat"
        row "$dir" "sim-$n-staged" simulate --platform h200 --n "$n" --tile "$t" --clusters none --gpus 1
        local compare=()
        [ "$n" = "$largest" ] && compare=(--compare gpu)
        row "$dir" "real-$n-locked" cholesky --n "$n" --tile "$t" --clusters none --gpus "$gpus" \
            --storage tile-major --host-memory page-locked --repeat "$repeat" "${compare[@]}" \
            --gantt "$dir/gantt-$n-locked.svg" --trace "$dir/trace-$n-locked.json"
        row "$dir" "sim-$n-locked" simulate --platform h200 --n "$n" --tile "$t" --clusters none --gpus 1 \
            --host-memory page-locked
        row "$dir" "real-$n-locked-in-place" cholesky --n "$n" --tile "$t" --clusters none --gpus "$gpus" \
            --storage in-place --host-memory page-locked --repeat "$repeat"
        row "$dir" "sim-$n-locked-in-place" simulate --platform h200 --n "$n" --tile "$t" --clusters none \
            --gpus 1 --host-memory page-locked
        # The matrix resident on the GPU (placed before the clock, L left there): the like of
        # cuSOLVER's resident call.
        row "$dir" "real-$n-resident" cholesky --n "$n" --tile "$t" --clusters none --gpus "$gpus" \
            --resident --repeat "$repeat" "${compare[@]}"
        row "$dir" "sim-$n-resident" simulate --platform h200 --n "$n" --tile "$t" --clusters none \
            --gpus 1 --resident
        for clusters in $clusters_list; do
            row "$dir" "real-$n-locked-$clusters" cholesky --n "$n" --tile "$t" --clusters "$clusters" \
                --gpus "$gpus" --storage tile-major --host-memory page-locked --repeat "$repeat"
            row "$dir" "sim-$n-locked-$clusters" simulate --platform h200 --n "$n" --tile "$t" \
                --clusters "$clusters" --gpus 1 --host-memory page-locked
        done
    done
    n=$gemm_n
    for placement in host,host,host gpu0,gpu0,gpu0; do
        row "$dir" "real-gemm-$n-${placement%%,*}" gemm --m "$n" --n "$n" --k "$n" --tile 4096 --clusters none \
            --gpus "$gpus" --no-check --placement "$placement" --host-memory page-locked --compare gpu \
            --repeat "$repeat"
        row "$dir" "sim-gemm-$n-${placement%%,*}" gemm --platform h200 --m "$n" --n "$n" --k "$n" --tile 4096 \
            --clusters none --placement "$placement" --host-memory page-locked
    done
    row "$dir" "real-gemm-$n-resident" gemm --m "$n" --n "$n" --k "$n" --tile 4096 --clusters none \
        --gpus "$gpus" --no-check --resident --compare gpu --repeat "$repeat"
    row "$dir" "sim-gemm-$n-resident" gemm --platform h200 --m "$n" --n "$n" --k "$n" --tile 4096 \
        --clusters none --resident
}

part_resident() {
    local dir=$1 n t
    # The resident rows alone (the matrices in GPU memory before the clock: --resident goes
    # through DeviceMatrix, a cudarc buffer the factorisation reads and writes in place),
    # each against cuSOLVER's and cuBLAS's resident peers and beside its prediction.
    for n in ${PATH_NS:-8192 16384 32768}; do
        t=$(path_tile "$n")
        row "$dir" "real-$n-resident" cholesky --n "$n" --tile "$t" --clusters none --gpus "$gpus" \
            --resident --repeat "$repeat" --compare gpu
        row "$dir" "sim-$n-resident" simulate --platform h200 --n "$n" --tile "$t" --clusters none \
            --gpus 1 --resident
    done
    n=$gemm_n
    row "$dir" "real-gemm-$n-resident" gemm --m "$n" --n "$n" --k "$n" --tile 4096 --clusters none \
        --gpus "$gpus" --no-check --resident --compare gpu --repeat "$repeat"
    row "$dir" "sim-gemm-$n-resident" gemm --platform h200 --m "$n" --n "$n" --k "$n" --tile 4096 \
        --clusters none --resident
}

part_streams() {
    local dir=$1 n t streams
    # A pool of compute streams (issue 72 item 1; runtime::STREAMS_VAR): resident Cholesky on
    # the GPU alone with 1, 2 and 4 streams, in tiles of 1024 and the path's tile, each
    # against cuSOLVER's resident dpotrf (--compare gpu). Target: >= 0.8x at 8192, >= 0.95x at
    # 16384 with the best count; 1 stream is the run before the pool.
    for n in ${STREAMS_NS:-8192 16384}; do
        for t in 1024 $(path_tile "$n"); do
            for streams in ${STREAM_COUNTS:-1 2 4}; do
                HETLA_GPU_STREAMS=$streams row "$dir" "real-streams-$streams-$n-$t" cholesky --n "$n" \
                    --tile "$t" --clusters none --gpus "$gpus" --resident --repeat "$repeat" \
                    --compare gpu
                # The prediction: the h200 model's GPU sharing its rate among the streams'
                # kernels (it has rates at 2048 and 4096 only).
                if [ "$t" != 1024 ]; then
                    row "$dir" "sim-streams-$streams-$n-$t" simulate --platform h200 --n "$n" \
                        --tile "$t" --clusters none --gpus 1 --resident --streams "$streams"
                fi
            done
        done
        # Issue 72 item 2: the path's tile, then tiles of half its side from n/2 on (a smaller
        # tile on the critical path of the last steps), 4 streams, against cuSOLVER's resident
        # dpotrf. Predicted (docs/gpu.md "A tail of smaller tiles"): h200 16384 31.1 ms alone,
        # 31.1 with the tail (no gain: that run is bound by the area); 8192 needs the rates at
        # 1024 this part measures (at 2048's rates 11.3 -> 9.8 ms from host, 3 streams).
        t=$(path_tile "$n")
        local tail=(--tail-tile $((t / 2)) --tail-from $((n / 2)))
        HETLA_GPU_STREAMS=4 row "$dir" "real-tail-$n-$t" cholesky --n "$n" --tile "$t" "${tail[@]}" \
            --clusters none --gpus "$gpus" --resident --repeat "$repeat" --compare gpu
        if [ "$t" = 4096 ]; then
            row "$dir" "sim-tail-$n-$t" simulate --platform h200 --n "$n" --tile "$t" "${tail[@]}" \
                --clusters none --gpus 1 --resident --streams 4
        fi
        # The library's choice (no --tile): each candidate tile simulated from the kernels it
        # times first, then a tail of half the chosen tile where that is predicted faster.
        HETLA_GPU_STREAMS=4 row "$dir" "real-choice-$n" cholesky --n "$n" --clusters none \
            --gpus "$gpus" --resident --repeat "$repeat" --compare gpu
    done
}

part_sweep() {
    local dir=$1 n shape family
    # Shapes outside, families inside: a deadline cuts whole shapes, the last listed first.
    # The peers do not depend on hetla's shape: SWEEP_COMPARE=first times them in the first
    # shape's process only (Cholesky's peers include two DGEMMs of order n).
    local compare
    for n in ${SWEEP_NS:-8192 16384}; do
        compare=--compare
        for shape in ${SWEEP_SHAPES:-1x16 2x8 4x4 8x2 16x1}; do
            for family in ${SWEEP_FAMILIES:-cholesky lu qr}; do
                # Only cholesky takes GPUs (LU and QR run on the CPU clusters alone). QR's
                # matrix is square (`hetla qr` takes 2000 rows unless told: leases 4 and 5
                # timed 2000 x n matrices).
                local no_gpu=()
                [ "$family" = cholesky ] && no_gpu=(--gpus none)
                [ "$family" = qr ] && no_gpu=(--m "$n")
                # shellcheck disable=SC2086
                row "$dir" "sweep-$family-$n-$shape" "$family" --n "$n" --clusters "$shape" "${no_gpu[@]}" \
                    ${SWEEP_ARGS:-} $compare --repeat "$repeat"
            done
            [ "${SWEEP_COMPARE:-all}" = first ] && compare=
        done
    done
}

part_probe() {
    local dir=$1
    echo "[$SECONDS s] hetla calibrate --scaling --tile ${PROBE_TILES:-512 1024 2048}"
    # shellcheck disable=SC2086
    timeout "$row_timeout" "$hetla" calibrate --scaling --tile ${PROBE_TILES:-512 1024 2048} \
        --samples "${PROBE_SAMPLES:-3}" --output "$dir/probe.toml" --json \
        > "$dir/probe.json" 2> "$dir/probe.err" || echo "failed: probe" >&2
    python3 - "$dir/probe.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["scaling"]
except Exception as e:
    sys.exit(f"no probe JSON: {e}")
print(f"{r['backend']} {r['precision']}, {r['cores']} cores, median of {r['samples']} samples")
print("| op | tile | cores | clusters | alone Gflop/s a core (share) | busy (share) | one core |")
print("|---|---|---|---|---|---|---|")
for w in r["rows"]:
    a, b = w["alone_rate"], w["busy_rate"]
    print(f"| {w['op']} | {w['tile']} | {w['cores']} | {w['clusters']} | {a['gflops']:.1f} ({a['share']:.2f}) "
          f"| {b['gflops']:.1f} ({b['share']:.2f}) | {w['one_core_gflops']:.1f} |")
PY
    if [ -f "$dir/probe.toml" ]; then
        shapes=$(echo "${SWEEP_SHAPES:-1x16 2x8 4x4 8x2 16x1}" | tr ' ' ',')
        "$hetla" sweep --platform "$dir/probe.toml" --clusters "$shapes" --n 16384 \
            --tile "$(echo ${PROBE_TILES:-512 1024 2048} | tr ' ' ,)" --out "$dir/sweep-sim" > "$dir/sweep-sim.txt" 2>&1 \
            || echo "failed: sweep on the probe's platform file" >&2
        cat "$dir/sweep-sim.txt"
    fi
}

part_kernels() {
    local dir=$1
    # The CPU kernels' rates per cluster size with no GPU (lease 5: 4- and 5-core clusters ran
    # GEMM at 12-17 Gflop/s a core where 16 threads of DGEMM ran at 34): every cluster of each
    # shape timed at once, as in a run.
    echo "[$SECONDS s] hetla calibrate --clusters ${KERNEL_SHAPES:-16x1 8x2 4x4 2x8 1x16}"
    # shellcheck disable=SC2086
    timeout "$row_timeout" "$hetla" calibrate --clusters ${KERNEL_SHAPES:-16x1 8x2 4x4 2x8 1x16} --gpus none \
        --tile ${KERNEL_TILES:-512 1024 2048} --samples "$samples" --perfmodel-dir "$dir/models" \
        > "$dir/calibrate.txt" 2>&1 || echo "failed: calibrate" >&2
    python3 - "$dir/models" <<'PY'
import glob, json, sys
flops = {"gemm": 2.0, "potrf": 1 / 3, "syrk": 1.0, "trsm": 1.0}
print("| op | tile | cores | samples | seconds | Gflop/s a core |")
print("|---|---|---|---|---|---|")
for path in glob.glob(sys.argv[1] + "/perfmodels-*.json"):
    for m in json.load(open(path))["models"]:
        if m.get("calibration") or m["op"] not in flops:
            continue
        b, cores = m["shapes"][-1][0], m["class"].get("cores", 0)
        rate = flops[m["op"]] * b ** 3 / m["mean_s"] / 1e9 / max(cores, 1)
        print(f"| {m['op']} | {b} | {cores} | {m['samples']} | {m['mean_s']:.4f} | {rate:.1f} |")
PY
}

part_calibrate() {
    local dir=$1
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "skipped (deadline): calibrate and its rows"
        return
    fi
    # shellcheck disable=SC2086
    echo "[$SECONDS s] hetla calibrate"
    timeout "$row_timeout" "$hetla" calibrate --tile $tiles --gpus "$gpus" --samples "$samples" --output "$dir/platform.toml" \
        > "$dir/calibrate.txt" 2>&1 || echo "failed: calibrate" >&2
    local tile
    for tile in $tiles; do
        # Each case is n:clusters.
        for case in ${CALIBRATE_CASES:-8192:none $small_n:none 8192:${clusters_list%% *}}; do
            set -- "${case%%:*}" "${case##*:}"
            row "$dir" "real-$1-$tile-$2" cholesky --n "$1" --tile "$tile" --clusters "$2" --gpus "$gpus" --repeat "$repeat"
            row "$dir" "sim-$1-$tile-$2" simulate --platform "$dir/platform.toml" --n "$1" --tile "$tile" \
                --clusters "$2" --gpus 1
        done
        # LU on the GPU alone, its kernels' rates timed inside LU runs by the calibration.
        row "$dir" "real-lu-$small_n-$tile-none" lu --n "$small_n" --tile "$tile" --clusters none --gpus "$gpus" --repeat "$repeat"
        row "$dir" "sim-lu-$small_n-$tile-none" simulate --factorization lu --platform "$dir/platform.toml" \
            --n "$small_n" --tile "$tile" --clusters none --gpus 1
        # QR (in block columns) on the GPU alone, its panel's and reflectors' rates timed inside QR
        # runs by the calibration: the rate the QR predictions assumed (POTRF's).
        row "$dir" "real-qr-$small_n-$tile-none" qr --m "$small_n" --n "$((small_n / 4))" --tile "$tile" \
            --clusters none --gpus "$gpus" --repeat "$repeat"
        row "$dir" "sim-qr-$small_n-$tile-none" simulate --factorization qr --platform "$dir/platform.toml" \
            --m "$small_n" --n "$((small_n / 4))" --tile "$tile" --clusters none --gpus 1
        # LDL^T in block columns beside the first cluster shape (its gather, diagonal blocks,
        # panels and band steps on the cluster, its products and interchanges on the GPU: the GPU
        # kernels rated as GEMMs of their flops by the model, the host's as POTRF/GEMM).
        local shape=${clusters_list%% *}
        row "$dir" "real-ldlt-$small_n-$tile-$shape" ldlt --n "$small_n" --tile "$tile" --clusters "$shape" \
            --gpus "$gpus" --repeat "$repeat"
        row "$dir" "sim-ldlt-$small_n-$tile-$shape" simulate --factorization ldlt --platform "$dir/platform.toml" \
            --n "$small_n" --tile "$tile" --clusters "$shape" --gpus 1
    done
}

summarize() {
    python3 - "$1/rows.jsonl" <<'EOF'
import json, os, sys
path = sys.argv[1]
if not os.path.exists(path):
    sys.exit(0)
rows = [json.loads(l) for l in open(path)]
print("| label | command | time (s) | Gflop/s | residual / error | peers | phases (s) |")
print("|---|---|---|---|---|---|---|")
real = {}
for r in rows:
    rep = r.get("report")
    if rep is None:
        print(f"| {r['label']} | {r['args']} | failed | | {r['error'].strip()[:200]} | | |")
        continue
    # Where the command's time went (cholesky and gemm runs report their phases).
    phases = ", ".join(f"{p['name']} {p['seconds']:.1f}" for p in rep.get("phases") or [])
    if "report" in rep:  # gemm's output nests its report
        rep, peers = rep["report"], rep.get("peers", [])
        err = rep.get("relative_error")
    else:
        peers = rep.get("peers") or []
        err = rep.get("residual", rep.get("relative_error"))
    secs = rep.get("seconds", rep.get("makespan_ms", 0) / 1e3)
    gf = rep.get("gflops", float("nan"))
    peer = ", ".join(f"{p['name']} {p['gflops']:.0f} (ratio {gf / p['gflops']:.3f})" for p in peers)
    if "mixed" in rep:  # a mixed-precision solve (--precision ds) beside the f64 one
        secs, err = rep["mixed"]["best"], rep.get("backward_error")
        peer = f"f64 solve {rep['double']['best']:.4f} s (ratio {rep['double']['best'] / secs:.3f})"
    # Bytes per link direction (cholesky's `bytes`, gemm's `bytes_moved.per_link`).
    links = rep.get("bytes") or (rep.get("bytes_moved") or {}).get("per_link") or []
    if links:
        peer += ("; " if peer else "") + ", ".join(f"{l['link']} {l['bytes'] / 1e9:.2f} GB" for l in links)
    # The inverse (`--inverse`): factorisation + inverse, its residual, its peers.
    inv = rep.get("inverse")
    if inv:
        peer += ("; " if peer else "") + f"INVERSE {inv['seconds']:.4f} s (median {inv['median_seconds']:.4f}), {inv['gflops']:.0f} Gflop/s, residual {inv['residual']:.3g}"
        for p in inv.get("peers") or []:
            peer += f", {p['name']} {p['seconds']:.4f} s (ratio {inv['gflops'] / p['gflops']:.3f})"
    # What a page-locked run locked, and what that cost (cholesky's `page_locked`).
    locked = rep.get("page_locked")
    if locked:
        peer += f"; page-locked {locked['bytes'] / 1e9:.2f} GB in {locked['seconds']:.3f} s"
        peer += f", {locked.get('already', 0) / 1e9:.2f} GB locked already"
        if locked.get("failed"):
            peer += f", FAILED: {locked['failed']}"
    print(f"| {r['label']} | {r['args']} | {secs:.4f} | {gf:.1f} | {err} | {peer} | {phases} |")
    # A Cholesky row pairs by the runtime's makespan, a GEMM row (no makespan) by its seconds.
    measure = rep.get("makespan_ms") or 1e3 * rep.get("seconds", float("nan"))
    if r["label"].startswith("real-"):
        real[r["label"][5:]] = measure
    if r["label"].startswith("sim-") and r["label"][4:] in real:
        ms, sim = real[r["label"][4:]], measure
        print(f"| sim vs real {r['label'][4:]} | | {sim:.1f} ms vs {ms:.1f} ms | | {100 * (sim - ms) / ms:+.1f}% | | |")
EOF
}

for part in "$@"; do
    declare -F "part_$part" > /dev/null || { echo "unknown part $part" >&2; exit 2; }
    run_part "$part"
done
echo "== [$SECONDS s] done: $(ls "$out")"
