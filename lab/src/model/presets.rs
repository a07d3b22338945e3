//! The built-in platform models, each with the table it comes from.

use hetla_kernels::{Op, Precision, RateSource};

use std::path::Path;

use super::platform::{
    CpuKernelRate, CpuModel, GpuKernelRate, GpuModel, LinkModel, LinkRate, LoadedReduction,
    PRESETS, PlatformModel, Speedup, StagingRate, TensorRate, model_error,
};
use crate::Result;

impl PlatformModel {
    /// A built-in model by name (see [`PRESETS`]).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "sirocco" => Some(sirocco()),
            "knl" => Some(knl()),
            "a100x8" => Some(a100x8()),
            "h200" => Some(h200()),
            "h100" => Some(h100()),
            "xeon16" => Some(xeon16()),
            "xeon16-target" => Some(xeon16_target()),
            _ => None,
        }
    }

    /// A preset name, or else the path of a TOML model file.
    pub fn resolve(name_or_path: &str) -> Result<Self> {
        if let Some(model) = Self::preset(name_or_path) {
            return Ok(model);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(model_error(
                name_or_path,
                format!(
                    "neither a preset ({}) nor an existing file",
                    PRESETS.join(", ")
                ),
            ));
        }
        Self::load(path)
    }
}

/// A K40m's PCIe 3.0 x16 link per direction. Cojean et al. (2016) gives no transfer figures; 10
/// GB/s is what pinned copies typically reach on PCIe 3.0 x16 (15.75 GB/s raw), 10 us a typical
/// latency of one `cudaMemcpyAsync`.
const K40M_PCIE: LinkRate = LinkRate {
    latency_us: 10.0,
    gb_per_s: 10.0,
};

/// Cojean et al. (2016), Table 2, per (operation, tile): one core's Gflop/s, GPU / one core, 10
/// cores / one core.
const SIROCCO_TABLE: [(Op, usize, f64, f64, f64); 8] = [
    (Op::Potrf, 960, 27.78, 1.72, 5.55),
    (Op::Potrf, 1920, 31.11, 5.95, 7.48),
    (Op::Trsm, 960, 34.42, 8.72, 6.75),
    (Op::Trsm, 1920, 34.96, 18.59, 8.48),
    (Op::Syrk, 960, 31.52, 26.96, 6.90),
    (Op::Syrk, 1920, 32.93, 31.73, 8.63),
    (Op::GemmNt, 960, 36.46, 28.80, 7.77),
    (Op::GemmNt, 1920, 37.27, 30.86, 8.56),
];

/// An f64 kernel's rate at `tile` on one core (Gflop/s) and its speedup on 10 cores.
fn ten_core_rate(
    op: Op,
    tile: usize,
    core: f64,
    ten: f64,
    loaded: Vec<LoadedReduction>,
) -> CpuKernelRate {
    CpuKernelRate {
        op: op.name().into(),
        tile,
        precision: Precision::D,
        core_gflops: core,
        speedups: vec![Speedup {
            cores: 10,
            speedup: ten,
        }],
        loaded,
    }
}

/// Cojean et al. (2016) (section 4, after Table 1) measured KNL kernels on a loaded machine
/// (kernels running on every other core): DGEMM of order 480 on one core lost 15% of its rate, of
/// order 2880 on 16 threads 4%. The presets apply the one-core figure to every kernel and tile
/// (memory contention slows them all; the paper gives no others) and `wide` at the wide cluster
/// size, linear in between: knl 4% at 16 cores (the paper's); sirocco 0% at its 10-core clusters,
/// an assumption (the paper measured contention on KNL only, and found on sirocco 13% of the
/// clustered version's DGEMMs memory-bound against 59% of the sequential one's: a cluster per
/// socket hardly contends).
fn loaded(cores: usize, wide: f64) -> Vec<LoadedReduction> {
    vec![
        LoadedReduction {
            cores: 1,
            reduction: 0.15,
        },
        LoadedReduction {
            cores,
            reduction: wide,
        },
    ]
}

/// Adds s, c and z rates derived from a preset's d rates, as the preset's description states: the
/// papers give f64 rates only, so these are assumptions, not measurements. Single precision runs at
/// `cpu_single` (CPU) and `gpu_single` (GPU) times the double rate (the ratio of the hardware's
/// peak rates); complex kernels run at the rate, in real flops, of the real kernels of their width
/// (c as s, z as d: a complex multiply-add is 4 real ones on the same units).
fn with_derived_precisions(
    mut model: PlatformModel,
    cpu_single: f64,
    gpu_single: f64,
) -> PlatformModel {
    let scale = |p: Precision, single: f64| match p {
        Precision::S | Precision::C => single,
        Precision::D | Precision::Z => 1.0,
    };
    let derived = [Precision::S, Precision::C, Precision::Z];
    let cpu: Vec<CpuKernelRate> = derived
        .iter()
        .flat_map(|&p| {
            model.cpu.kernels.iter().map(move |k| CpuKernelRate {
                precision: p,
                core_gflops: k.core_gflops * scale(p, cpu_single),
                ..k.clone()
            })
        })
        .collect();
    model.cpu.kernels.extend(cpu);
    if let Some(gpu) = &mut model.gpu {
        let derived: Vec<GpuKernelRate> = derived
            .iter()
            .flat_map(|&p| {
                gpu.kernels.iter().map(move |k| GpuKernelRate {
                    precision: p,
                    gflops: k.gflops * scale(p, gpu_single),
                    ..k.clone()
                })
            })
            .collect();
        gpu.kernels.extend(derived);
    }
    model
}

