//! Platform models of the machine at hand, from calibrated performance models: what
//! `hetla calibrate --output FILE` writes, so that this machine can be simulated and the simulation
//! compared with real runs.

use hetla_clusters::{Level, Topology};
use hetla_kernels::{Op, Precision};

use super::platform::{
    CpuKernelRate, CpuModel, GpuKernelRate, GpuModel, LoadedReduction, PlatformModel, Speedup,
};
use crate::{Error, Result};
use hetla_runtime::{KernelKey, PerfModels, ResourceClass};

/// What a calibration of this machine measured, for its platform model
/// ([`PlatformModel::from_calibration`]).
#[derive(Debug, Clone, Copy)]
pub struct Calibration<'a> {
    /// The model's name.
    pub name: &'a str,
    /// What it describes and how it was measured.
    pub description: &'a str,
    /// The machine's topology.
    pub topology: &'a Topology,
    /// The kernels' durations with the machine loaded (every cluster busy).
    pub models: &'a PerfModels,
    /// The same kernels timed on a single cluster of each size, the rest of the machine idle, when
    /// measured.
    pub alone: Option<&'a PerfModels>,
    /// The cluster sizes calibrated (1 among them).
    pub cluster_sizes: &'a [usize],
    /// The kernels the model gives rates of (each must have been calibrated at every tile on one
    /// core): [`CHOLESKY_OPS`](crate::CHOLESKY_OPS), or those of every [`Family`](crate::Family)
    /// calibrated.
    pub ops: &'a [Op],
    /// The tile sizes calibrated.
    pub tiles: &'a [usize],
    /// The precision of the kernels.
    pub precision: Precision,
    /// The runtime's time between two tasks of a worker, in microseconds.
    pub task_overhead_us: f64,
}

impl PlatformModel {
    /// The model of a machine with `c.topology` whose kernels were calibrated into `c.models` on
    /// CPU clusters of the sizes in `c.cluster_sizes` at the tile sizes `c.tiles`: for each kernel
    /// of `c.ops` and tile, one core's Gflop/s (the leading-term flop count of
    /// [`KernelKey::leading_flops`] over the mean duration) and the speedup of each other
    /// calibrated cluster size over one core.
    ///
    /// With `c.alone` the rates and speedups are those alone and each size's loaded reduction is
    /// 1 - loaded rate / alone rate (kept in [0, 0.95]): the model's loaded rates are then the
    /// measured loaded ones.
    pub fn from_calibration(c: &Calibration<'_>) -> Result<Self> {
        let Calibration {
            name,
            description,
            topology,
            models,
            alone,
            cluster_sizes,
            ops,
            tiles,
            precision,
            task_overhead_us,
        } = *c;
        let packages = topology.level(Level::Package).len().max(1);
        let numa = topology.level(Level::Numa).len().max(packages);
        let cores = topology.cores().len();
        let invalid = |reason: String| Error::PlatformModel {
            name: "this machine".into(),
            reason,
        };
        if !cores.is_multiple_of(packages) || !(numa.is_multiple_of(packages)) {
            return Err(invalid(format!(
                "this machine's {cores} cores, {packages} packages and {numa} NUMA nodes are not a uniform layout a platform file can describe"
            )));
        }
        let gflops = |models: &PerfModels, key: &KernelKey, cores: usize| {
            models
                .get(key, &ResourceClass::CpuCluster { cores })
                .filter(|s| s.samples > 0 && s.mean > 0.0)
                .map(|s| key.leading_flops() / s.mean / 1e9)
        };
        let mut kernels = Vec::new();
        for &tile in tiles {
            for &op in ops {
                let key = KernelKey::square(op, tile).in_precision(precision);
                let loaded = |c| gflops(models, &key, c);
                let alone_rate = |c| alone.and_then(|a| gflops(a, &key, c));
                // The base rates: alone when they were measured, else the loaded ones.
                let base = |c| match alone_rate(1) {
                    Some(_) => alone_rate(c),
                    None => loaded(c),
                };
                let core = base(1).ok_or_else(|| {
                    invalid(format!("no calibrated {op} at tile {tile} on one core"))
                })?;
                let speedups = cluster_sizes
                    .iter()
                    .filter(|&&c| c > 1)
                    .filter_map(|&c| {
                        base(c).map(|rate| Speedup {
                            cores: c,
                            speedup: (rate / core).min(c as f64),
                        })
                    })
                    .collect();
                let reductions = cluster_sizes
                    .iter()
                    .filter_map(|&c| {
                        let (a, l) = (alone_rate(c)?, loaded(c)?);
                        Some(LoadedReduction {
                            cores: c,
                            reduction: (1.0 - l / a).clamp(0.0, 0.95),
                        })
                    })
                    .collect();
                kernels.push(CpuKernelRate {
                    op: op.name().into(),
                    tile,
                    precision,
                    core_gflops: core,
                    speedups,
                    loaded: reductions,
                });
            }
        }
        let model = Self {
            name: name.to_owned(),
            description: description.to_owned(),
            cpu: CpuModel {
                packages,
                cores_per_package: cores / packages,
                numa_per_package: numa / packages,
                task_overhead_us,
                outside_graph: Vec::new(),
                kernels,
            },
            gpu: None,
        };
        model.validate()?;
        Ok(model)
    }

    /// The same platform with the GPUs `gpu` describes (checked like a platform file).
    pub fn with_gpu(mut self, gpu: GpuModel) -> Result<Self> {
        self.gpu = Some(gpu);
        self.validate()?;
        Ok(self)
    }
}

