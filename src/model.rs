//! Modelled platforms: what the resources of a machine can do, described by kernel rates
//! instead of measured on it, so that bounds (and, later, simulations) can be computed for
//! machines that are not at hand.
//!
//! A [`PlatformModel`] has CPU packages of cores and, optionally, identical GPUs. CPU rates
//! are given per (operation, tile size) as the Gflop/s of one core and the speedups of some
//! cluster sizes over one core; the speedup of any other size comes from Amdahl's law,
//! S(c) = c / (1 + s (c - 1)), with the serial fraction s fitted by least squares to the
//! given points (through them exactly when one size is given, as for `sirocco`'s 10-core
//! cluster). GPU rates are Gflop/s per (operation, tile size). A task's duration is its flop
//! count (leading terms: POTRF m^3/3, TRSM m n^2, SYRK k n^2, GEMM 2 m n k, so b^3/3, b^3,
//! b^3 and 2 b^3 on square tiles, as paper 002 counts them) over the rate at the run's
//! tile size; ragged edge tiles use the same rate.
//!
//! Like StarPU, a run with g GPUs dedicates one core to each GPU's host thread: the last g
//! cores are taken out before the clusters are formed (with `sirocco`'s 4 GPUs, 20 of its
//! 24 cores remain for clusters).
//!
//! Models are written in TOML (see [`PlatformModel::from_toml`]); presets are built in
//! ([`PlatformModel::preset`]).

use std::path::Path;

use hetla_clusters::{ClusterSpec, Topology};
use hetla_kernels::Op;
use serde::{Deserialize, Serialize};

use crate::runtime::{KernelKey, ResourceClass, count_classes};
use crate::{Error, Result};

/// Names of the built-in platform models.
pub const PRESETS: [&str; 1] = ["sirocco"];

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
    /// Kernel rates.
    pub kernels: Vec<CpuKernelRate>,
}

/// The rate of one CPU kernel at one tile size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuKernelRate {
    /// Operation name ("potrf", "trsm", "syrk", "gemm").
    pub op: String,
    /// Tile size b.
    pub tile: usize,
    /// Gflop/s of one core.
    pub core_gflops: f64,
    /// Measured speedups of clusters of some sizes over one core.
    #[serde(default)]
    pub speedups: Vec<Speedup>,
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
    /// Device name ("K40m"), the GPU class's name in bounds and traces.
    pub model: String,
    /// How many the machine has.
    pub count: usize,
    /// Kernel rates.
    pub kernels: Vec<GpuKernelRate>,
}

/// The rate of one GPU kernel at one tile size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuKernelRate {
    /// Operation name.
    pub op: String,
    /// Tile size b.
    pub tile: usize,
    /// Gflop/s of one GPU.
    pub gflops: f64,
}

impl CpuKernelRate {
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

    /// Speedup of a cluster of `cores` cores: the measured value when given, else Amdahl's.
    pub fn speedup(&self, cores: usize) -> f64 {
        if let Some(p) = self.speedups.iter().find(|p| p.cores == cores) {
            return p.speedup;
        }
        let c = cores as f64;
        c / (1.0 + self.serial_fraction() * (c - 1.0))
    }
}

/// Flop count of a task by the leading terms paper 002 uses (see the module documentation).
pub fn model_flops(key: &KernelKey) -> f64 {
    let w = key.shapes[key.shapes.len() - 1];
    let (m, n) = (w.0 as f64, w.1 as f64);
    let k = key.shapes[0].1 as f64;
    match key.op {
        Op::Potrf => m * m * m / 3.0,
        Op::Trsm => m * n * n,
        Op::Syrk => k * m * m,
        _ => key.op.flops(&key.shapes),
    }
}

impl PlatformModel {
    /// A built-in model by name (see [`PRESETS`]).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "sirocco" => Some(sirocco()),
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

    /// Reads a TOML model file.
    pub fn load(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| model_error(&name, e))?;
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

    fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(model_error(&self.name, reason));
        if self.cpu.packages == 0 || self.cpu.cores_per_package == 0 {
            return bad("cpu.packages and cpu.cores_per_package must be at least 1".into());
        }
        for k in &self.cpu.kernels {
            check_rate(&self.name, &k.op, k.tile, k.core_gflops)?;
            for p in &k.speedups {
                if p.cores == 0 || !(p.speedup.is_finite() && p.speedup > 0.0) {
                    return bad(format!(
                        "cpu kernel {} at tile {}: speedup {} at {} cores; cores must be >= 1 and speedups > 0",
                        k.op, k.tile, p.speedup, p.cores
                    ));
                }
            }
        }
        if let Some(gpu) = &self.gpu {
            for k in &gpu.kernels {
                check_rate(&self.name, &k.op, k.tile, k.gflops)?;
            }
        }
        Ok(())
    }

    /// Total CPU cores.
    pub fn cores(&self) -> usize {
        self.cpu.packages * self.cpu.cores_per_package
    }

    /// GPUs the machine has.
    pub fn gpu_count(&self) -> usize {
        self.gpu.as_ref().map_or(0, |g| g.count)
    }

    /// The modelled topology: one NUMA node and one L3 per package, one thread per core.
    pub fn topology(&self) -> Topology {
        Topology::synthetic(self.cpu.packages, 1, self.cpu.cores_per_package, 1)
    }

    /// The resource classes, with their counts, of a run with CPU clusters `spec` and `gpus`
    /// GPUs (each taking one core out before the clusters are formed).
    pub fn classes(&self, spec: &ClusterSpec, gpus: usize) -> Result<Vec<(ResourceClass, usize)>> {
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
        if gpus >= self.cores() {
            return Err(Error::InvalidOption {
                option: "gpus",
                reason: format!(
                    "{gpus} GPU(s) would take all {} cores of {} for their host threads",
                    self.cores(),
                    self.name
                ),
            });
        }
        let clusters = spec.resolve(&self.topology().without_last_cores(gpus))?;
        let mut classes = count_classes(
            clusters
                .iter()
                .map(|c| ResourceClass::CpuCluster { cores: c.len() }),
        );
        if let (Some(gpu), true) = (&self.gpu, gpus > 0) {
            classes.push((
                ResourceClass::Gpu {
                    model: gpu.model.clone(),
                },
                gpus,
            ));
        }
        Ok(classes)
    }

    /// The tile sizes the CPU has rates for.
    pub fn tiles(&self) -> Vec<usize> {
        let mut tiles: Vec<usize> = self.cpu.kernels.iter().map(|k| k.tile).collect();
        tiles.sort_unstable();
        tiles.dedup();
        tiles
    }

    /// Gflop/s of `op` at tile size `tile` on a resource of `class`, or `None` when the model
    /// has no rate for it (the class cannot run it).
    pub fn rate(&self, op: Op, tile: usize, class: &ResourceClass) -> Option<f64> {
        match class {
            ResourceClass::CpuCluster { cores } => self
                .cpu
                .kernels
                .iter()
                .find(|k| k.op == op.name() && k.tile == tile)
                .map(|k| k.core_gflops * k.speedup(*cores)),
            ResourceClass::Gpu { model } => self
                .gpu
                .as_ref()
                .filter(|g| g.model == *model)?
                .kernels
                .iter()
                .find(|k| k.op == op.name() && k.tile == tile)
                .map(|k| k.gflops),
        }
    }

    /// Seconds a task with kernel `key`, in a run with tile size `tile`, takes on `class`.
    pub fn duration(&self, key: &KernelKey, tile: usize, class: &ResourceClass) -> Option<f64> {
        self.rate(key.op, tile, class)
            .map(|gflops| model_flops(key) / (gflops * 1e9))
    }

    /// Checks that the CPU, or the GPU when `gpus > 0`, has a rate for each of `ops` at
    /// `tile`, and says which tile sizes do otherwise.
    pub fn check_tile(&self, ops: &[Op], tile: usize, gpus: usize) -> Result<()> {
        let cpu = ResourceClass::CpuCluster { cores: 1 };
        let gpu = self.gpu.as_ref().map(|g| ResourceClass::Gpu {
            model: g.model.clone(),
        });
        for &op in ops {
            let on_cpu = self.rate(op, tile, &cpu).is_some();
            let on_gpu = gpus > 0
                && gpu
                    .as_ref()
                    .is_some_and(|g| self.rate(op, tile, g).is_some());
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
        Ok(())
    }
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

fn model_error(name: &str, reason: impl std::fmt::Display) -> Error {
    Error::PlatformModel {
        name: name.to_owned(),
        reason: reason.to_string(),
    }
}

/// Paper 002, Table 2, per (operation, tile): one core's Gflop/s, GPU / one core, 10 cores /
/// one core.
const SIROCCO_TABLE: [(Op, usize, f64, f64, f64); 8] = [
    (Op::Potrf, 960, 27.78, 1.72, 5.55),
    (Op::Potrf, 1920, 31.11, 5.95, 7.48),
    (Op::Trsm, 960, 34.42, 8.72, 6.75),
    (Op::Trsm, 1920, 34.96, 18.59, 8.48),
    (Op::Syrk, 960, 31.52, 26.96, 6.90),
    (Op::Syrk, 1920, 32.93, 31.73, 8.63),
    (Op::Gemm, 960, 36.46, 28.80, 7.77),
    (Op::Gemm, 1920, 37.27, 30.86, 8.56),
];

/// `sirocco`: two 12-core Haswell E5-2680 v3 and four K40m, rates from paper 002 Table 2
/// (Intel MKL on the cores, cuBLAS/MAGMA on the GPUs) at tiles 960 and 1920.
fn sirocco() -> PlatformModel {
    PlatformModel {
        name: "sirocco".into(),
        description: "2 x 12-core Intel Xeon E5-2680 v3 (Haswell, 2.5 GHz) + 4 NVIDIA K40m; \
            kernel rates of paper 002 (Cojean et al. 2016), Table 2, at tiles 960 and 1920"
            .into(),
        cpu: CpuModel {
            packages: 2,
            cores_per_package: 12,
            kernels: SIROCCO_TABLE
                .iter()
                .map(|&(op, tile, core, _, ten)| CpuKernelRate {
                    op: op.name().into(),
                    tile,
                    core_gflops: core,
                    speedups: vec![Speedup {
                        cores: 10,
                        speedup: ten,
                    }],
                })
                .collect(),
        },
        gpu: Some(GpuModel {
            model: "K40m".into(),
            count: 4,
            kernels: SIROCCO_TABLE
                .iter()
                .map(|&(op, tile, core, gpu, _)| GpuKernelRate {
                    op: op.name().into(),
                    tile,
                    gflops: core * gpu,
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sirocco_reproduces_table_2() {
        let m = PlatformModel::preset("sirocco").unwrap();
        let one = ResourceClass::CpuCluster { cores: 1 };
        let ten = ResourceClass::CpuCluster { cores: 10 };
        let gpu = ResourceClass::Gpu {
            model: "K40m".into(),
        };
        let gemm1 = m.rate(Op::Gemm, 960, &one).unwrap();
        assert!((gemm1 - 36.46).abs() < 1e-12);
        assert!((m.rate(Op::Gemm, 960, &gpu).unwrap() / gemm1 - 28.80).abs() < 1e-12);
        assert!((m.rate(Op::Gemm, 960, &ten).unwrap() / gemm1 - 7.77).abs() < 1e-12);
        assert!((m.rate(Op::Potrf, 1920, &ten).unwrap() / 31.11 - 7.48).abs() < 1e-12);
        // GEMM 960 on one core: 2 * 960^3 flops at 36.46 Gflop/s.
        let d = m
            .duration(&KernelKey::square(Op::Gemm, 960), 960, &one)
            .unwrap();
        assert!((d - 2.0 * 960f64.powi(3) / 36.46e9).abs() < 1e-15);
        assert_eq!(m.rate(Op::Gemm, 1000, &one), None);
        assert_eq!(m.tiles(), [960, 1920]);
    }

    #[test]
    fn amdahl_fit_passes_through_the_points_and_is_monotone() {
        let m = PlatformModel::preset("sirocco").unwrap();
        let gemm = &m.cpu.kernels.iter().find(|k| k.op == "gemm").unwrap();
        assert!((gemm.speedup(10) - 7.77).abs() < 1e-12);
        // The fitted curve also gives 7.77 at 10 cores, 1 at 1 core, and grows sublinearly.
        let s = gemm.serial_fraction();
        assert!((10.0 / (1.0 + 9.0 * s) - 7.77).abs() < 1e-9);
        assert!((gemm.speedup(1) - 1.0).abs() < 1e-12);
        let mut last = 1.0;
        for c in 2..=24 {
            let sp = gemm.speedup(c);
            assert!(sp > last && sp < c as f64, "{c}: {sp}");
            last = sp;
        }
    }

    #[test]
    fn gpus_reserve_cores_before_clusters_are_formed() {
        let m = PlatformModel::preset("sirocco").unwrap();
        let grid = |count, size| ClusterSpec::Grid { count, size };
        let classes = m.classes(&grid(2, 10), 4).unwrap();
        assert_eq!(
            classes,
            [
                (ResourceClass::CpuCluster { cores: 10 }, 2),
                (
                    ResourceClass::Gpu {
                        model: "K40m".into()
                    },
                    4
                )
            ]
        );
        assert_eq!(
            m.classes(&grid(20, 1), 1).unwrap()[0],
            (ResourceClass::CpuCluster { cores: 1 }, 20)
        );
        // 24 cores minus 1 for the GPU: 3 x 8 does not fit, 23 single cores do.
        assert!(m.classes(&grid(3, 8), 1).is_err());
        assert!(m.classes(&grid(23, 1), 1).is_ok());
        assert!(matches!(
            m.classes(&grid(2, 10), 5),
            Err(Error::InvalidOption { option: "gpus", .. })
        ));
    }

    #[test]
    fn toml_round_trip_and_errors() {
        let m = PlatformModel::preset("sirocco").unwrap();
        assert_eq!(PlatformModel::from_toml(&m.to_toml()).unwrap(), m);
        let bad = m
            .to_toml()
            .replacen("core_gflops = 27.78", "core_gflops = -1.0", 1);
        let err = PlatformModel::from_toml(&bad).unwrap_err().to_string();
        assert!(err.contains("rates > 0"), "{err}");
        let unknown = m.to_toml().replacen("op = \"gemm\"", "op = \"gemv\"", 1);
        assert!(PlatformModel::from_toml(&unknown).is_err());
        assert!(PlatformModel::from_toml("name = 1").is_err());
        assert!(PlatformModel::resolve("no-such-platform").is_err());
    }
}