/// What the presets assume of LU's kernels, which the papers do not time (said in their
/// descriptions).
const LU_ASSUMPTION: &str = "; LU's kernels assumed, not measured: the panel (lu_panel) at POTRF's \
    rate, the update (lu_update) at GEMM's, the interchanges (lu_swap: entries moved) at GEMM's \
    flop rate, nearly free; QR's \
    likewise: the factorisations (geqrt, tsqrt, ttqrt) at POTRF's rate, their applications (unmqr, \
    tsmqr, ttmqr) at GEMM's; the inverse's (on CPUs and GPUs): TRTRI and LAUUM at POTRF's, its \
    triangular solves and products at TRSM's, its rank-k updates at SYRK's; LDL^T's panels at POTRF's, its products and \
    interchanges at GEMM's";

/// Adds the CPU rates of the operations whose codelets take them from another's
/// ([`RateSource::Like`]: those of LU, QR, LDL^T and the inverse, derived from Cholesky's), as
/// [`LU_ASSUMPTION`] states: the panel factorisation is a narrow, latency-bound factorisation like
/// POTRF; the update of a block column is a triangular solve of b rows and a product of the rows
/// below, almost all GEMM; QR's tile factorisations are panels too, their applications products.
/// Those that run on CPU clusters only get no GPU rates; those with a GPU kernel (the inverse's)
/// get the GPU rate of the operation they are like, as on the CPUs.
fn with_lu_rates(mut model: PlatformModel) -> PlatformModel {
    let derived: Vec<CpuKernelRate> = model
        .cpu
        .kernels
        .iter()
        .flat_map(|k| {
            like(&k.op, false).map(|op| CpuKernelRate {
                op: op.name().into(),
                ..k.clone()
            })
        })
        .collect();
    model.cpu.kernels.extend(derived);
    if let Some(gpu) = &mut model.gpu {
        let derived: Vec<GpuKernelRate> = gpu
            .kernels
            .iter()
            .flat_map(|k| {
                like(&k.op, true).map(|op| GpuKernelRate {
                    op: op.name().into(),
                    ..k.clone()
                })
            })
            .collect();
        gpu.kernels.extend(derived);
    }
    model.description.push_str(LU_ASSUMPTION);
    model
}

/// The operations whose rate is taken from the operation named `name` ([`RateSource::Like`]); with
/// `gpu`, only those that have a GPU kernel.
fn like(name: &str, gpu: bool) -> impl Iterator<Item = Op> + '_ {
    Op::ALL.into_iter().filter(move |op| {
        (!gpu || op.runs_on_gpus())
            && matches!(op.codelet().rate, RateSource::Like(like) if like.name() == name)
    })
}

/// `sirocco`: two 12-core Haswell E5-2680 v3 and four K40m, rates from Cojean et al. (2016) Table 2
/// (Intel MKL on the cores, cuBLAS/MAGMA on the GPUs) at tiles 960 and 1920.
pub(super) fn sirocco() -> PlatformModel {
    with_lu_rates(with_derived_precisions(PlatformModel {
        name: "sirocco".into(),
        description: "2 x 12-core Intel Xeon E5-2680 v3 (Haswell, 2.5 GHz) + 4 NVIDIA K40m; \
            kernel rates of Cojean et al. (2016) (Cojean et al. 2016), Table 2, at tiles 960 and 1920 \
            (f64); s, c and z assumed, not measured: s and c (real flops) at 2x d on the \
            cores (AVX2's single/double peak) and 3x on the K40m (4.29/1.43 Tflop/s peak), z as d"
            .into(),
        cpu: CpuModel {
            packages: 2,
            cores_per_package: 12,
            numa_per_package: 1,
            task_overhead_us: 0.0,
            outside_graph: Vec::new(),
            kernels: SIROCCO_TABLE
                .iter()
                .map(|&(op, tile, core, _, ten)| ten_core_rate(op, tile, core, ten, loaded(10, 0.0)))
                .collect(),
        },
        gpu: Some(GpuModel {
            name: "K40m".into(),
            count: 4,
            // 12 GB of GDDR5 per K40m (NVIDIA's data sheet).
            memory_gb: 12.0,
            // Cojean et al. (2016) does not say whether the K40m's copy peer to peer: copies
            // between them are staged through host memory, the conservative choice.
            link: LinkModel {
                h2d: K40M_PCIE,
                d2h: K40M_PCIE,
                p2p: None,
                // Nor how the GPUs reach the host: each on its own PCIe link.
                host_shared_by: 1,
            },
            staging: Vec::new(),
            launch_us: 0.0,
            pageable: None,
            lock_gb_per_s: 0.0,
            device_copies: None,
            // Kepler has no tensor cores.
            tensor: Vec::new(),
            kernels: SIROCCO_TABLE
                .iter()
                .map(|&(op, tile, core, gpu, _)| GpuKernelRate {
                    op: op.name().into(),
                    tile,
                    precision: Precision::D,
                    gflops: core * gpu,
                })
                .collect(),
        }),
    }, 2.0, 3.0))
}

