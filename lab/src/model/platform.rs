//! Platform models: their types, TOML form, checks, and the modelled machine a simulation runs on
//! (see the [module](super) documentation).

use std::path::Path;

use hetla_clusters::{ClusterSpec, Topology};
use hetla_kernels::{Op, Precision};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};
use hetla_runtime::{
    HostMemory, KernelKey, MemoryNode, ResourceClass, ResourceKind, SimPlatform, Staging,
    WorkerInfo, count_classes, reserve_host_cores,
};
pub use hetla_runtime::{LinkModel, LinkRate};

/// The most cores a platform model may have (the largest nodes have a few hundred).
pub const MAX_MODEL_CORES: usize = 4096;

/// Names of the built-in platform models.
pub const PRESETS: [&str; 7] = [
    "sirocco",
    "knl",
    "a100x8",
    "h200",
    "h100",
    "xeon16",
    "xeon16-target",
];

/// A modelled machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformModel {
    /// Short name ("sirocco").
    pub name: String,
    /// What the machine is and where the numbers come from.
    #[serde(default)]
    pub description: String,
    /// The CPU side.
    pub cpu: CpuModel,
    /// The GPUs, if any.
    #[serde(default)]
    pub gpu: Option<GpuModel>,
}

/// CPU packages of identical cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuModel {
    /// Number of packages (sockets).
    pub packages: usize,
    /// Cores per package.
    pub cores_per_package: usize,
    /// NUMA nodes per package, each with its own share of the cores (KNL in SNC-4 mode has 4);
    /// clusters by level `numa` follow them.
    #[serde(default = "one")]
    pub numa_per_package: usize,
    /// The runtime's time between two tasks of one CPU worker (popping, data, bookkeeping), in
    /// microseconds; simulations add it before each CPU task. `hetla calibrate --output` measures
    /// it; 0 when unknown.
    #[serde(default)]
    pub task_overhead_us: f64,
    /// What a run of a factorisation costs outside its task graph (copies into and out of the tile
    /// store, the input's checks), per entry of its matrix: measured by `hetla tune` on this
    /// machine, none in the presets (their papers time the graphs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_graph: Vec<OutsideGraph>,
    /// Kernel rates.
    pub kernels: Vec<CpuKernelRate>,
}

/// The time a run of one factorisation spends outside its task graph, per entry of its matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutsideGraph {
    /// The factorisation.
    pub factorization: hetla::Family,
    /// Precision of its runs.
    #[serde(default)]
    pub precision: Precision,
    /// Nanoseconds per entry of the matrix (m n).
    pub ns_per_entry: f64,
}

/// The rate of one CPU kernel at one tile size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuKernelRate {
    /// Operation name ("potrf", "trsm", "syrk", "gemm").
    pub op: String,
    /// Tile size b.
    pub tile: usize,
    /// The precision of the kernel (s, d, c, z; d when absent).
    #[serde(default, skip_serializing_if = "is_double")]
    pub precision: Precision,
    /// Gflop/s of one core.
    pub core_gflops: f64,
    /// Measured speedups of clusters of some sizes over one core.
    #[serde(default)]
    pub speedups: Vec<Speedup>,
    /// How much slower the kernel runs when the machine is loaded (every cluster busy: memory
    /// contention) than alone, by cluster width; simulations and bounds use the loaded rate. Empty:
    /// the rates above are used as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded: Vec<LoadedReduction>,
}

/// The rate lost by a kernel on a cluster of `cores` cores when the machine is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadedReduction {
    /// Cluster width.
    pub cores: usize,
    /// Fraction of the rate lost, in [0, 1): 0.15 runs at 85% of the rate alone.
    pub reduction: f64,
}

/// The speedup of a cluster of `cores` cores over one core.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Speedup {
    /// Cluster size.
    pub cores: usize,
    /// Its rate over the rate of one core.
    pub speedup: f64,
}