impl GpuModel {
    /// The GPU section of a platform file from what `hetla calibrate` measured on `count` GPUs
    /// named `name` (their class in `models`): each Cholesky kernel's rate at each of `tiles` from
    /// its mean duration alone, the other kernels' that ran on the GPUs inside factorisations
    /// (LU's: `in_run`, [`crate::record_in_run`]) where they were measured, the link both ways as
    /// measured (the default link when it was not), and each GPU's memory budget in bytes.
    pub fn from_calibration(
        name: &str,
        count: usize,
        memory_bytes: usize,
        (models, in_run): (&PerfModels, &PerfModels),
        tiles: &[usize],
        precision: Precision,
    ) -> Result<Self> {
        let class = ResourceClass::Gpu { name: name.into() };
        let mut kernels = Vec::new();
        let others = (Op::ALL.into_iter()).filter(|op| !crate::CHOLESKY_OPS.contains(op));
        for (op, &tile) in others.flat_map(|op| tiles.iter().map(move |t| (op, t))) {
            let key = KernelKey::square(op, tile).in_precision(precision);
            if let Some(stats) =
                (in_run.get(&key, &class)).filter(|s| s.samples > 0 && s.mean > 0.0)
            {
                kernels.push(GpuKernelRate {
                    op: op.name().into(),
                    tile,
                    precision,
                    gflops: key.leading_flops() / stats.mean / 1e9,
                });
            }
        }
        for &tile in tiles {
            for op in crate::CHOLESKY_OPS {
                let key = KernelKey::square(op, tile).in_precision(precision);
                let stats = models
                    .get(&key, &class)
                    .filter(|s| s.samples > 0 && s.mean > 0.0)
                    .ok_or_else(|| Error::PlatformModel {
                        name: "this machine".into(),
                        reason: format!("no calibrated {op} at tile {tile} on {name}"),
                    })?;
                kernels.push(GpuKernelRate {
                    op: op.name().into(),
                    tile,
                    precision,
                    gflops: key.leading_flops() / stats.mean / 1e9,
                });
            }
        }
        Ok(Self {
            name: name.to_owned(),
            count,
            memory_gb: memory_bytes as f64 / 1e9,
            link: models
                .link(name)
                .copied()
                .unwrap_or(hetla_runtime::DEFAULT_LINK),
            // Timed apart by the caller: the tensor cores' speedups ([`crate::measure_tensor`]),
            // without which a run with tensor math on this model is refused, the packing for staged
            // copies ([`crate::calibrate_packing`]), the launch ([`crate::measure_launch`]), the
            // copies from pageable memory ([`crate::measure_pageable`]) and the page-locking
            // ([`crate::measure_locking`]).
            tensor: Vec::new(),
            staging: Vec::new(),
            launch_us: 0.0,
            pageable: None,
            lock_gb_per_s: 0.0,
            device_copies: None,
            kernels,
        })
    }
}

/// The cluster sizes calibration measures for a platform file of a machine with `cores` cores: 1,
/// the powers of two below `cores`, and `cores` (sizes in between are interpolated).
pub fn calibration_sizes(cores: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = std::iter::successors(Some(1), |&c| Some(c * 2))
        .take_while(|&c| c < cores)
        .collect();
    sizes.push(cores.max(1));
    sizes.dedup();
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CHOLESKY_OPS;

    #[test]
    fn sizes_cover_one_powers_of_two_and_all_cores() {
        assert_eq!(calibration_sizes(1), [1]);
        assert_eq!(calibration_sizes(2), [1, 2]);
        assert_eq!(calibration_sizes(12), [1, 2, 4, 8, 12]);
        assert_eq!(calibration_sizes(16), [1, 2, 4, 8, 16]);
    }

    #[test]
    fn rates_and_speedups_come_from_the_mean_durations() {
        let topology = Topology::synthetic(1, 1, 4, 1);
        let mut models = PerfModels::new();
        for op in CHOLESKY_OPS {
            let key = KernelKey::square(op, 100);
            let flops = key.leading_flops();
            // 1 Gflop/s on one core, 3 Gflop/s on four.
            models.record(&key, &ResourceClass::CpuCluster { cores: 1 }, flops / 1e9);
            models.record(&key, &ResourceClass::CpuCluster { cores: 4 }, flops / 3e9);
        }
        let calibration = Calibration {
            name: "t",
            description: "",
            topology: &topology,
            models: &models,
            alone: None,
            cluster_sizes: &[1, 4],
            ops: &CHOLESKY_OPS,
            tiles: &[100],
            precision: Precision::D,
            task_overhead_us: 5.0,
        };
        let m = PlatformModel::from_calibration(&calibration).unwrap();
        assert_eq!((m.cpu.packages, m.cpu.cores_per_package), (1, 4));
        let gemm = m.cpu.kernels.iter().find(|k| k.op == "gemm").unwrap();
        assert!((gemm.core_gflops - 1.0).abs() < 1e-9);
        assert!((gemm.speedup(4) - 3.0).abs() < 1e-9);
        // Round trip through TOML, and a tile never calibrated is an error.
        assert_eq!(PlatformModel::from_toml(&m.to_toml()).unwrap(), m);
        let uncalibrated = Calibration {
            cluster_sizes: &[1],
            tiles: &[200],
            task_overhead_us: 0.0,
            ..calibration
        };
        assert!(PlatformModel::from_calibration(&uncalibrated).is_err());
    }
}