/// Cojean et al. (2016), Table 1 (Intel KNL 7210, MKL): per operation, the tile sizes, one core's
/// Gflop/s at each, and the efficiency (speedup / cores) on 2, 4, 8, 16, 32 and 64 cores.
const KNL_TILES: [usize; 5] = [480, 960, 1440, 1920, 2880];
const KNL_CORES: [usize; 6] = [2, 4, 8, 16, 32, 64];
#[allow(clippy::type_complexity)]
const KNL_TABLE: [(Op, [f64; 5], [[f64; 5]; 6]); 4] = [
    (
        Op::Potrf,
        [8.818, 14.695, 18.646, 20.417, 23.515],
        [
            [0.72, 0.84, 0.78, 0.91, 0.90],
            [0.51, 0.71, 0.70, 0.74, 0.75],
            [0.30, 0.52, 0.53, 0.56, 0.72],
            [0.19, 0.31, 0.39, 0.42, 0.52],
            [0.07, 0.16, 0.27, 0.32, 0.37],
            [0.01, 0.06, 0.11, 0.15, 0.27],
        ],
    ),
    (
        Op::Trsm,
        [22.837, 27.554, 28.614, 29.157, 30.226],
        [
            [0.74, 0.83, 0.87, 0.89, 0.92],
            [0.63, 0.77, 0.83, 0.86, 0.88],
            [0.43, 0.58, 0.70, 0.79, 0.84],
            [0.30, 0.44, 0.55, 0.62, 0.69],
            [0.17, 0.29, 0.43, 0.48, 0.60],
            [0.09, 0.19, 0.26, 0.35, 0.48],
        ],
    ),
    (
        Op::Syrk,
        [21.384, 25.725, 27.207, 27.905, 29.400],
        [
            [0.82, 0.88, 0.91, 0.93, 0.95],
            [0.67, 0.78, 0.83, 0.87, 0.90],
            [0.54, 0.68, 0.76, 0.78, 0.85],
            [0.39, 0.53, 0.62, 0.69, 0.74],
            [0.21, 0.28, 0.37, 0.50, 0.58],
            [0.09, 0.17, 0.23, 0.24, 0.33],
        ],
    ),
    (
        Op::GemmNt,
        [26.703, 29.339, 29.872, 29.911, 30.856],
        [
            [0.88, 0.92, 0.86, 0.87, 0.87],
            [0.74, 0.86, 0.89, 0.90, 0.92],
            [0.70, 0.76, 0.89, 0.89, 0.92],
            [0.46, 0.71, 0.82, 0.86, 0.90],
            [0.33, 0.52, 0.69, 0.73, 0.86],
            [0.20, 0.35, 0.51, 0.57, 0.64],
        ],
    ),
];

/// `knl`: one 64-core Intel Xeon Phi 7210 in SNC-4 mode (4 NUMA nodes of 16 cores), rates from
/// Cojean et al. (2016) Table 1 (Intel MKL) at tiles 480, 960, 1440, 1920 and 2880.
pub(super) fn knl() -> PlatformModel {
    let mut kernels = Vec::new();
    for (op, core, efficiency) in KNL_TABLE {
        for (t, &tile) in KNL_TILES.iter().enumerate() {
            kernels.push(CpuKernelRate {
                op: op.name().into(),
                tile,
                precision: Precision::D,
                core_gflops: core[t],
                speedups: KNL_CORES
                    .iter()
                    .zip(&efficiency)
                    .map(|(&cores, row)| Speedup {
                        cores,
                        speedup: row[t] * cores as f64,
                    })
                    .collect(),
                loaded: loaded(16, 0.04),
            });
        }
    }
    cpu_preset(
        "knl",
        "Intel Xeon Phi 7210 (KNL, 64 cores at 1.3 GHz, SNC-4: 4 NUMA nodes of \
            16 cores); kernel rates of Cojean et al. (2016) (Cojean et al. 2016), Table 1 (f64); \
            s, c and z assumed, not measured: s and c (real flops) at 2x d (AVX-512's \
            single/double peak), z as d",
        (1, 64, 4),
        kernels,
    )
}

/// One A100 of the Karolina HGX node, Anastasiadis (2024) section 4.3, Table 4.1: 17.2 Tflop/s FP64
/// peak (clocks tuned for energy efficiency, 12% under the nominal 19.5).
const A100_GFLOPS: f64 = 17_200.0;

/// `a100x8`: Anastasiadis (2024) chapter 4's NVIDIA HGX node (Karolina): 2 x 64-core AMD EPYC 7763
/// and 8 A100 (40 GB HBM2), PCIe 4.0 to host memory at 96 GB/s in all (12 GB/s per GPU when all
/// copy) through 4 links each shared by a pair of GPUs (0-1, 2-3, ...: its strong-scaling study
/// finds the host bandwidth of GPUs 0, 2, 4, 6 equal to that of all 8), so 24 GB/s per pair,
/// NVLink3 / NVSwitch2 between GPUs at 600 GB/s bidirectional per GPU (300 GB/s each way). GEMM
/// tiles at the 17.2 Tflop/s the thesis states per GPU, at its default minimum tile 2048 and at
/// 4096; it gives no CPU kernel rates, so simulations on it use `--clusters none`, and no latencies
/// (10 us per copy assumed).
pub(super) fn a100x8() -> PlatformModel {
    let rate = |gb_per_s| LinkRate {
        latency_us: 10.0,
        gb_per_s,
    };
    with_derived_precisions(PlatformModel {
        name: "a100x8".into(),
        description: "2 x 64-core AMD EPYC 7763 + 8 NVIDIA A100 40 GB (NVLink3/NVSwitch2); \
            GEMM rate and link bandwidths of Anastasiadis (2024) (Anastasiadis 2024), chapter 4, Table 4.1 \
            (f64); s, c and z assumed, not measured: all at the d rate (the A100's FP32 peak, \
            19.5 Tflop/s without TF32, equals its FP64 tensor-core peak)"
            .into(),
        cpu: CpuModel {
            packages: 2,
            cores_per_package: 64,
            numa_per_package: 1,
            task_overhead_us: 0.0,
            outside_graph: Vec::new(),
            kernels: Vec::new(),
        },
        gpu: Some(GpuModel {
            name: "A100".into(),
            count: 8,
            memory_gb: 40.0,
            link: LinkModel {
                h2d: rate(24.0),
                d2h: rate(24.0),
                p2p: Some(rate(300.0)),
                host_shared_by: 2,
            },
            staging: Vec::new(),
            launch_us: 0.0,
            pageable: None,
            lock_gb_per_s: 0.0,
            device_copies: None,
            // NVIDIA's A100 data sheet, dense: TF32 156 and BF16 312 Tflop/s over FP32's 19.5.
            tensor: tensor_rates(156.0 / 19.5, 312.0 / 19.5),
            kernels: [2048, 4096]
                .into_iter()
                .map(|tile| GpuKernelRate {
                    op: Op::GemmNt.name().into(),
                    tile,
                    precision: Precision::D,
                    gflops: A100_GFLOPS,
                })
                .collect(),
        }),
    }, 2.0, 1.0)
}