/// Identical GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuModel {
    /// Device name ("K40m"), the GPU class's name in bounds and traces (`model` in platform files).
    #[serde(rename = "model")]
    pub name: String,
    /// How many the machine has.
    pub count: usize,
    /// Memory of one GPU, in GB (10^9 bytes): the capacity of its memory node.
    pub memory_gb: f64,
    /// The link between host memory and each GPU (and between GPUs).
    pub link: LinkModel,
    /// When the machine's copies go through page-locked staging buffers (see
    /// [`hetla_runtime::Staging`]): the GB/s at which a GPU's copy cores pack host tiles into them
    /// (or unpack them), for some core counts, in increasing order (linear in between and from 0 at
    /// 0 cores, the last rate beyond the last count: copying is memory-bound). Empty: the GPUs' DMA
    /// engines copy straight from page-locked host tiles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub staging: Vec<StagingRate>,
    /// Microseconds from the host's launch of a kernel to its start when the GPU is idle, beyond
    /// the kernel itself: what a GPU worker spends on each task
    /// (`hetla calibrate --gpus all --output` times it, [`crate::measure_launch`]). 0 (the
    /// default): not measured.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub launch_us: f64,
    /// Copies between pageable host memory and one GPU, both ways, as
    /// `hetla calibrate --gpus all --output` times them ([`crate::measure_pageable`]; on hetla's
    /// devices the staged path whole: packing into page-locked staging, then the DMA): what the
    /// model's `link` and `staging` compose for a staged copy, measured as one. `None`: not
    /// measured. The simulator does not use it: it checks the staged copies the model composes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageable: Option<PageableCopies>,
    /// GB/s at which host memory is page-locked for a GPU's copies (`cuMemHostRegister`; lease 3:
    /// 8.6 GB in 0.427 s), as `hetla calibrate --gpus all --output` times it
    /// ([`crate::measure_locking`]). With it a page-locked run is simulated as a real one runs: its
    /// matrix locked by tile columns beside the workers, the first before the clock, and a tile
    /// whose column is not locked yet when it is copied staged ([`hetla_runtime::Locking`]). 0 (the
    /// default): not measured, and every page-locked tile is copied straight from the start.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lock_gb_per_s: f64,
    /// Copies within one GPU's memory, between a caller's matrix there and a run's tiles (a run on
    /// `hetla::DeviceMatrix` operands imports each tile it reads and exports each it writes), as
    /// `hetla calibrate --gpus all --output` times them ([`crate::measure_device_copies`]). `None`:
    /// not measured. The simulator does not use it (resident runs are simulated with their tiles
    /// placed on the GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_copies: Option<LinkRate>,
    /// Kernel rates.
    pub kernels: Vec<GpuKernelRate>,
    /// The products of single-precision tiles on tensor cores ([`hetla::TensorMath`]): each math's
    /// GEMM rate over the f32 one. Empty: no tensor cores modelled (a run with tensor math is
    /// refused, [`PlatformModel::with_tensor_math`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensor: Vec<TensorRate>,
}

/// How much faster a GPU's tensor cores compute the products of single-precision tiles under one
/// math ([`GpuModel::tensor`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorRate {
    /// The math.
    pub math: hetla::TensorMath,
    /// Its GEMM rate over the f32 GEMM rate of the same GPU.
    pub speedup: f64,
}

/// Copies between pageable host memory and a GPU ([`GpuModel::pageable`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageableCopies {
    /// Host to device.
    pub h2d: LinkRate,
    /// Device to host.
    pub d2h: LinkRate,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The rate at which `cores` CPU cores together pack tiles into page-locked staging buffers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagingRate {
    /// How many cores pack.
    pub cores: usize,
    /// GB/s (10^9 bytes per second) they pack at together.
    pub gb_per_s: f64,
}

impl GpuModel {
    /// GB/s at which `cores` cores pack copies for one GPU (see [`GpuModel::staging`]); `None` on a
    /// direct data path.
    pub fn staging_gb_per_s(&self, cores: usize) -> Option<f64> {
        let last = self.staging.last()?;
        let c = cores as f64;
        let below = self
            .staging
            .iter()
            .rfind(|p| p.cores <= cores)
            .map_or((0.0, 0.0), |p| (p.cores as f64, p.gb_per_s));
        Some(match self.staging.iter().find(|p| p.cores > cores) {
            Some(above) => {
                let (c0, r0) = below;
                let (c1, r1) = (above.cores as f64, above.gb_per_s);
                r0 + (r1 - r0) * (c - c0) / (c1 - c0)
            }
            None => last.gb_per_s,
        })
    }
}

/// The rate of one GPU kernel at one tile size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuKernelRate {
    /// Operation name.
    pub op: String,
    /// Tile size b.
    pub tile: usize,
    /// The precision of the kernel (s, d, c, z; d when absent).
    #[serde(default, skip_serializing_if = "is_double")]
    pub precision: Precision,
    /// Gflop/s of one GPU.
    pub gflops: f64,
}

impl CpuKernelRate {
    /// The fraction of the rate lost on a loaded machine by a cluster of `cores` cores: the given
    /// value, linear between two given widths, the nearest one outside them, 0 when none is given.
    pub fn loaded_reduction(&self, cores: usize) -> f64 {
        let below = self
            .loaded
            .iter()
            .filter(|p| p.cores <= cores)
            .max_by_key(|p| p.cores);
        let above = self
            .loaded
            .iter()
            .filter(|p| p.cores >= cores)
            .min_by_key(|p| p.cores);
        match (below, above) {
            (Some(b), Some(a)) if a.cores > b.cores => {
                let f = (cores - b.cores) as f64 / (a.cores - b.cores) as f64;
                b.reduction + (a.reduction - b.reduction) * f
            }
            (Some(p), _) | (None, Some(p)) => p.reduction,
            (None, None) => 0.0,
        }
    }