/// The tensor-core rates of a GPU whose TF32 and BF16 GEMMs run at `tf32` and `bf16` times its f32
/// one ([`TensorRate`]).
fn tensor_rates(tf32: f64, bf16: f64) -> Vec<TensorRate> {
    vec![
        TensorRate {
            math: hetla::TensorMath::Tf32,
            speedup: tf32,
        },
        TensorRate {
            math: hetla::TensorMath::Bf16,
            speedup: bf16,
        },
    ]
}

/// Hopper's (H100 and H200 SXM) tensor-core speedups over its FP32 units, from NVIDIA's data sheet,
/// dense: TF32 494.7 and BF16 989.4 Tflop/s over FP32's 66.9. Assumed, not measured: cuBLAS reaches
/// a smaller fraction of the tensor peaks than of FP32's (an upper bound on the rates).
const HOPPER_TENSOR: (f64, f64) = (494.7 / 66.9, 989.4 / 66.9);

/// One GPU of `memory_gb` on a host link of `link` each way, with the f64 `kernels` (operation,
/// tile, Gflop/s), and no packing rate.
fn one_gpu(name: &str, memory_gb: f64, link: LinkRate, kernels: &[(Op, usize, f64)]) -> GpuModel {
    GpuModel {
        name: name.into(),
        count: 1,
        memory_gb,
        link: LinkModel {
            h2d: link,
            d2h: link,
            p2p: None,
            host_shared_by: 1,
        },
        staging: Vec::new(),
        launch_us: 0.0,
        pageable: None,
        lock_gb_per_s: 0.0,
        device_copies: None,
        tensor: Vec::new(),
        kernels: kernels
            .iter()
            .map(|&(op, tile, gflops)| GpuKernelRate {
                op: op.name().into(),
                tile,
                precision: Precision::D,
                gflops,
            })
            .collect(),
    }
}

impl GpuModel {
    /// The same GPU packing its staged copies at `rates`.
    fn packing_at(self, rates: Vec<StagingRate>) -> Self {
        Self {
            staging: rates,
            ..self
        }
    }
}

/// The H200's f64 kernels as the two leases of 2026-11-26 timed them (docs/gpu-runs: every row run
/// on the GPU alone, the mean of each row's kernel rate, cuBLAS 13.1 and cuSOLVER 12.0):
/// (operation, tile, Gflop/s). Tile 2048: four rows (n = 8192 three times, 16384 once); tile 4096:
/// two rows (n = 16384).
const H200_GPU: [(Op, usize, f64); 8] = [
    (Op::Potrf, 2048, 3169.0),
    (Op::Trsm, 2048, 9139.0),
    (Op::Syrk, 2048, 50376.0),
    (Op::GemmNt, 2048, 53647.0),
    (Op::Potrf, 4096, 10903.0),
    (Op::Trsm, 4096, 24142.0),
    (Op::Syrk, 4096, 55589.0),
    (Op::GemmNt, 4096, 56176.0),
];

/// The H200 node's PCIe 5.0 x16 link per direction. No lease timed a copy alone: 55 GB/s is what
/// page-locked copies reach on PCIe 5.0 x16 (64 GB/s raw per direction; NVIDIA's H200 data sheet
/// gives 128 GB/s both ways together), 10 us a typical latency of one `cudaMemcpyAsync`.
const H200_PCIE: LinkRate = LinkRate {
    latency_us: 10.0,
    gb_per_s: 55.0,
};

/// GB/s at which the node's Xeon cores pack tiles into page-locked staging (or unpack them), on 1,
/// 8 and 16 cores. No lease timed the packing alone, so each rate is taken from one reference row
/// of n = 8192 in tiles of 2048, a run that packing bounds (its clusters ran no task, the GPU's
/// kernels took 11.7 ms of it): the rate at which this model reproduces the row's makespan. On 1
/// core the row `copy-cores-1-8192` (127.6 ms); on 8 the lower median of the four rows that packed
/// on 8 (40.0, 48.3, 52.1, 52.8 ms: `mixed-8192` beside 3x5, 48.3 ms); on 16 the median of the
/// three rows of the GPU alone (29.8, 30.7, 33.4 ms: the second lease's `mixed-8192`, 30.7 ms).
/// `cargo run --release -p hetla-lab --example h200` finds them again and checks every other row
/// against them (docs/gpu-model.md). Packing does not scale with the cores: 8 pack at 3.0x one, 16
/// at 5.2x.
const H200_STAGING: [(usize, f64); 3] = [(1, 5.60), (8, 16.54), (16, 29.15)];

/// The CPU kernels of the H200 node's 16 Xeon cores, which no lease timed (its clusters ran no
/// task): each core's peak (AVX-512, two FMA units: 32 flops a cycle, at an assumed 2.0 GHz: 64
/// Gflop/s) times the efficiency of the same kernel on one Haswell core in Cojean et al. (2016),
/// Table 2, at tile 1920 (rate / 40 Gflop/s peak), with that table's 10-core speedups: (operation,
/// one core's Gflop/s, speedup on 10 cores).
const H200_CPU: [(Op, f64, f64); 4] = [
    (Op::Potrf, 64.0 * 31.11 / 40.0, 7.48),
    (Op::Trsm, 64.0 * 34.96 / 40.0, 8.48),
    (Op::Syrk, 64.0 * 32.93 / 40.0, 8.63),
    (Op::GemmNt, 64.0 * 37.27 / 40.0, 8.56),
];

/// `h200`: the GPU node measured on 2026-11-26 (docs/gpu.md): 16 Intel Xeon cores (AVX-512, one
/// package) and one NVIDIA H200 (141 GB HBM3e) on PCIe 5.0 x16, with hetla's staged copies (each
/// tile packed by CPU cores into page-locked staging). GPU kernel rates and packing rates from the
/// leases' rows; the link's rate published; the CPU kernels assumed.
pub(super) fn h200() -> PlatformModel {
    let cpu_kernels = [2048, 4096]
        .into_iter()
        .flat_map(|tile| {
            H200_CPU
                .iter()
                .map(move |&(op, core, ten)| ten_core_rate(op, tile, core, ten, Vec::new()))
        })
        .collect();
    with_lu_rates(with_derived_precisions(
        PlatformModel {
            name: "h200".into(),
            description: "16 Intel Xeon cores (AVX-512) + 1 NVIDIA H200 (PCIe 5.0 x16), the GPU \
            node of docs/gpu.md; f64 GPU kernel rates and the rates of its staged copies (1, 8 and \
            16 cores pack at 5.6, 16.5 and 29.2 GB/s, each from one reference row) from its rows (docs/gpu-runs, 2026-11-26), the link at 55 GB/s each \
            way (published PCIe 5.0 figures, not measured); CPU kernels assumed, not measured: \
            64 Gflop/s peak per core at Haswell's Table 2 efficiencies (Cojean et al. 2016); s, c \
            and z assumed, not measured: s and c (real flops) at 2x d on the cores, at the d \
            rate on the H200 (its FP32 peak equals its FP64 tensor-core peak), z as d"
                .into(),
            cpu: CpuModel {
                packages: 1,
                cores_per_package: 16,
                numa_per_package: 1,
                task_overhead_us: 0.0,
                outside_graph: Vec::new(),
                kernels: cpu_kernels,
            },
            // 141 GB of HBM3e (NVIDIA's data sheet); the lease's budget was 134.4 GB.
            gpu: Some(GpuModel {
                tensor: tensor_rates(HOPPER_TENSOR.0, HOPPER_TENSOR.1),
                ..one_gpu("NVIDIA H200", 141.0, H200_PCIE, &H200_GPU).packing_at(
                    H200_STAGING
                        .iter()
                        .map(|&(cores, gb_per_s)| StagingRate { cores, gb_per_s })
                        .collect(),
                )
            }),
        },
        2.0,
        1.0,
    ))
}

/// The H100's f64 kernels as leases 3 and 4 timed them on the GPU alone (every row of
/// docs/gpu-runs/2026-11-26-h100-rows.jsonl and 2026-11-27-h100-rows.jsonl run with
/// `--clusters none`: the mean of the rows' kernel rates, 4 rows at tile 2048 and 8 at 4096; cuBLAS
/// 13.1, cuSOLVER 12.0): (operation, tile, Gflop/s). Measured, nothing fitted.
const H100_GPU: [(Op, usize, f64); 8] = [
    (Op::Potrf, 2048, 3095.0),
    (Op::Trsm, 2048, 9272.0),
    (Op::Syrk, 2048, 48758.0),
    (Op::GemmNt, 2048, 54537.0),
    (Op::Potrf, 4096, 11480.0),
    (Op::Trsm, 4096, 22888.0),
    (Op::Syrk, 4096, 54605.0),
    (Op::GemmNt, 4096, 55864.0),
];

/// The H100 node's host link per direction. Device-to-host copies of 32 and 128 MiB tiles in lease
/// 3's traces of its page-locked rows (docs/gpu-runs/2026-11-26-h100-lease3/trace-*-locked.json)
/// ran at medians of 53.1, 53.6 and 54.8 GB/s (n = 8192, 16384, 32768): 54 GB/s, measured. The
/// traces show host-to-device copies at their queueing only, so that direction is not measured and
/// taken as the same; 10 us a copy's latency, typical, not measured.
const H100_PCIE: LinkRate = LinkRate {
    latency_us: 10.0,
    gb_per_s: 54.0,
};

/// The H100 node's page-locking rate: lease 3 locked the 8.59 GB of an f64 matrix of order 32768 in
/// 0.427 s (`cuMemHostRegister`, its page-locked row's `page_locked.seconds`): 20.1 GB/s, measured.
const H100_LOCK_GB_PER_S: f64 = 8.59 / 0.427;

/// `h100`: the GPU node of leases 3 to 5 (docs/gpu-runs/2026-11-26-h100-lease3.md to
/// 2026-11-27-h100-lease5.md): one NVIDIA H100 80GB HBM3 and the 16 Xeon cores [`xeon16`] models,
/// each rate measured there and named: the GPU's kernels ([`H100_GPU`]), the link's device-to-host
/// rate ([`H100_PCIE`]), the cores' kernels ([`XEON16_CORE`], [`XEON16_SPEEDUPS`], at tiles of 512
/// to 2048). No packing rate was measured: the model has none, so it copies staged tiles at the
/// link's rate (its staged rows are not predictions; `hetla calibrate --gpus all --output` on the
/// node measures them).
pub(super) fn h100() -> PlatformModel {
    with_lu_rates(with_derived_precisions(
        PlatformModel {
            name: "h100".into(),
            description: "the GPU node of leases 3 to 5 (docs/gpu-runs): 1 NVIDIA H100 80GB HBM3 \
            and 16 Intel Xeon cores (AVX-512); measured in its rows and traces, nothing fitted: \
            f64 GPU kernel rates at tiles 2048 and 4096 (the mean of the GPU-alone rows), the \
            link at 54 GB/s (device-to-host copies in lease 3's traces; host-to-device taken as \
            the same, not measured; 10 us latency, typical), page-locking at 20.1 GB/s (lease \
            3's row of order 32768), the cores' kernels as xeon16's; no \
            packing rate (not measured: staged copies go at the link's rate); s and c at the d \
            rate on the H100 (its FP32 peak equals its FP64 tensor-core peak) and 2x d on the \
            cores, z as d, assumed"
                .into(),
            cpu: CpuModel {
                packages: 1,
                cores_per_package: 16,
                numa_per_package: 1,
                task_overhead_us: 0.0,
                outside_graph: Vec::new(),
                kernels: xeon16_kernels(),
            },
            // 80 GB of HBM3 (NVIDIA's data sheet); lease 4's budget was 75.8 GB.
            gpu: Some(GpuModel {
                lock_gb_per_s: H100_LOCK_GB_PER_S,
                tensor: tensor_rates(HOPPER_TENSOR.0, HOPPER_TENSOR.1),
                ..one_gpu("NVIDIA H100 80GB HBM3", 80.0, H100_PCIE, &H100_GPU)
            }),
        },
        2.0,
        1.0,
    ))
}