    /// Amdahl's serial fraction fitted to the speedups (0 when none is given).
    pub fn serial_fraction(&self) -> f64 {
        // 1/S(c) - 1/c = s (1 - 1/c): least squares over the given points.
        let (num, den) =
            self.speedups
                .iter()
                .filter(|p| p.cores > 1)
                .fold((0.0, 0.0), |(num, den), p| {
                    let c = p.cores as f64;
                    let b = 1.0 - 1.0 / c;
                    (num + (1.0 / p.speedup - 1.0 / c) * b, den + b * b)
                });
        if den == 0.0 {
            0.0
        } else {
            (num / den).clamp(0.0, 1.0)
        }
    }

    /// Speedup of a cluster of `cores` cores: the measured value when given; with several measured
    /// sizes, linear interpolation between the two around `cores` (one core having speedup 1);
    /// otherwise (one measured size, or beyond the largest) Amdahl's law fitted to the measured
    /// sizes.
    pub fn speedup(&self, cores: usize) -> f64 {
        if let Some(p) = self.speedups.iter().find(|p| p.cores == cores) {
            return p.speedup;
        }
        let c = cores as f64;
        if self.speedups.len() >= 2 {
            let below = self
                .speedups
                .iter()
                .filter(|p| p.cores < cores)
                .max_by_key(|p| p.cores)
                .map_or((1.0, 1.0), |p| (p.cores as f64, p.speedup));
            if let Some(above) = self
                .speedups
                .iter()
                .filter(|p| p.cores > cores)
                .min_by_key(|p| p.cores)
            {
                let (c0, s0) = below;
                let (c1, s1) = (above.cores as f64, above.speedup);
                return s0 + (s1 - s0) * (c - c0) / (c1 - c0);
            }
        }
        c / (1.0 + self.serial_fraction() * (c - 1.0))
    }
}

fn is_double(p: &Precision) -> bool {
    *p == Precision::D
}

/// A modelled machine as a simulated run uses it: a platform model, the CPU clusters made from its
/// cores, how many of its GPUs, and optionally a memory budget per GPU (default: the model's memory
/// size).
#[derive(Debug, Clone, Copy)]
pub struct Modelled<'a> {
    /// The platform model.
    pub model: &'a PlatformModel,
    /// Its CPU clusters.
    pub clusters: &'a ClusterSpec,
    /// GPUs used (the model's first ones).
    pub gpus: usize,
    /// Bytes of tiles each GPU may hold.
    pub gpu_memory: Option<usize>,
    /// The precision of the modelled kernels (default d).
    pub precision: Precision,
    /// How host tiles meet the GPUs' links: staged as the model says (its packing rates,
    /// [`GpuModel::staging`]; a model without them copies at its links' rates), or page-locked
    /// (copied straight by DMA, no packing). Default staged, as real runs.
    pub host_memory: HostMemory,
    /// How many cores each GPU packs its copies on, when staged (`None`: the real platforms' rule,
    /// [`hetla_runtime::copy_cores`]; `HETLA_GPU_COPY_CORES` on a real run).
    pub copy_cores: Option<usize>,
    /// The compute streams of each GPU: the kernels it runs at once, sharing its rate
    /// ([`hetla_runtime::GpuSharing`]; `HETLA_GPU_STREAMS` on a real run). Default 1.
    pub compute_streams: usize,
    /// Whether page-locked host memory is locked beside the run, by tile columns, as real runs lock
    /// a matrix in place (the default), or before the run's clock (a tile-major store kept locked,
    /// and every run before 2026-12-02): see [`Modelled::sim_platform_for`].
    pub locks_beside: bool,
}

impl<'a> Modelled<'a> {
    /// `model` with CPU clusters `clusters` and `gpus` GPUs.
    pub fn new(model: &'a PlatformModel, clusters: &'a ClusterSpec, gpus: usize) -> Self {
        Self {
            model,
            clusters,
            gpus,
            gpu_memory: None,
            precision: Precision::D,
            host_memory: HostMemory::Staged,
            copy_cores: None,
            compute_streams: 1,
            locks_beside: true,
        }
    }

    /// Page-locked host memory locked before the run's clock (see [`Modelled::locks_beside`]).
    pub fn locked_before_the_run(mut self) -> Self {
        self.locks_beside = false;
        self
    }

    /// How host tiles meet the GPUs' links ([`Modelled::host_memory`]).
    pub fn host_memory(mut self, host_memory: HostMemory) -> Self {
        self.host_memory = host_memory;
        self
    }

    /// How many cores each GPU packs on (staged data path; `None`: the real platforms' rule).
    pub fn copy_cores(mut self, cores: Option<usize>) -> Self {
        self.copy_cores = cores;
        self
    }

    /// The precision the modelled run computes in (its kernels' rates and tile bytes).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// A memory budget for tiles on each GPU (`None`: the model's memory size).
    pub fn gpu_memory(mut self, bytes: Option<usize>) -> Self {
        self.gpu_memory = bytes;
        self
    }