/// One core of the GPU node's 16 Xeon cores (leases 4 and 5,
/// docs/gpu-runs/2026-11-27-h100-lease4.md and -lease5.md): DGEMM of order 16384 on all 16 threads
/// ran at 545 Gflop/s, faer's and OpenBLAS's alike, 34 Gflop/s a core with every core busy. The
/// other kernels' rates were not timed apart; they are GEMM's times their ratio to it on one Zen 4
/// core of the development machine (`hetla calibrate --scaling`, faer, f64, tile 1024: TRSM 0.80,
/// SYRK 0.84, POTRF 0.68), an assumption.
const XEON16_CORE: [(Op, f64); 4] = [
    (Op::GemmNt, 34.0),
    (Op::Trsm, 34.0 * 0.80),
    (Op::Syrk, 34.0 * 0.84),
    (Op::Potrf, 34.0 * 0.68),
];

/// The speedups of clusters on the 16 Xeon cores as leases 4 and 5 measured them, every cluster
/// busy and each kernel's pieces on the cluster's rayon pool (before the teams): GEMM inside the
/// 4x4 and 3x5 runs, lease 5's performance models: 4 cores 0.0041 s at tile 512 (65.5 Gflop/s,
/// 1.93x one core), 0.346 s at 2048 (49.7 Gflop/s, 1.46x); 5 cores 0.232 s at 2048 (74.0 Gflop/s,
/// 2.18x). (tile, [(cores, speedup)]); 1024 is 512's and 2048's mean, an assumption; the other
/// kernels are given GEMM's speedups, an assumption.
const XEON16_SPEEDUPS: [(usize, &[(usize, f64)]); 3] = [
    (512, &[(4, 1.93)]),
    (1024, &[(4, 1.70)]),
    (2048, &[(4, 1.46), (5, 2.18)]),
];

/// The f64 kernels of the 16 Xeon cores as leases 4 and 5 measured them ([`XEON16_CORE`],
/// [`XEON16_SPEEDUPS`]).
fn xeon16_kernels() -> Vec<CpuKernelRate> {
    XEON16_SPEEDUPS
        .iter()
        .flat_map(|&(tile, speedups)| {
            XEON16_CORE.iter().map(move |&(op, core)| CpuKernelRate {
                op: op.name().into(),
                tile,
                precision: Precision::D,
                core_gflops: core,
                speedups: speedups
                    .iter()
                    .map(|&(cores, speedup)| Speedup { cores, speedup })
                    .collect(),
                loaded: Vec::new(),
            })
        })
        .collect()
}

/// `xeon16`: the 16 Intel Xeon cores (AVX-512, one package, one NUMA node) of the GPU node of
/// leases 4 and 5, without its GPU, as those leases measured them: one core's GEMM and the
/// clusters' lost rate ([`XEON16_CORE`], [`XEON16_SPEEDUPS`]). A cluster of several cores ran at
/// half of each core's rate, so the model's best shape is 16x1.
/// `hetla calibrate --scaling --output` on the node gives the file that replaces it.
pub(super) fn xeon16() -> PlatformModel {
    let kernels = xeon16_kernels();
    cpu_preset(
        "xeon16",
        "the 16 Intel Xeon cores (AVX-512) of the GPU node of leases 4 and 5 \
            (docs/gpu-runs/2026-11-27-h100-lease4.md, -lease5.md), CPU only, as measured there \
            with each kernel's pieces on rayon: one core's DGEMM at 34 Gflop/s with all cores busy \
            (its other kernels at GEMM's rate times their ratio on a Zen 4 core, assumed), 4-core \
            clusters' GEMM at 1.93x one core at tile 512 and 1.46x at 2048, 5-core at 2.18x at \
            2048 (the other kernels alike, assumed; sizes beyond by Amdahl's law); rates with \
            every cluster busy, no loaded reduction; s and c (real flops) at 2x d, z as d, \
            assumed",
        (1, 16, 1),
        kernels,
    )
}

/// `xeon16-target`: [`xeon16`] with every cluster of k cores at 0.9 k x one core, issue 70's target
/// for the cluster teams, not a measurement: what `sweep` predicts of the 16 cores if the target is
/// met.
pub(super) fn xeon16_target() -> PlatformModel {
    let mut model = xeon16();
    model.name = "xeon16-target".into();
    model.description = format!(
        "TARGET, NOT MEASURED: every cluster of k cores at 0.9 k x one core (issue 70); otherwise {}",
        model.description
    );
    for kernel in &mut model.cpu.kernels {
        kernel.speedups = [2, 4, 8, 16]
            .map(|cores| Speedup {
                cores,
                speedup: 0.9 * cores as f64,
            })
            .to_vec();
    }
    model
}

/// A preset of CPUs only: `name`, `description`, (packages, cores per package, NUMA nodes per
/// package) and its f64 kernel rates, with the other precisions derived (s and c at 2x d, z as d)
/// and the rates of LU's, QR's, LDL^T's and the inverse's kernels from Cholesky's.
fn cpu_preset(
    name: &str,
    description: &str,
    (packages, cores_per_package, numa_per_package): (usize, usize, usize),
    kernels: Vec<CpuKernelRate>,
) -> PlatformModel {
    with_lu_rates(with_derived_precisions(
        PlatformModel {
            name: name.into(),
            description: description.into(),
            cpu: CpuModel {
                packages,
                cores_per_package,
                numa_per_package,
                task_overhead_us: 0.0,
                outside_graph: Vec::new(),
                kernels,
            },
            gpu: None,
        },
        2.0,
        1.0,
    ))
}

#[cfg(test)]
mod tests {
    use hetla_clusters::ClusterSpec;

    use super::*;
    use hetla_runtime::{KernelKey, ResourceClass};

    /// A preset as measured alone (its loaded-machine reductions removed).
    fn alone(name: &str) -> PlatformModel {
        let mut m = PlatformModel::preset(name).unwrap();
        assert_eq!(m.cpu_rates(), "loaded");
        for k in &mut m.cpu.kernels {
            k.loaded.clear();
        }
        assert_eq!(m.cpu_rates(), "alone");
        m
    }

    /// Tensor math multiplies the GPU's single-precision GEMM and LU update rates by its speedup,
    /// nothing else; a GPU without tensor rates refuses it, naming what it has.
    #[test]
    fn tensor_math_speeds_up_single_products_on_gpus_with_tensor_rates_only() {
        use hetla::TensorMath;
        let class = ResourceClass::Gpu {
            name: "NVIDIA H200".into(),
        };
        let (off, tf32) = (
            PlatformModel::preset("h200").unwrap(),
            (PlatformModel::preset("h200").unwrap())
                .with_tensor_math(TensorMath::Tf32)
                .unwrap(),
        );
        let ratio = |op, precision| {
            tf32.rate(op, 4096, precision, &class).unwrap()
                / off.rate(op, 4096, precision, &class).unwrap()
        };
        assert!((ratio(Op::GemmNt, Precision::S) - 494.7 / 66.9).abs() < 1e-9);
        assert!((ratio(Op::GemmNt, Precision::C) - 494.7 / 66.9).abs() < 1e-9);
        for (op, precision) in [
            (Op::GemmNt, Precision::D),
            (Op::GemmNt, Precision::Z),
            (Op::Syrk, Precision::S),
            (Op::Potrf, Precision::S),
        ] {
            assert_eq!(ratio(op, precision), 1.0, "{op} {precision}");
        }
        assert!(tf32.description.contains("tf32 products on tensor cores"));
        let err = (PlatformModel::preset("sirocco").unwrap())
            .with_tensor_math(TensorMath::Bf16)
            .unwrap_err()
            .to_string();
        assert!(err.contains("K40m has no bf16 rate"), "{err}");
        // Simulated: the single factor on tensor cores is faster, the f64 one unchanged.
        let makespan = |m: &PlatformModel, precision| {
            let spec = ClusterSpec::None;
            let machine = crate::Modelled::new(m, &spec, 1).precision(precision);
            let work =
                hetla::Plan::new(hetla::Algorithm::Cholesky { n: 16384 }, 2048, precision).unwrap();
            let options = hetla_runtime::SimOptions::default();
            crate::simulate(&work, &machine, &options)
                .unwrap()
                .0
                .makespan_ms
        };
        assert!(makespan(&tf32, Precision::S) < 0.9 * makespan(&off, Precision::S));
        assert_eq!(makespan(&tf32, Precision::D), makespan(&off, Precision::D));
    }

    #[test]
    fn loaded_rates_lose_15_percent_on_one_core_and_4_on_wide_clusters() {
        let (loaded, alone) = (PlatformModel::preset("knl").unwrap(), alone("knl"));
        let ratio = |cores| {
            let class = ResourceClass::CpuCluster { cores };
            loaded.rate(Op::GemmNt, 2880, Precision::D, &class).unwrap()
                / alone.rate(Op::GemmNt, 2880, Precision::D, &class).unwrap()
        };
        assert!((ratio(1) - 0.85).abs() < 1e-12);
        assert!((ratio(16) - 0.96).abs() < 1e-12);
        assert!(
            (ratio(64) - 0.96).abs() < 1e-12,
            "beyond the widest: its value"
        );
        // Linear in between: 8 cores lose 0.15 - 0.11 x 7/15.
        assert!((ratio(8) - (0.85 + 0.11 * 7.0 / 15.0)).abs() < 1e-12);
        // A reduction outside [0, 1) is refused.
        let bad = loaded
            .to_toml()
            .replacen("reduction = 0.15", "reduction = 1.5", 1);
        let err = PlatformModel::from_toml(&bad).unwrap_err().to_string();
        assert!(err.contains("reduction in [0, 1)"), "{err}");
    }

    #[test]
    fn sirocco_reproduces_table_2() {
        let m = alone("sirocco");
        let one = ResourceClass::CpuCluster { cores: 1 };
        let ten = ResourceClass::CpuCluster { cores: 10 };
        let gpu = ResourceClass::Gpu {
            name: "K40m".into(),
        };
        let gemm1 = m.rate(Op::GemmNt, 960, Precision::D, &one).unwrap();
        assert!((gemm1 - 36.46).abs() < 1e-12);
        assert!(
            (m.rate(Op::GemmNt, 960, Precision::D, &gpu).unwrap() / gemm1 - 28.80).abs() < 1e-12
        );
        assert!(
            (m.rate(Op::GemmNt, 960, Precision::D, &ten).unwrap() / gemm1 - 7.77).abs() < 1e-12
        );
        assert!(
            (m.rate(Op::Potrf, 1920, Precision::D, &ten).unwrap() / 31.11 - 7.48).abs() < 1e-12
        );
        // GEMM 960 on one core: 2 * 960^3 flops at 36.46 Gflop/s.
        let d = m
            .duration(&KernelKey::square(Op::GemmNt, 960), 960, &one)
            .unwrap();
        assert!((d - 2.0 * 960f64.powi(3) / 36.46e9).abs() < 1e-15);
        assert_eq!(m.rate(Op::GemmNt, 1000, Precision::D, &one), None);
        assert_eq!(m.tiles(), [960, 1920]);
    }