    /// [`Modelled::sim_platform`] for a run of `plan`: on a page-locked run of a model that knows
    /// its locking rate ([`GpuModel::lock_gb_per_s`]) the plan's matrices are locked beside the run
    /// as a real run locks them in place (each matrix column-major, by tile columns, one after
    /// another, the first before the clock), and a tile whose column is not locked yet when it is
    /// copied is staged ([`hetla_runtime::Locking`]); otherwise as `sim_platform`.
    pub fn sim_platform_for(&self, plan: &hetla::Plan) -> Result<SimPlatform> {
        let rate = self.model.gpu.as_ref().map_or(0.0, |g| g.lock_gb_per_s);
        let beside = self.host_memory == HostMemory::PageLocked && self.locks_beside;
        if !beside || self.gpus == 0 || rate <= 0.0 {
            return self.sim_platform();
        }
        let mut platform = Self {
            host_memory: HostMemory::Staged,
            ..*self
        }
        .sim_platform()?;
        let scalar = self.precision.bytes();
        let bytes: Vec<Vec<usize>> = (0..=u8::MAX)
            .map_while(|m| plan.tiling(hetla_factorizations::MatrixId(m)))
            .map(|t| {
                (0..t.col_tiles())
                    .map(|j| t.rows() * t.tile_cols(j) * scalar)
                    .collect()
            })
            .collect();
        platform.locking = Some(hetla_runtime::Locking::in_order(&bytes, rate));
        Ok(platform)
    }

    /// The workers, memory nodes and links of the simulation (see [`PlatformModel::sim_platform`]),
    /// with the GPU budget applied; page-locked host memory is locked from the start (see
    /// [`Modelled::sim_platform_for`]).
    pub fn sim_platform(&self) -> Result<SimPlatform> {
        let mut platform =
            self.model
                .sim_platform_with(self.clusters, self.gpus, self.copy_cores)?;
        if self.host_memory == HostMemory::PageLocked {
            platform.staging = None;
        }
        platform.compute_streams = self.compute_streams;
        if let Some(bytes) = self.gpu_memory {
            for c in platform.capacities.iter_mut().skip(1) {
                *c = Some(bytes);
            }
        }
        Ok(platform)
    }
}