    #[test]
    fn knl_reproduces_table_1_and_interpolates_between_sizes() {
        let m = alone("knl");
        let cores = |c| ResourceClass::CpuCluster { cores: c };
        // DGEMM at 2880: 30.856 Gflop/s on one core, efficiency 0.90 on 16 cores.
        let one = m.rate(Op::GemmNt, 2880, Precision::D, &cores(1)).unwrap();
        assert!((one - 30.856).abs() < 1e-12);
        let sixteen = m.rate(Op::GemmNt, 2880, Precision::D, &cores(16)).unwrap();
        assert!((sixteen / (16.0 * one) - 0.90).abs() < 1e-12);
        // 12 cores lie between the 8-core (0.92) and 16-core (0.90) points.
        let twelve = m.rate(Op::GemmNt, 2880, Precision::D, &cores(12)).unwrap() / one;
        assert!((twelve - (8.0 * 0.92 + 16.0 * 0.90) / 2.0).abs() < 1e-9);
        // 4 x 16 clusters on the 4 NUMA nodes; no GPU.
        let classes = m
            .classes(&ClusterSpec::Level(hetla_clusters::Level::Numa), 0)
            .unwrap();
        assert_eq!(classes, [(cores(16), 4)]);
        assert!(
            m.classes(&ClusterSpec::Grid { count: 4, size: 16 }, 1)
                .is_err()
        );
        assert_eq!(m.tiles(), [480, 960, 1440, 1920, 2880]);
    }

    #[test]
    fn h100_carries_its_leases_measured_rates_and_its_resident_32768_row_within_ten_percent() {
        let m = PlatformModel::preset("h100").unwrap();
        let gpu = m.gpu.as_ref().unwrap();
        assert_eq!(gpu.name, "NVIDIA H100 80GB HBM3");
        // No packing rate was measured: none is made up.
        assert!(gpu.staging.is_empty());
        assert_eq!(gpu.link.d2h.gb_per_s, 54.0);
        let class = ResourceClass::Gpu {
            name: gpu.name.clone(),
        };
        assert_eq!(m.rate(Op::Potrf, 4096, Precision::D, &class), Some(11480.0));
        // The cores are xeon16's.
        let core = ResourceClass::CpuCluster { cores: 1 };
        let xeon = PlatformModel::preset("xeon16").unwrap();
        assert_eq!(
            m.rate(Op::GemmNt, 2048, Precision::D, &core),
            xeon.rate(Op::GemmNt, 2048, Precision::D, &core)
        );
        // Lease 4's resident Cholesky 32768 in tiles of 4096: 279.7 ms measured.
        let plan =
            hetla::Plan::new(hetla::Algorithm::Cholesky { n: 32768 }, 4096, Precision::D).unwrap();
        let mut options = hetla_runtime::SimOptions::default();
        options.run.placement = plan.placed_on(hetla_runtime::MemoryNode(1));
        options.run.write_back = hetla_runtime::WriteBack::Resident;
        let machine = crate::Modelled::new(&m, &ClusterSpec::None, 1);
        let ms = crate::simulate(&plan, &machine, &options)
            .unwrap()
            .0
            .makespan_ms;
        assert!((ms / 279.7 - 1.0).abs() < 0.10, "{ms} ms");
    }

    #[test]
    fn h200_packs_at_its_rows_rates_and_simulates_staged_copies_slower_than_direct_ones() {
        let m = PlatformModel::preset("h200").unwrap();
        let gpu = m.gpu.as_ref().unwrap();
        // The reference rows' rates; linear between the given counts; memory-bound beyond.
        let one = gpu.staging_gb_per_s(1).unwrap();
        assert_eq!(one, 5.60);
        let eight = gpu.staging_gb_per_s(8).unwrap();
        let sixteen = gpu.staging_gb_per_s(16).unwrap();
        let twelve = gpu.staging_gb_per_s(12).unwrap();
        assert!((twelve - (eight + sixteen) / 2.0).abs() < 1e-9);
        assert_eq!(gpu.staging_gb_per_s(64), Some(sixteen));
        assert!(one < eight && eight < sixteen);
        // The GPU's GEMM at tile 4096 as the rows timed it.
        let class = ResourceClass::Gpu {
            name: "NVIDIA H200".into(),
        };
        assert_eq!(
            m.rate(Op::GemmNt, 4096, Precision::D, &class),
            Some(56176.0)
        );
        // A staged platform books packing; fewer packing cores, a longer run; direct is fastest.
        let plan = |path, cores| {
            let spec = ClusterSpec::Grid { count: 1, size: 15 };
            let machine = crate::Modelled::new(&m, &spec, 1)
                .host_memory(path)
                .copy_cores(cores);
            let staged = machine.sim_platform().unwrap().staging.is_some();
            let work = hetla::Plan::new(hetla::Algorithm::Cholesky { n: 8192 }, 2048, Precision::D)
                .unwrap();
            let ms = crate::simulate(&work, &machine, &hetla_runtime::SimOptions::default())
                .unwrap()
                .0
                .makespan_ms;
            (staged, ms)
        };
        let (staged1, one_core) = plan(hetla_runtime::HostMemory::Staged, Some(1));
        let (staged8, eight_cores) = plan(hetla_runtime::HostMemory::Staged, None);
        let (staged_direct, direct) = plan(hetla_runtime::HostMemory::PageLocked, Some(1));
        assert!(staged1 && staged8 && !staged_direct);
        assert!(
            one_core > eight_cores && eight_cores > direct,
            "{one_core} {eight_cores} {direct}"
        );
        // 671 MB both ways through one core bound the one-core run.
        assert!(one_core >= 1e3 * 2.0 * 10.0 * 2048.0 * 2048.0 * 8.0 / (one * 1e9));
        // Staging rates out of order, or not positive, are refused.
        let bad = m.to_toml().replacen("cores = 8", "cores = 1", 1);
        let err = PlatformModel::from_toml(&bad).unwrap_err().to_string();
        assert!(err.contains("increasing order"), "{err}");
    }
}