impl PlatformModel {
    /// The model of runs whose GPUs compute the products of single-precision tiles with `math`
    /// ([`hetla::TensorMath::applies`]: GEMM and LU's update): those kernels' s and c rates times
    /// the math's [`TensorRate::speedup`] (LU's update whole, its TRSM included: an upper bound);
    /// itself with [`hetla::TensorMath::Off`]. A model whose GPU has no rate for `math` is an error
    /// that says so.
    pub fn with_tensor_math(mut self, math: hetla::TensorMath) -> Result<Self> {
        if math == hetla::TensorMath::Off {
            return Ok(self);
        }
        let name = self.name.clone();
        let Some(gpu) = &mut self.gpu else {
            return Err(Error::InvalidOption {
                option: "tensor-math",
                reason: format!(
                    "{math} runs on a GPU's tensor cores and the model {name} has no GPU"
                ),
            });
        };
        let Some(rate) = gpu.tensor.iter().find(|r| r.math == math).copied() else {
            return Err(Error::InvalidOption {
                option: "tensor-math",
                reason: format!(
                    "the model {name}'s {} has no {math} rate (its `tensor` list: {}); give a \
                     model with one (h100, h200) or add it",
                    gpu.name,
                    gpu.tensor
                        .iter()
                        .map(|r| r.math.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let products = [Op::GemmNt.name(), Op::LuUpdate.name()];
        for k in &mut gpu.kernels {
            if matches!(k.precision, Precision::S | Precision::C)
                && products.contains(&k.op.as_str())
            {
                k.gflops *= rate.speedup;
            }
        }
        self.description = format!(
            "{}; with {math} products on tensor cores (GEMM and LU's update of s and c tiles at \
             {:.1}x their f32 rate)",
            self.description, rate.speedup
        );
        Ok(self)
    }

    /// Reads a TOML model file.
    pub fn load(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| hetla_runtime::Error::io("read the platform model", path, e))?;
        Self::from_toml(&text).map_err(|e| match e {
            Error::PlatformModel { reason, .. } => model_error(&name, reason),
            other => other,
        })
    }

    /// Parses and checks a model written in TOML, for example:
    ///
    /// ```toml
    /// name = "small"
    /// [cpu]
    /// packages = 1
    /// cores_per_package = 8
    /// [[cpu.kernels]]
    /// op = "gemm"
    /// tile = 512
    /// core_gflops = 30.0
    /// speedups = [{ cores = 8, speedup = 6.5 }]
    /// [gpu]
    /// model = "A100"
    /// count = 2
    /// memory_gb = 40.0
    /// link.h2d = { latency_us = 10.0, gb_per_s = 12.0 }
    /// link.d2h = { latency_us = 10.0, gb_per_s = 12.0 }
    /// [[gpu.kernels]]
    /// op = "gemm"
    /// tile = 512
    /// gflops = 9000.0
    /// ```
    pub fn from_toml(text: &str) -> Result<Self> {
        let model: Self = toml::from_str(text).map_err(|e| model_error("TOML", e))?;
        model.validate()?;
        Ok(model)
    }

    /// The model as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("platform models serialise")
    }

    pub(super) fn validate(&self) -> Result<()> {
        self.validate_cpu()?;
        match &self.gpu {
            Some(gpu) => self.validate_gpu(gpu),
            None => Ok(()),
        }
    }

    /// The CPU part: counts, overheads, and each kernel given once with its rates in range.
    fn validate_cpu(&self) -> Result<()> {
        let bad = |reason: String| Err(model_error(&self.name, reason));
        let cpu = &self.cpu;
        if cpu.packages == 0 || cpu.cores_per_package == 0 || cpu.numa_per_package == 0 {
            return bad(
                "cpu.packages, cpu.cores_per_package and cpu.numa_per_package must be at least 1"
                    .into(),
            );
        }
        let cores = cpu.packages.checked_mul(cpu.cores_per_package);
        if cores.is_none_or(|c| c > MAX_MODEL_CORES) {
            return bad(format!(
                "cpu.packages x cpu.cores_per_package is {} x {}; a model may have at most {MAX_MODEL_CORES} cores",
                cpu.packages, cpu.cores_per_package
            ));
        }
        if !cpu.cores_per_package.is_multiple_of(cpu.numa_per_package) {
            return bad(format!(
                "cpu.numa_per_package ({}) must divide cpu.cores_per_package ({})",
                cpu.numa_per_package, cpu.cores_per_package
            ));
        }
        if !(cpu.task_overhead_us.is_finite() && cpu.task_overhead_us >= 0.0) {
            return bad(format!(
                "cpu.task_overhead_us is {}; it must be >= 0",
                cpu.task_overhead_us
            ));
        }
        if let Some(o) = cpu
            .outside_graph
            .iter()
            .find(|o| !(o.ns_per_entry.is_finite() && o.ns_per_entry >= 0.0))
        {
            return bad(format!(
                "cpu.outside_graph of {} is {} ns per entry; it must be >= 0",
                o.factorization, o.ns_per_entry
            ));
        }
        let total = self.cores();
        for (i, k) in self.cpu.kernels.iter().enumerate() {
            check_rate(&self.name, &k.op, k.tile, k.core_gflops)?;
            if self.cpu.kernels[..i]
                .iter()
                .any(|o| o.op == k.op && o.tile == k.tile && o.precision == k.precision)
            {
                return bad(format!(
                    "cpu kernel {} at tile {} in precision {} is given twice; give each (op, tile, precision) once",
                    k.op, k.tile, k.precision
                ));
            }
            // Per cluster width: speedups in (0, cores], loaded reductions in [0, 1).
            let speedups: Vec<(usize, f64)> =
                k.speedups.iter().map(|p| (p.cores, p.speedup)).collect();
            let loaded: Vec<(usize, f64)> =
                k.loaded.iter().map(|p| (p.cores, p.reduction)).collect();
            let lists: [WidthRule<'_>; 2] = [
                ("speedup", "(0, cores]", &speedups, |c, v| {
                    v > 0.0 && v <= c as f64
                }),
                ("loaded reduction", "[0, 1)", &loaded, |_, v| {
                    (0.0..1.0).contains(&v)
                }),
            ];
            for (what, range, list, fits) in lists {
                for (j, &(cores, value)) in list.iter().enumerate() {
                    if cores == 0 || cores > total || !(value.is_finite() && fits(cores, value)) {
                        return bad(format!(
                            "cpu kernel {} at tile {}: {what} {value} at {cores} cores; cores must be from 1 to the model's {total} and the {what} in {range}",
                            k.op, k.tile
                        ));
                    }
                    if list[..j].iter().any(|o| o.0 == cores) {
                        return bad(format!(
                            "cpu kernel {} at tile {}: two {what}s at {cores} cores; give each width once",
                            k.op, k.tile
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The GPU part: count, memory, links, staging and each kernel given once.
    fn validate_gpu(&self, gpu: &GpuModel) -> Result<()> {
        let bad = |reason: String| Err(model_error(&self.name, reason));
        if gpu.count > hetla_runtime::MAX_GPUS {
            return bad(format!(
                "gpu.count is {}; a model may have at most {} GPUs",
                gpu.count,
                hetla_runtime::MAX_GPUS
            ));
        }
        if !(gpu.memory_gb.is_finite() && gpu.memory_gb > 0.0) {
            return bad(format!(
                "gpu.memory_gb is {}; it must be > 0",
                gpu.memory_gb
            ));
        }
        if gpu.link.host_shared_by == 0 || gpu.link.host_shared_by > gpu.count.max(1) {
            return bad(format!(
                "gpu.link.host_shared_by is {}; it must be from 1 (each GPU has its own host link) to gpu.count ({})",
                gpu.link.host_shared_by, gpu.count
            ));
        }
        // Every copy rate the file gives: the link's, the pageable copies', the copies within.
        let links = [
            ("link.h2d", Some(gpu.link.h2d)),
            ("link.d2h", Some(gpu.link.d2h)),
            ("link.p2p", gpu.link.p2p),
            ("pageable.h2d", gpu.pageable.map(|p| p.h2d)),
            ("pageable.d2h", gpu.pageable.map(|p| p.d2h)),
            ("device_copies", gpu.device_copies),
        ];
        for (name, rate) in links {
            if let Some(r) = rate
                && !(r.latency_us.is_finite()
                    && r.latency_us >= 0.0
                    && r.gb_per_s.is_finite()
                    && r.gb_per_s > 0.0)
            {
                return bad(format!(
                    "gpu.{name}: latency {} us, bandwidth {} GB/s; latency must be >= 0 and bandwidth > 0",
                    r.latency_us, r.gb_per_s
                ));
            }
        }
        if !(gpu.lock_gb_per_s.is_finite() && gpu.lock_gb_per_s >= 0.0) {
            return bad(format!(
                "gpu.lock_gb_per_s is {}; give the rate of page-locking in GB/s (> 0), or 0 when not measured",
                gpu.lock_gb_per_s
            ));
        }
        for (i, p) in gpu.staging.iter().enumerate() {
            let increasing = i == 0 || gpu.staging[i - 1].cores < p.cores;
            if p.cores == 0 || !increasing || !(p.gb_per_s.is_finite() && p.gb_per_s > 0.0) {
                return bad(format!(
                    "gpu.staging: {} cores at {} GB/s; give core counts from 1 up in increasing order, each with its rate (> 0), or no staging for copies straight from page-locked memory",
                    p.cores, p.gb_per_s
                ));
            }
        }
        for (i, k) in gpu.kernels.iter().enumerate() {
            check_rate(&self.name, &k.op, k.tile, k.gflops)?;
            if gpu.kernels[..i]
                .iter()
                .any(|o| o.op == k.op && o.tile == k.tile && o.precision == k.precision)
            {
                return bad(format!(
                    "gpu kernel {} at tile {} in precision {} is given twice; give each (op, tile, precision) once",
                    k.op, k.tile, k.precision
                ));
            }
        }
        Ok(())
    }

    /// Which CPU rates simulations and bounds use: "loaded" when the model gives its kernels'
    /// slowdowns on a loaded machine, else "alone" (the rates as measured alone).
    pub fn cpu_rates(&self) -> &'static str {
        if self.cpu.kernels.iter().any(|k| !k.loaded.is_empty()) {
            "loaded"
        } else {
            "alone"
        }
    }

    /// An error naming the precisions the model has, unless it has rates in `precision`.
    pub fn check_precision(&self, precision: Precision) -> Result<()> {
        if self.precisions().contains(&precision) {
            return Ok(());
        }
        Err(Error::InvalidOption {
            option: "precision",
            reason: format!(
                "platform {} has no kernel rates in precision {precision}; it has {} (calibrate with `hetla calibrate --precision {precision} --output FILE`)",
                self.name,
                self.precisions()
                    .iter()
                    .map(|p| p.letter())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }

    /// The precisions the model has kernel rates for, in LAPACK's order.
    pub fn precisions(&self) -> Vec<Precision> {
        let cpu = self.cpu.kernels.iter().map(|k| k.precision);
        let gpu = self
            .gpu
            .iter()
            .flat_map(|g| g.kernels.iter().map(|k| k.precision));
        let mut all: Vec<Precision> = cpu.chain(gpu).collect();
        all.sort();
        all.dedup();
        all
    }

    /// Total CPU cores.
    pub fn cores(&self) -> usize {
        self.cpu.packages * self.cpu.cores_per_package
    }

    /// GPUs the machine has.
    pub fn gpu_count(&self) -> usize {
        self.gpu.as_ref().map_or(0, |g| g.count)
    }

    /// The modelled topology: `numa_per_package` NUMA nodes (each its own L3 group) per package,
    /// one thread per core.
    pub fn topology(&self) -> Topology {
        let cpu = &self.cpu;
        Topology::synthetic(
            cpu.packages,
            cpu.numa_per_package,
            cpu.cores_per_package / cpu.numa_per_package,
            1,
        )
    }

    /// Whether `spec` is `auto` on a model without CPU kernel rates (a100x8): its CPUs can run
    /// nothing, so `auto` makes no cluster and the GPUs run every task.
    pub fn auto_is_gpus_only(&self, spec: &ClusterSpec) -> bool {
        *spec == ClusterSpec::Auto && self.cpu.kernels.is_empty()
    }

    /// The workers, memory nodes and links a simulation sees on this model with CPU clusters `spec`
    /// and `gpus` GPUs: as on a real machine, each GPU's host thread takes one core (the last ones)
    /// before the clusters are formed.
    pub fn sim_platform(&self, spec: &ClusterSpec, gpus: usize) -> Result<SimPlatform> {
        self.sim_platform_with(spec, gpus, None)
    }

    /// [`PlatformModel::sim_platform`], each GPU packing on `copy_cores` cores when given (on a
    /// staged data path), else on as many as the real platforms' rule gives it.
    fn sim_platform_with(
        &self,
        spec: &ClusterSpec,
        gpus: usize,
        copy_cores: Option<usize>,
    ) -> Result<SimPlatform> {
        let (clusters, host_cores) = self.layout(spec, gpus)?;
        let staging = self
            .gpu
            .as_ref()
            .filter(|g| gpus > 0 && !g.staging.is_empty())
            .map(|g| Staging {
                gb_per_s: hetla_runtime::copy_cores(
                    &self.topology(),
                    &clusters,
                    &host_cores,
                    copy_cores,
                )
                .iter()
                .filter_map(|cores| g.staging_gb_per_s(cores.len()))
                .collect(),
            });
        let mut workers: Vec<WorkerInfo> = clusters
            .into_iter()
            .enumerate()
            .map(|(i, cpus)| WorkerInfo::cpu_cluster(i, cpus))
            .collect();
        let mut capacities = vec![None];
        if let (Some(gpu), true) = (&self.gpu, gpus > 0) {
            for (g, &core) in host_cores.iter().enumerate() {
                workers.push(WorkerInfo {
                    name: format!("gpu{g}"),
                    kind: ResourceKind::Gpu,
                    class: ResourceClass::Gpu {
                        name: gpu.name.clone(),
                    },
                    node: MemoryNode(g + 1),
                    cpus: vec![core],
                });
                capacities.push(Some((gpu.memory_gb * 1e9) as usize));
            }
        }
        Ok(SimPlatform {
            workers,
            capacities,
            link: self.gpu.as_ref().filter(|_| gpus > 0).map(|g| g.link),
            cpu_task_overhead: self.cpu.task_overhead_us * 1e-6,
            gpu_launch: self.gpu.as_ref().map_or(0.0, |g| g.launch_us * 1e-6),
            staging,
            compute_streams: 1,
            locking: None,
        })
    }

    /// The CPUs of each cluster `spec` makes when `gpus` GPUs take their host cores by the rule
    /// real platforms follow ([`reserve_host_cores`]); none for `auto` on a model without CPU rates
    /// (see [`PlatformModel::auto_is_gpus_only`]). Checks the GPU count and that the spec fits.
    pub fn cluster_cpus(&self, spec: &ClusterSpec, gpus: usize) -> Result<Vec<Vec<usize>>> {
        Ok(self.layout(spec, gpus)?.0)
    }

    /// The CPUs of each cluster and the CPU of each GPU's host thread (see
    /// [`PlatformModel::cluster_cpus`]).
    fn layout(&self, spec: &ClusterSpec, gpus: usize) -> Result<(Vec<Vec<usize>>, Vec<usize>)> {
        if gpus > self.gpu_count() {
            return Err(Error::InvalidOption {
                option: "gpus",
                reason: format!(
                    "platform {} has {} GPU(s), {gpus} were asked for",
                    self.name,
                    self.gpu_count()
                ),
            });
        }
        let gpus_only = self.auto_is_gpus_only(spec);
        let hosts = reserve_host_cores(
            &self.topology(),
            if gpus_only { &ClusterSpec::None } else { spec },
            gpus,
        );
        let clusters = if gpus_only {
            Vec::new()
        } else {
            spec.resolve(&hosts.left)?
        };
        if clusters.is_empty() && gpus == 0 {
            return Err(Error::InvalidOption {
                option: "clusters",
                reason: format!(
                    "--clusters {spec} with no GPU leaves nothing to run the tasks on {}: give a cluster spec (\"auto\", \"2x10\") or GPUs",
                    self.name
                ),
            });
        }
        Ok((clusters, hosts.per_device))
    }

    /// The resource classes, with their counts, of a run with CPU clusters `spec` and `gpus` GPUs
    /// (each taking one core out before the clusters are formed).
    pub fn classes(&self, spec: &ClusterSpec, gpus: usize) -> Result<Vec<(ResourceClass, usize)>> {
        let clusters = self.cluster_cpus(spec, gpus)?;
        let mut classes = count_classes(
            clusters
                .iter()
                .map(|c| ResourceClass::CpuCluster { cores: c.len() }),
        );
        if let (Some(gpu), true) = (&self.gpu, gpus > 0) {
            classes.push((
                ResourceClass::Gpu {
                    name: gpu.name.clone(),
                },
                gpus,
            ));
        }
        Ok(classes)
    }

    /// The tile sizes the CPU or the GPU has rates for.
    pub fn tiles(&self) -> Vec<usize> {
        let gpu = self
            .gpu
            .iter()
            .flat_map(|g| g.kernels.iter().map(|k| k.tile));
        let mut tiles: Vec<usize> = self.cpu.kernels.iter().map(|k| k.tile).chain(gpu).collect();
        tiles.sort_unstable();
        tiles.dedup();
        tiles
    }

    /// Gflop/s of `op` at tile size `tile` on a resource of `class`, or `None` when the model has
    /// no rate for it (the class cannot run it).
    pub fn rate(
        &self,
        op: Op,
        tile: usize,
        precision: Precision,
        class: &ResourceClass,
    ) -> Option<f64> {
        match class {
            ResourceClass::CpuCluster { cores } => self
                .cpu
                .kernels
                .iter()
                .find(|k| k.op == op.name() && k.tile == tile && k.precision == precision)
                .map(|k| k.core_gflops * k.speedup(*cores) * (1.0 - k.loaded_reduction(*cores))),
            ResourceClass::Gpu { name } => self
                .gpu
                .as_ref()
                .filter(|g| g.name == *name)?
                .kernels
                .iter()
                .find(|k| k.op == op.name() && k.tile == tile && k.precision == precision)
                .map(|k| k.gflops),
        }
    }

    /// Seconds a task with kernel `key`, in a run with tile size `tile`, takes on `class`.
    pub fn duration(&self, key: &KernelKey, tile: usize, class: &ResourceClass) -> Option<f64> {
        self.rate(key.op, tile, key.precision, class)
            .map(|gflops| key.leading_flops() / (gflops * 1e9))
    }

    /// Checks that the CPU, or the GPU when `gpus > 0`, has a rate for each of `ops` at `tile`, and
    /// says which tile sizes do otherwise; and that GPUs asked for have work (a rate for one of
    /// `gpu_ops`, those of `ops` a GPU may run in this graph).
    pub fn check_tile(
        &self,
        (ops, gpu_ops): (&[Op], &[Op]),
        tile: usize,
        precision: Precision,
        gpus: usize,
    ) -> Result<()> {
        self.check_precision(precision)?;
        let cpu = ResourceClass::CpuCluster { cores: 1 };
        let gpu = (self.gpu.as_ref())
            .filter(|_| gpus > 0)
            .map(|g| ResourceClass::Gpu {
                name: g.name.clone(),
            });
        for &op in ops {
            let on_cpu = self.rate(op, tile, precision, &cpu).is_some();
            let on_gpu =
                (gpu.as_ref()).is_some_and(|g| self.rate(op, tile, precision, g).is_some());
            if !on_cpu && !on_gpu {
                return Err(Error::InvalidOption {
                    option: "tile",
                    reason: format!(
                        "platform {} has no rate for {op} at tile {tile}; it has tiles {:?}",
                        self.name,
                        self.tiles()
                    ),
                });
            }
        }
        // GPUs asked for must have work: a graph that keeps every kernel on CPU clusters, or a GPU
        // without rates for the kernels it lets GPUs run, would leave them idle.
        let idle = gpu.is_some_and(|g| {
            (gpu_ops.iter()).all(|&op| self.rate(op, tile, precision, &g).is_none())
        });
        if !idle {
            return Ok(());
        }
        let names: Vec<&str> = gpu_ops.iter().map(|op| op.name()).collect();
        let reason = match names.is_empty() {
            true => "this graph keeps every kernel on CPU clusters".to_owned(),
            false => format!(
                "platform {}'s GPU has no rate for any of the kernels this graph lets GPUs run \
                 ({}) at tile {tile} in {precision}",
                self.name,
                names.join(", ")
            ),
        };
        Err(Error::InvalidOption {
            option: "gpus",
            reason: format!(
                "the {gpus} GPU(s) asked for would run no task: {reason}; give --gpus 0 (this \
                 factorisation runs on CPU clusters only)"
            ),
        })
    }
}

/// A per-width list of a CPU kernel to check: its name, the valid range in words, the (cores,
/// value) pairs, and whether a value fits its width.
type WidthRule<'a> = (&'a str, &'a str, &'a [(usize, f64)], fn(usize, f64) -> bool);

fn one() -> usize {
    1
}

fn check_rate(model: &str, op: &str, tile: usize, gflops: f64) -> Result<()> {
    if Op::from_name(op).is_none() {
        return Err(model_error(
            model,
            format!("unknown operation {op:?} (expected potrf, trsm, syrk, gemm, ...)"),
        ));
    }
    if tile == 0 || !(gflops.is_finite() && gflops > 0.0) {
        return Err(model_error(
            model,
            format!("{op} at tile {tile}: {gflops} Gflop/s; tiles must be >= 1 and rates > 0"),
        ));
    }
    Ok(())
}

pub(super) fn model_error(name: &str, reason: impl std::fmt::Display) -> Error {
    Error::PlatformModel {
        name: name.to_owned(),
        reason: reason.to_string(),
    }
}
